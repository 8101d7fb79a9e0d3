// `bubblebench run` (design §5.1): every configuration of the sweep end to end, in one MPI
// launch. Phases:
//   1. MPI_Init, then every rank parses and validates the same arguments and builds (generate,
//      validate, lower) every configuration of the cartesian sweep (schedule × M × v × hidden
//      × layers × mb-size × recompute) deterministically, with its run_key. Then the backend,
//      then (rank 0 only) the outputs: the --out results file, created, resumed or replaced,
//      and the --trace directory; then the transport. Any error there is agreed with two
//      non-blocking allreduces; one rank prints one line and every rank exits with the same
//      code, before any point-to-point traffic. With --resume rank 0 broadcasts (non-blocking)
//      which configurations the file holds already; every rank skips those.
//   2. Per configuration (src/harness/runner.hpp): an Executor on this rank; with --check, one
//   extra untimed step whose
//      gradients (before any optimizer update) rank 0 compares with the sequential
//      reference; then --warmup + --iters steps, each followed by the DualPipe gradient sum
//      and the optimizer; the records (and with --out/--trace every compute and SEND/RECV
//      event) go to rank 0 (Igatherv), which computes the summary, writes the run whole to the
//      results file and its trace (on a thread, while the next run sets up and warms up;
//      joined before its first timed step), then prints the run's progress line.
//   3. Rank 0 prints the table (or JSON). Exit 1 if a check failed.
// This file keeps the options, their validation, the cross-rank agreement protocol and main;
// the sweep, the training step, the measurement and the field table live in src/harness/.
// Exceptions inside a run abort the job (MPI_Abort) with the matching exit code; the
// watchdog's TimeoutError exits 3; a failed write exits 4.
#include "cli/run.hpp"

#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/build_info.hpp"
#include "cli/debug_options.hpp"
#include "cli/list.hpp"
#include "cli/mpi_start.hpp"
#include "cli/options.hpp"
#include "cli/stage_options.hpp"
#include "cli/table.hpp"
#include "cli/validators.hpp"
#include "common/error.hpp"
#include "harness/memory.hpp"
#include "harness/output.hpp"
#include "harness/provenance.hpp"
#include "harness/runner.hpp"
#include "harness/sweep.hpp"
#include "results/hdf5_file.hpp"
#include "runtime/factory.hpp"
#include "runtime/mpi_finalize.hpp"
#include "runtime/mpi_util.hpp"
#include "runtime/placement.hpp"
#include "runtime/wait.hpp"
#include "schedule/generators.hpp"
#include "schedule/schedule_info.hpp"

namespace bb {
namespace {

using harness::RunConfig;
using harness::RunSettings;
using harness::say;

struct RunOptions : StageOptions, DebugOptions {  // --stage ..., --debug-*
  std::string schedules = "1f1b";
  std::string M = "8";
  std::string v = "1";
  int P = 0;  // 0: not given (P is the world size)
  BackendKind backend = BackendKind::kCpu;
  std::string transport;  // default: by backend (transport_of)
  harness::Compute compute = harness::Compute::kGemm;
  std::string t_f = "1ms", t_b = "2ms", t_w = "0", t_fb;
  int mem_limit = 0;                                       // zb-auto's (0: P)
  std::string hidden = "64", layers = "1", mb_size = "8";  // LISTs
  Dtype dtype = Dtype::kF32;
  int warmup = 1, iters = 5;
  harness::Sync sync = harness::Sync::kBarrier;
  bool check = false;
  std::string recompute = "off";
  double timeout = 600;
  std::string format = "table";
  OptimizerConfig::Kind optimizer = OptimizerConfig::Kind::kSgd;
  double lr = 1e-3;
  std::uint64_t seed = 1234;
  std::string out, trace;
  bool resume = false, force = false, no_calibrate = false;
  bool hold_sends = false;
};

// An error of phase 1: exit code and one line.
struct SetupError {
  int code = 0;
  std::string line;
};

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

void add_options(CLI::App& app, RunOptions& o) {
  add_with_default(app, "--schedule,-s", o.schedules, schedule_option_help(true));
  add_with_default(app, "-M", o.M, "Micro-batches per step (LIST: 4,8 or 4:64:x2 or 2:8:2)");
  add_with_default(app, "-v", o.v, "Chunks per rank for " + schedules_taking_v() + " (LIST)");
  app.add_option("-P", o.P, "Pipeline ranks: must equal the MPI world size (optional)");
  add_backend_options(app, o.backend, o.transport);
  add_enum_choice(app, "--compute", o.compute, "gemm (the MLP math) or synthetic (timed waits)");
  add_with_default(app, "--t-f", o.t_f, "Synthetic F time of one stage (2ms, 500us, or seconds)");
  add_with_default(app, "--t-b", o.t_b, "Synthetic B time of one stage");
  add_with_default(app, "--t-w", o.t_w,
                   "Synthetic W time of one stage (0: B is the whole backward)");
  app.add_option("--t-fb", o.t_fb, "Synthetic overlapped F&B pair time (default: the sum)");
  app.add_option("--mem-limit", o.mem_limit,
                 schedules_ordered_by_costs() +
                     ": live micro-batches per rank (0: P); it orders by --t-f/--t-b/--t-w")
      ->check(CLI::NonNegativeNumber);
  add_with_default(app, "--hidden", o.hidden, "Hidden width h (LIST)");
  add_with_default(app, "--layers", o.layers, "Blocks per chunk (LIST)");
  add_with_default(app, "--mb-size", o.mb_size,
                   "Rows of a micro-batch; transformer: sequences (LIST)");
  add_enum_choice(app, "--dtype", o.dtype,
                  "fp32 or bf16: activations, their gradients and messages (weights stay fp32)");
  add_with_default(app, "--warmup", o.warmup, "Untimed steps per configuration");
  add_with_default(app, "--iters", o.iters, "Timed steps per configuration");
  add_enum_choice(app, "--sync", o.sync, "barrier (ranks aligned per step) or none (back to back)");
  app.add_flag("--check", o.check,
               "Compare loss and gradients of one extra step with the sequential reference");
  app.add_flag("--recompute{on}", o.recompute,
               "Recompute activations in the backward: --recompute (on), --recompute=off|on|both")
      ->check(CLI::IsMember({"off", "on", "both"}));
  add_with_default(app, "--timeout", o.timeout, "Watchdog: seconds any single wait may take");
  add_choice(app, "--format", o.format, "table (row by row, as runs finish), csv or json",
             {"table", "csv", "json"});
  add_enum_choice(app, "--optimizer", o.optimizer, "sgd or adam");
  add_with_default(app, "--lr", o.lr, "Learning rate");
  // Given values are checked as written (cli/validators.hpp).
  const CLI::Validator not_empty = non_empty_path(), u64 = uint64_text();
  app.add_option("--seed", o.seed, "Seed of parameters, inputs and targets")
      ->check(u64)
      ->capture_default_str();
  app.add_option("--out", o.out, "HDF5 results file (written by rank 0, one run at a time)")
      ->check(not_empty);
  app.add_flag("--resume", o.resume, "Continue --out: skip the runs already complete in it");
  app.add_flag("--force", o.force, "Replace --out if it exists");
  app.add_flag("--no-calibrate", o.no_calibrate, "Skip the link calibration before the runs");
  app.add_flag("--hold-sends", o.hold_sends,
               "Keep each send buffer until the step's end (as PyTorch's schedules, which wait "
               "for their sends last) instead of releasing it when its send completes: what "
               "releasing them saves (docs/memory.md)");
  app.add_option("--trace", o.trace,
                 "Directory for one Chrome-trace JSON per run (the last timed iteration)")
      ->check(not_empty);
  add_stage_options(app, o);
  add_debug_options(app, o);
}

// The parsed settings every configuration shares. Throws ConfigError.
RunSettings settings_of(const RunOptions& o) {
  RunSettings s;
  s.backend = o.backend;
  s.transport = transport_of(o.transport, o.backend);
  s.compute = o.compute;
  s.t_f = duration_of(o.t_f, "--t-f");
  s.t_b = duration_of(o.t_b, "--t-b");
  s.t_w = duration_of(o.t_w, "--t-w");
  s.t_fb = o.t_fb.empty() ? -1.0 : duration_of(o.t_fb, "--t-fb");
  s.dtype = o.dtype;
  s.warmup = o.warmup;
  s.iters = o.iters;
  s.sync = o.sync;
  s.check = o.check;
  s.timeout = o.timeout;
  s.optimizer = o.optimizer;
  s.lr = o.lr;
  s.seed = o.seed;
  s.out = o.out;
  s.trace = o.trace;
  s.calibrate = !o.no_calibrate;
  s.hold_sends = o.hold_sends;
  return apply_stage_options(o, s);
}

void validate_options(const RunOptions& o, int world) {
  if (o.resume && o.out.empty()) throw ConfigError("--resume needs --out FILE.h5");
  if (o.force && o.out.empty()) throw ConfigError("--force needs --out FILE.h5");
  if (o.resume && o.force)
    throw ConfigError("--resume and --force exclude each other (continue the file or replace it)");
  if (o.P != 0 && o.P != world)
    throw ConfigError("-P " + std::to_string(o.P) + " does not match the MPI world size " +
                      std::to_string(world) + " (run takes P from mpiexec -n / srun -n)");
  validate_stage_options(o, int_list_in(o.hidden, "--hidden", 1, 65536));
  int_list_in(o.layers, "--layers", 1, 4096);
  int_list_in(o.mb_size, "--mb-size", 1, 1 << 20);
  if (o.warmup < 0 || o.warmup > 100000) throw ConfigError("--warmup must be 0..100000");
  if (o.iters < 1 || o.iters > 100000) throw ConfigError("--iters must be 1..100000");
  if (o.sync == harness::Sync::kNone && o.iters < 2)
    throw ConfigError("--sync none measures the period between steps: needs --iters >= 2");
  if (!(o.timeout > 0)) throw ConfigError("--timeout must be > 0 seconds");
  if (!(o.lr >= 0) || !std::isfinite(o.lr)) throw ConfigError("--lr must be >= 0");
  if (o.check && o.compute == harness::Compute::kSynthetic)
    throw ConfigError("--check needs --compute gemm (synthetic compute has no gradients)");
  (void)settings_of(o);  // the durations parse
}

// Every combination of the lists; `lines` gets a `skip:` line per skipped combination and the
// `note:` lines, which rank 0 prints once the setup has succeeded (an error is the only line).
std::vector<RunConfig> expand(const RunOptions& o, const RunSettings& settings, int world,
                              std::vector<std::string>& lines) {
  const auto Ms = parse_int_list(o.M, "-M");
  const auto vs = parse_int_list(o.v, "-v");
  harness::ModelLists lists;
  lists.hidden = int_list_in(o.hidden, "--hidden", 1, 65536);
  lists.layers =  // a fixed model: no blocks per chunk (stage_layers splits model_layers)
      o.model_layers > 0 ? std::vector<int>{0} : int_list_in(o.layers, "--layers", 1, 4096);
  lists.mb_size = int_list_in(o.mb_size, "--mb-size", 1, 1 << 20);
  lists.recompute.clear();
  if (o.recompute != "on") lists.recompute.push_back(false);
  if (o.recompute != "off") lists.recompute.push_back(true);
  const auto names = sweep_names(o.schedules);
  const bool sweep = names.size() * Ms.size() * vs.size() > 1;
  ScheduleParams base{world};  // zb-auto orders by the synthetic times, whatever --compute
  base.t_f = {settings.t_f};
  base.t_b = {settings.t_b};
  base.t_w = {settings.t_w};
  base.mem_limit = o.mem_limit;
  ScheduleSweep schedules = expand_schedules(o.schedules, base, Ms, vs);
  std::vector<harness::NamedSchedule> named;
  for (auto& [name, s] : schedules.schedules) named.push_back({name, std::move(s)});
  auto out = harness::make_configs(std::move(named), lists, settings, world);
  // One `skip:` line per rejection (when nothing is left, expand_schedules threw the last).
  if (sweep)
    for (const auto& why : schedules.skipped) lines.push_back("skip: " + why);
  for (const auto& note : schedules.notes) lines.push_back("note: " + note);
  return out;
}

// --- Phase 1: the launch, agreed across ranks --------------------------------------------------

// What phase 1 builds on every rank, and the agreement after each of its steps: the worst exit
// code wins and the lowest rank that has it prints its line. Steps that make collective
// objects (the NCCL transport) only start when every rank got through the previous one.
struct Launch {
  int world = 1, me = 0;
  RunOptions o;
  RunSettings settings;
  SetupError err;
  std::vector<RunConfig> configs;
  std::vector<std::string> lines;  // skip:/note: lines of the sweep (rank 0 prints them)
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transport> transport;
  MPI_Comm p2p = MPI_COMM_NULL, coll = MPI_COMM_NULL;
  std::unique_ptr<ResultsFile> results;  // rank 0 with --out
  std::string trace_dir;                 // rank 0 with --trace
  bool new_file = false;  // this launch made the file: removed again if the setup fails
  std::vector<int> skip;  // --resume: configurations complete in the file

  int agree() {
    const int code = mpi::allreduce_max(err.code, MPI_COMM_WORLD, o.timeout);
    if (code != 0) {
      const int printer =
          mpi::allreduce_min(err.code == code ? me : world, MPI_COMM_WORLD, o.timeout);
      if (printer == me) say(err.line);
    }
    return code;
  }
  template <typename Phase>
  void attempt(Phase&& phase) {
    try {
      phase();
    } catch (const TimeoutError&) {
      throw;  // the watchdog: exit 3 with its own line (run_main)
    } catch (const ConfigError& e) {
      err = {kExitConfig, std::string("bubblebench: error: ") + e.what()};
    } catch (const std::exception& e) {
      err = {kExitConfig,
             std::string("bubblebench: error: rank ") + std::to_string(me) + ": " + e.what()};
    }
  }
  void drop_new_file() {
    if (results && new_file && results->complete_keys().empty()) {
      std::error_code ec;
      std::filesystem::remove(results->path(), ec);
    }
  }
};

// Arguments and configurations; then the fingerprint of the sweep (rank 0's to every rank).
// Returns the agreed exit code, or -1 to go on (kExitOk after --help).
int parse_and_expand(Launch& L, CLI::App& app, int argc, char** argv) {
  try {
    try {
      app.parse(argc - 1, argv + 1);
    } catch (const CLI::CallForHelp&) {
      if (L.me == 0) std::cout << app.help();
      return kExitOk;
    } catch (const CLI::ParseError& e) {
      throw ConfigError(e.what() + std::string(" (see --help)"));
    }
    apply_model_preset(app, L.o, L.o.hidden);  // --model: its flags, unless given
    validate_options(L.o, L.world);
    L.settings = apply_debug_options(L.o, settings_of(L.o), L.world);
    L.configs = expand(L.o, L.settings, L.world, L.lines);
  } catch (const ConfigError& e) {
    L.err = {kExitConfig, std::string("bubblebench: error: ") + e.what()};
  } catch (const ScheduleError& e) {
    L.err = {kExitCheckFailed, std::string("bubblebench: invalid schedule: ") + e.what()};
  } catch (const IoError& e) {
    L.err = {kExitIo, std::string("bubblebench: I/O error: ") + e.what()};
  }
  if (const int code = L.agree(); code != 0) return code;
  // Each rank built the sweep from its own arguments and files. Unless they all built the same
  // one (an MPMD launch with other flags per rank, a csv:FILE that differs between nodes), the
  // first message would wait for ever: rank 0's fingerprint of its run_keys goes to every rank.
  const int mine = harness::sweep_fingerprint(L.configs);
  int first = mine;
  mpi::broadcast(first, 0, MPI_COMM_WORLD, L.o.timeout);
  if (mine != first)
    L.err = {kExitConfig, "bubblebench: error: rank " + std::to_string(L.me) +
                              " built other configurations than rank 0 (every rank needs the "
                              "same arguments and the same csv: files)"};
  if (const int code = L.agree(); code != 0) return code;
  return -1;
}

// The communicators, the backend, the outputs (rank 0), --resume's skips and the transport.
// Returns the agreed exit code, or -1 to go on.
int set_up(Launch& L, int argc, char** argv) {
  const RunOptions& o = L.o;
  if (L.me == o.stall_setup_rank)
    std::this_thread::sleep_for(std::chrono::duration<double>(o.timeout + 5));
  // Memory per host for the largest configuration, before anything is allocated or created
  // (a GPU's below, once the backend exists).
  L.attempt([&] {
    const std::string why =
        harness::memory_refusal(L.configs, L.settings, MPI_COMM_WORLD, o.timeout);
    if (!why.empty()) throw ConfigError(why);
  });
  if (const int code = L.agree(); code != 0) return code;
  L.attempt([&] {
    L.p2p = mpi::duplicate(MPI_COMM_WORLD, o.timeout);
    L.coll = mpi::duplicate(MPI_COMM_WORLD, o.timeout);
    L.backend = make_backend(o.backend, o.backend == BackendKind::kCuda ? harness::local_rank() : 0,
                             o.dtype);
  });
  if (const int code = L.agree(); code != 0) return code;
  // A GPU's memory, once the backend (its context and cuBLAS) exists.
  L.attempt([&] {
    const std::string why =
        harness::memory_refusal(L.configs, L.settings, MPI_COMM_WORLD, o.timeout, L.backend.get());
    if (!why.empty()) throw ConfigError(why);
  });
  if (const int code = L.agree(); code != 0) return code;
  // The outputs, on rank 0 only: the results file (created, resumed or replaced) and the trace
  // directory. Any problem is a configuration error (exit 2): an existing file without
  // --resume/--force, a missing or read-only folder, with --resume a truncated or corrupt
  // file or another schema_version (such a file is left untouched).
  L.attempt([&] {
    if (L.me != 0) return;
    try {
      if (!o.out.empty()) {
        std::error_code ec;
        L.new_file = o.force || !std::filesystem::exists(o.out, ec);
        const OpenMode mode = o.resume  ? OpenMode::kResume
                              : o.force ? OpenMode::kForce
                                        : OpenMode::kCreate;
        L.results = std::make_unique<ResultsFile>(
            o.out, mode, harness::root_attributes(argc, argv, BB_VERSION, build_git_sha()));
      }
      if (!o.trace.empty()) L.trace_dir = harness::make_trace_dir(o.trace);
    } catch (const IoError& e) {
      throw ConfigError(e.what());
    }
  });
  if (const int code = L.agree(); code != 0) {
    L.drop_new_file();
    return code;
  }
  // --resume: rank 0 tells every rank which configurations the file holds already (a
  // non-blocking broadcast), before the transport exists: before any point-to-point message.
  L.skip.assign(L.configs.size(), 0);
  if (L.results)
    for (std::size_t i = 0; i < L.configs.size(); ++i)
      L.skip[i] = L.results->has_complete(L.configs[i].key) ? 1 : 0;
  if (o.resume) mpi::broadcast(L.skip, 0, L.coll, o.timeout);
  // The transport (collective; NCCL connects its peers here).
  L.attempt([&] {
    L.transport = make_transport(L.settings.transport, L.p2p, *L.backend, L.settings.timeout);
  });
  L.transport = with_debug_link_delay(std::move(L.transport), L.settings, L.me);
  if (const int code = L.agree(); code != 0) {
    L.transport.reset();
    L.drop_new_file();
    return code;
  }
  return -1;
}

// --- Phase 2 and 3: every configuration, then the table ------------------------------------

int run_sweep(Launch& L, int argc, char** argv) {
  harness::RunContext ctx(L.settings, *L.backend, *L.transport, L.coll);
  ctx.results = L.results.get();
  ctx.trace_dir = L.trace_dir;
  harness::gather_placement(ctx,
                            this_placement(harness::host_name(), harness::device_of(*L.backend)));
  harness::RunTable table(std::cout, L.o.format, !L.settings.barrier(),
                          L.settings.backend == BackendKind::kCuda, L.configs);
  if (L.me == 0) {
    if (L.world == 1 && !harness::under_launcher())
      say("note: not started by mpiexec or srun: 1 rank, so every run has P=1 (mpiexec -n P "
          "bubblebench run ... for P ranks)");
    for (const std::string& line : harness::placement_warnings(ctx.where.ranks, L.o.backend))
      say("bubblebench: warning: " + line);
    table.begin(
        harness::context_lines(harness::root_attributes(argc, argv, BB_VERSION, build_git_sha()),
                               ctx.where.ranks, L.settings.backend, L.settings.transport));
  }
  const harness::SweepOutcome r = harness::run_sweep(
      ctx, L.configs, L.skip, [&](const harness::RunSummary& s) { table.row(s); });
  mpi::barrier(L.coll, L.o.timeout);
  if (L.me == 0) table.end(r.runs);
  return r.check_failed ? kExitCheckFailed : r.stopped ? kExitStopped : kExitOk;
}

int run_all(int argc, char** argv) {
  Launch L;
  L.world = mpi::size(MPI_COMM_WORLD);
  L.me = world_rank();
  CLI::App app{"bubblebench run: every schedule end to end over MPI (start under mpiexec -n P)",
               "bubblebench run"};
  // A flag given twice takes its last value (a job's EXTRA_ARGS after a params line's flags).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  add_options(app, L.o);
  if (const int code = parse_and_expand(L, app, argc, argv); code >= 0) return code;
  int code = set_up(L, argc, argv);
  if (code < 0 && L.me == 0)
    for (const std::string& line : L.lines) say(line);
  if (code < 0) code = run_sweep(L, argc, argv);
  L.transport.reset();
  if (L.p2p != MPI_COMM_NULL) MPI_Comm_free(&L.p2p);
  if (L.coll != MPI_COMM_NULL) MPI_Comm_free(&L.coll);
  return code;
}

}  // namespace

int run_main(int argc, char** argv) {
  if (const int started = start_mpi(&argc, &argv); started != kExitOk) return started;
  int code = kExitOk;
  const int me = world_rank();
  // One line naming this rank, then the whole job ends with `exit_code`.
  const auto fail = [me](const char* kind, const std::exception& e, int exit_code) {
    say("bubblebench: rank " + std::to_string(me) + ": " + kind + e.what());
    abort_job(exit_code);
  };
  try {
    code = run_all(argc, argv);
  } catch (const TimeoutError& e) {
    say(e.what());
    abort_job(kExitTimeout);
  } catch (const ConfigError& e) {
    fail("error: ", e, kExitConfig);
  } catch (const ScheduleError& e) {
    fail("invalid schedule: ", e, kExitCheckFailed);
  } catch (const IoError& e) {
    fail("I/O error: ", e, kExitIo);
  } catch (const std::bad_alloc& e) {  // past the up-front estimate (harness/memory.hpp)
    fail("error: out of memory for this configuration: ", e, kExitConfig);
  } catch (const std::exception& e) {
    fail("error: ", e, kExitCheckFailed);
  }
  return mpi::finalize(code);
}

}  // namespace bb
