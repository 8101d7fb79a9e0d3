#include "cli/calibrate.hpp"

#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <variant>

#include "cli/build_info.hpp"
#include "cli/list.hpp"
#include "cli/mpi_start.hpp"
#include "cli/options.hpp"
#include "cli/table.hpp"
#include "common/error.hpp"
#include "results/links_io.hpp"
#include "runtime/calibrate.hpp"
#include "runtime/factory.hpp"
#include "runtime/mpi_finalize.hpp"
#include "runtime/mpi_util.hpp"
#include "runtime/wait.hpp"

namespace bb {
namespace {

using json = nlohmann::json;

struct CalibrateOptions {
  std::string pairs = "all";
  int reps = CalibrationOptions{}.reps, warmup = CalibrationOptions{}.warmup;
  int rounds = CalibrationOptions{}.rounds;
  std::string max_bytes = "1M";
  int max_regimes = FitOptions{}.max_regimes, min_sizes = FitOptions{}.min_points;
  BackendKind backend = BackendKind::kCpu;
  std::string transport;
  bool json = false;
  std::string out;
  double timeout = 600;
};

// One line to stderr in one write(2): lines of ranks sharing the stream never interleave.
void say(std::string line) {
  line += '\n';
  std::fflush(stderr);
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

std::string us(double seconds) {
  return fmt(seconds * 1e6);
}

std::string gbps(double beta) {
  return beta > 0 ? fmt(beta / 1e9) : "inf";
}

std::string pct(double x) {
  return fmt(100 * x, 3) + "%";
}

// A relative error in percent to one decimal, signed when asked.
std::string pct1(double x, bool sign = false) {
  char buf[32];
  std::snprintf(buf, sizeof buf, sign ? "%+.1f%%" : "%.1f%%", 100 * x);
  return buf;
}

// The CPUs the ranks of `comm` may run on together (the union of their affinities), on rank 0
// (0 elsewhere, or where no rank can tell). Collective.
int cpus_of_ranks(MPI_Comm comm, double timeout_s) {
  std::vector<double> mine;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) mine.push_back(c);
  std::set<double> all;
  for (const auto& from : mpi::gather(mine, 0, comm, timeout_s))
    all.insert(from.begin(), from.end());
  return static_cast<int>(all.size());
}

// Each JSON sample (links_to_json's order: by size) gains its quartiles, the piecewise fit's
// time there and its relative error.
void add_spread_json(json& links, const std::vector<PairSamples>& measured,
                     const std::vector<LinkFit>& fits) {
  for (std::size_t p = 0; p < fits.size() && p < links.size(); ++p)
    for (std::size_t k = 0; k < fits[p].samples.size() && k < measured[p].spread.size(); ++k) {
      const LinkSample& x = fits[p].samples[k];
      json& js = links[p]["samples"][k];
      js["q25_s"] = measured[p].spread[k].q25;
      js["q75_s"] = measured[p].spread[k].q75;
      js["fit_s"] = fits[p].cost(x.bytes);
      js["rel_error"] = fits[p].rel_error(x);
    }
}

void add_options(CLI::App& app, CalibrateOptions& o) {
  add_choice(app, "--pairs", o.pairs, "all (every directed pair) or neighbours (r -> r±1)",
             {"all", "neighbours"});
  add_with_default(app, "--reps", o.reps,
                   "Timed round trips per size, all rounds together (their median is used)");
  add_with_default(app, "--warmup", o.warmup, "Untimed round trips at each visit of a size");
  add_with_default(app, "--rounds", o.rounds,
                   "Sweeps over the sizes (the reps are shared among them; load falls on every "
                   "size alike; at most --reps of them)");
  add_with_default(app, "--max-bytes", o.max_bytes,
                   "Largest size (8 B doubling up to it); a run's messages are hidden·mb-size·4 "
                   "bytes: give at least 4x that");
  add_with_default(app, "--max-regimes", o.max_regimes,
                   "Regimes of the piecewise fit (1: one line)");
  add_with_default(app, "--min-sizes", o.min_sizes,
                   "Measured sizes per regime (1: spikes get one)");
  add_backend_options(app, o.backend, o.transport);
  app.add_flag("--json", o.json, "Print JSON (samples and fits) instead of the table");
  app.add_option("--out", o.out, "Write /links into this HDF5 file (created, or /links replaced)")
      ->check(CLI::Validator(
          [](std::string& s) { return s.empty() ? std::string("needs a file name") : ""; },
          "FILE"));
  add_with_default(app, "--timeout", o.timeout, "Watchdog: seconds any single wait may take");
}

void validate(const CalibrateOptions& o) {
  if (o.reps < 1 || o.reps > 100000) throw ConfigError("--reps must be 1..100000");
  if (o.warmup < 0 || o.warmup > 100000) throw ConfigError("--warmup must be 0..100000");
  if (o.rounds < 1 || o.rounds > 100000) throw ConfigError("--rounds must be 1..100000");
  if (o.max_regimes < 1 || o.max_regimes > 8) throw ConfigError("--max-regimes must be 1..8");
  if (o.min_sizes < 1 || o.min_sizes > 64) throw ConfigError("--min-sizes must be 1..64");
  if (!(o.timeout > 0)) throw ConfigError("--timeout must be > 0 seconds");
  calibration_sizes(parse_bytes(o.max_bytes, "--max-bytes"));
}

Attrs link_attrs(const CalibrateOptions& o, const std::string& transport, int P) {
  return {{"method", std::string(kCalibrationMethod)},
          {"backend", std::string(name_of(o.backend))},
          {"transport", transport},
          {"ranks", std::int64_t{P}},
          {"pairs", o.pairs},
          {"reps", std::int64_t{o.reps}},
          {"warmup", std::int64_t{o.warmup}},
          {"rounds", std::int64_t{o.rounds}},
          {"cold_reps", std::int64_t{CalibrationOptions{}.cold_reps}},
          {"cold_pause_s", CalibrationOptions{}.cold_pause_s},
          {"max_bytes", static_cast<std::int64_t>(parse_bytes(o.max_bytes, "--max-bytes"))},
          {"max_regimes", std::int64_t{o.max_regimes}},
          {"min_sizes", std::int64_t{o.min_sizes}},
          {"git_sha", std::string(build_git_sha())}};
}

// Everything after MPI_Init; returns the exit code on every rank.
int calibrate_all(int argc, char** argv) {
  const int me = mpi::rank(MPI_COMM_WORLD), world = mpi::size(MPI_COMM_WORLD);
  CalibrateOptions o;
  CLI::App app{
      "bubblebench calibrate: point-to-point time per directed rank pair and size, "
      "fitted alpha + bytes/beta (start under mpiexec -n P)",
      "bubblebench calibrate"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  add_options(app, o);
  int code = kExitOk;
  std::string line;
  const auto fail = [&](int c, const std::string& text) {
    if (code == kExitOk) {
      code = c;
      line = text;
    }
  };
  // The worst code wins; the lowest rank that has it prints its line.
  const auto agree = [&] {
    const int worst = mpi::allreduce_max(code, MPI_COMM_WORLD, o.timeout);
    if (worst != kExitOk &&
        mpi::allreduce_min(code == worst ? me : world, MPI_COMM_WORLD, o.timeout) == me)
      say(line);
    return worst;
  };
  try {
    app.parse(argc - 1, argv + 1);
    validate(o);
  } catch (const CLI::CallForHelp&) {
    if (me == 0) std::cout << app.help();
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    fail(kExitConfig, std::string("bubblebench: error: ") + e.what() + " (see --help)");
  } catch (const ConfigError& e) {
    fail(kExitConfig, std::string("bubblebench: error: ") + e.what());
  }
  if (const int c = agree(); c != kExitOk) return c;
  if (world < 2) {
    if (me == 0)
      say("bubblebench: error: calibrate needs at least 2 ranks (mpiexec -n P bubblebench "
          "calibrate)");
    return kExitConfig;
  }

  MPI_Comm p2p = MPI_COMM_NULL, coll = MPI_COMM_NULL;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transport> transport;
  const TransportKind transport_kind = transport_of(o.transport, o.backend);
  const std::string transport_name(name_of(transport_kind));
  try {
    p2p = mpi::duplicate(MPI_COMM_WORLD, o.timeout);
    coll = mpi::duplicate(MPI_COMM_WORLD, o.timeout);
    int local = 0;
    if (const char* v = std::getenv("MPI_LOCALRANKID")) local = std::atoi(v);
    if (const char* v = std::getenv("SLURM_LOCALID")) local = std::atoi(v);
    backend = make_backend(o.backend, local);
  } catch (const TimeoutError&) {
    throw;  // the watchdog: exit 3 with its own line (calibrate_main)
  } catch (const std::exception& e) {
    fail(kExitConfig,
         std::string("bubblebench: error: rank ") + std::to_string(me) + ": " + e.what());
  }
  if (const int c = agree(); c != kExitOk) return c;
  try {
    transport = make_transport(transport_kind, p2p, *backend, o.timeout);
  } catch (const TimeoutError&) {
    throw;
  } catch (const std::exception& e) {
    fail(kExitConfig,
         std::string("bubblebench: error: rank ") + std::to_string(me) + ": " + e.what());
  }
  if (const int c = agree(); c != kExitOk) return c;

  CalibrationOptions co;
  co.pairs = o.pairs == "all" ? all_pairs(world) : neighbour_pairs(world);
  co.max_bytes = parse_bytes(o.max_bytes, "--max-bytes");
  co.reps = o.reps;
  co.warmup = o.warmup;
  co.rounds = o.rounds;
  co.timeout_s = o.timeout;
  const int cpus = cpus_of_ranks(coll, o.timeout);
  const std::vector<PairSamples> measured = calibrate_links(*transport, *backend, coll, co);
  if (me == 0) {
    FitOptions fo;
    fo.max_regimes = o.max_regimes;
    fo.min_points = o.min_sizes;
    const std::vector<LinkFit> fits = fit_links(measured, fo);
    if (!o.out.empty()) {
      try {
        write_links_file(o.out, fits, link_attrs(o, transport_name, world));
      } catch (const IoError& e) {
        fail(kExitIo, std::string("bubblebench: I/O error: ") + e.what());
      } catch (const ConfigError& e) {
        fail(kExitConfig, std::string("bubblebench: error: ") + e.what());
      }
    }
    if (o.json) {
      json j;
      for (const auto& [k, v] : link_attrs(o, transport_name, world))
        std::visit([&, key = k](const auto& x) { j[key] = x; }, v);
      j["links"] = links_to_json(fits);
      add_spread_json(j["links"], measured, fits);
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << calibration_report(measured, fits, world, cpus) << "\n" << links_table(fits);
    }
    std::cout.flush();
    if (code != kExitOk) say(line);
  }
  mpi::broadcast(code, 0, coll, o.timeout);
  transport.reset();
  MPI_Comm_free(&p2p);
  MPI_Comm_free(&coll);
  return code;
}

}  // namespace

std::string links_table(const std::vector<LinkFit>& fits) {
  std::ostringstream out;
  std::vector<std::vector<std::string>> rows;
  for (const LinkFit& f : fits)
    rows.push_back({std::to_string(f.src) + "->" + std::to_string(f.dst), us(f.line.alpha),
                    gbps(f.line.beta), pct(f.line_error.max_rel), pct(f.line_error.median_rel),
                    std::to_string(f.regimes.size()), pct(f.regimes_error.max_rel),
                    pct(f.regimes_error.median_rel), us(f.wake_s)});
  print_table(out,
              {"pair", "alpha_us", "beta_GB/s", "line_max_err", "line_median_err", "regimes",
               "regimes_max_err", "regimes_median_err", "wake_us"},
              rows);
  for (const LinkFit& f : fits) {
    out << f.src << "->" << f.dst << " regimes:";
    for (const LinkRegime& r : f.regimes)
      out << "  [" << fmt(r.lo_bytes) << ".." << fmt(r.hi_bytes) << " B: alpha " << us(r.line.alpha)
          << " us, beta " << gbps(r.line.beta) << " GB/s]";
    // The size the piecewise fit misses most.
    const LinkSample* worst = nullptr;
    double worst_rel = -1;
    for (const LinkSample& x : f.samples)
      if (const double rel = std::abs(f.rel_error(x)); rel > worst_rel) {
        worst_rel = rel;
        worst = &x;
      }
    if (worst != nullptr)
      out << "  worst " << fmt(worst->bytes) << " B: measured " << us(worst->seconds) << " us, fit "
          << us(f.cost(worst->bytes)) << " us";
    out << "\n";
  }
  out << "alpha: latency, beta: bandwidth of the one-line fit; errors: |fit - measured| / "
         "measured over the sizes (one way, median of the round trips); wake: what a receiver "
         "that has waited 1 ms (asleep in the runtime's backoff) adds to a hop, measured apart "
         "and added to every message's cost in sim --links and the attribution\n";
  return out.str();
}

std::string calibration_report(const std::vector<PairSamples>& measured,
                               const std::vector<LinkFit>& fits, int ranks, int cpus) {
  std::ostringstream out;
  std::vector<std::vector<std::string>> rows;
  struct Worst {
    double rel = -1;
    std::size_t k = 0;
  };
  std::vector<Worst> worst(fits.size());
  for (std::size_t p = 0; p < fits.size(); ++p) {
    const LinkFit& f = fits[p];
    for (std::size_t k = 0; k < f.samples.size(); ++k) {
      const LinkSample& x = f.samples[k];
      const double fit = f.cost(x.bytes), rel = f.rel_error(x);
      std::size_t regime = 0;
      while (regime + 1 < f.regimes.size() && x.bytes > f.regimes[regime].hi_bytes) ++regime;
      const bool spread = p < measured.size() && k < measured[p].spread.size();
      rows.push_back({std::to_string(f.src) + "->" + std::to_string(f.dst), fmt(x.bytes),
                      us(x.seconds), spread ? us(measured[p].spread[k].q25) : "",
                      spread ? us(measured[p].spread[k].q75) : "", us(fit), pct1(rel, true),
                      std::to_string(regime + 1)});
      if (std::abs(rel) > worst[p].rel) worst[p] = {std::abs(rel), k};
    }
  }
  out << "# one way per size: median of the round trips (q25..q75: their quartiles), the "
         "piecewise alpha-beta fit, error = (fit - median) / median\n";
  print_table(out, {"pair", "bytes", "median_us", "q25_us", "q75_us", "fit_us", "error", "regime"},
              rows);
  double largest = 0;
  std::string where;
  for (std::size_t p = 0; p < fits.size(); ++p) {
    const LinkFit& f = fits[p];
    if (worst[p].rel < 0) continue;
    const LinkSample& x = f.samples[worst[p].k];
    const std::string pair = std::to_string(f.src) + "->" + std::to_string(f.dst);
    out << pair << ": max |error| " << pct1(worst[p].rel) << " at " << fmt(x.bytes) << " B ("
        << f.regimes.size() << " regimes; one line: " << pct1(f.line_error.max_rel) << ")";
    if (p < measured.size() && worst[p].k < measured[p].spread.size()) {
      const SampleSpread& q = measured[p].spread[worst[p].k];
      const double width = (q.q75 - q.q25) / x.seconds;
      if (width > kCalibrationTarget)
        out << "; its quartiles span " << pct1(width)
            << " of the median there: the time itself varies (load, scheduling)";
    }
    out << "\n";
    if (worst[p].rel > largest || where.empty()) {
      largest = worst[p].rel;
      where = pair + " at " + fmt(x.bytes) + " B";
    }
  }
  out << "largest |error| over " << fits.size() << " pairs: " << pct1(largest) << " (" << where
      << "): " << (largest <= kCalibrationTarget ? "within " : "NOT within ")
      << pct1(kCalibrationTarget) << "\n";
  if (cpus > 0 && ranks > cpus)
    out << "note: " << ranks << " ranks on " << cpus
        << " CPUs: ranks that share a core wait for the scheduler to run the other one (a "
           "message costs a time slice, not a transfer); such pairs' times are the "
           "scheduler's\n";
  return out.str();
}

int calibrate_main(int argc, char** argv) {
  if (const int started = start_mpi(&argc, &argv); started != kExitOk) return started;
  int code = kExitOk;
  try {
    code = calibrate_all(argc, argv);
  } catch (const std::exception& e) {
    // A wait past --timeout (exit 3) or a failure in MPI: the whole job ends here.
    const bool timeout = dynamic_cast<const TimeoutError*>(&e) != nullptr;
    say(timeout ? std::string(e.what())
                : "bubblebench: rank " + std::to_string(mpi::rank(MPI_COMM_WORLD)) +
                      ": error: " + e.what());
    abort_job(timeout ? kExitTimeout : kExitCheckFailed);
  }
  return mpi::finalize(code);
}

}  // namespace bb
