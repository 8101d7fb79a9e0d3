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
//   2. Per configuration: an Executor on this rank; with --check, one extra untimed step whose
//      gradients (before any optimizer update) rank 0 compares with the sequential
//      reference; then --warmup + --iters steps, each followed by the DualPipe gradient sum
//      and the optimizer; the records (and with --out/--trace every compute and SEND/RECV
//      event) go to rank 0 (Igatherv), which computes the summary, writes the run whole to the
//      results file and its trace (on a thread, while the next run sets up and warms up;
//      joined before its first timed step), then prints the run's progress line.
//   3. Rank 0 prints the table (or JSON). Exit 1 if a check failed.
// Exceptions inside a run abort the job (MPI_Abort) with the matching exit code; the
// watchdog's TimeoutError exits 3; a failed write exits 4.
#include "cli/run.hpp"

#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/build_info.hpp"
#include "cli/list.hpp"
#include "cli/table.hpp"
#include "common/error.hpp"
#include "model/closed_form.hpp"
#include "results/chrome_trace.hpp"
#include "results/hdf5_file.hpp"
#include "results/run_record.hpp"
#include "runtime/executor.hpp"
#include "runtime/factory.hpp"
#include "runtime/mpi_util.hpp"
#include "runtime/reference.hpp"
#include "runtime/wait.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/text.hpp"
#include "schedule/validate.hpp"
#include "sim/sim.hpp"

#if defined(BB_HAVE_CUDA)
#include "runtime/cuda/cuda_backend.hpp"
#include "runtime/cuda/nccl_transport.hpp"
#endif

#if defined(__linux__)
#include <sys/prctl.h>
#endif

namespace bb {
namespace {

using json = nlohmann::json;

struct RunOptions {
  std::string schedules = "1f1b";
  std::string M = "8";
  std::string v = "1";
  int P = 0;  // 0: not given (P is the world size)
  std::string backend = "cpu";
  std::string transport;  // default: by backend
  std::string compute = "gemm";
  std::string t_f = "1ms", t_b = "2ms", t_w = "0", t_fb;
  std::string hidden = "64", layers = "1", mb_size = "8";  // LISTs
  std::string dtype = "fp32";
  int warmup = 1, iters = 5;
  std::string sync = "barrier";
  bool check = false;
  std::string recompute = "off";
  double timeout = 600;
  std::string format = "table";
  std::string optimizer = "sgd";
  double lr = 1e-3;
  std::uint64_t seed = 1234;
  std::string out, trace;
  bool resume = false, force = false;
  int drop_sends_rank = -1;     // testing the watchdog
  int perturb_grads_rank = -1;  // testing a failing --check
  bool debug_records = false;   // every timed action's record on stderr
};

// One configuration of the sweep.
struct RunConfig {
  std::string schedule;  // name or csv:FILE
  std::shared_ptr<const Schedule> lowered;
  bool recompute = false;
  int hidden = 64, layers = 1, mb_size = 8;
  std::string csv_hash;  // csv:FILE: its contents' FNV-1a 64 in hex (part of the key)
  std::string key;       // run_key: the HDF5 group name and the trace file's name
  std::string label;     // for progress lines: "1f1b P=2 M=8 v=1"
};

// An error of phase 1: exit code and one line.
struct SetupError {
  int code = 0;
  std::string line;
};

// Writes LINE and its newline to stderr in one write(2), so that lines from ranks that share
// the stream (mpiexec forwards them all to one file) never interleave mid-line.
void say(std::string line) {
  line += '\n';
  std::fflush(stderr);
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

[[noreturn]] void abort_job(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  // MPI_Abort makes Hydra tear the job down at once, and output still in the pipe to its proxy
  // can be dropped: CI once saw exit 3 with the watchdog's line missing. A pause lets the proxy
  // forward this rank's last lines first; it only delays a job that is failing anyway.
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// --- Phase 1: arguments and configurations -------------------------------------------------

void add_options(CLI::App& app, RunOptions& o) {
  app.add_option("--schedule,-s", o.schedules,
                 "Schedule name(s), comma-separated: naive gpipe 1f1b interleaved zb-h1 zb-h2 "
                 "zb-v dualpipe dualpipev (or all), or csv:FILE")
      ->capture_default_str();
  app.add_option("-M", o.M, "Micro-batches per step (LIST: 4,8 or 4:64:x2 or 2:8:2)")
      ->capture_default_str();
  app.add_option("-v", o.v, "Chunks per rank for interleaved (LIST)")->capture_default_str();
  app.add_option("-P", o.P, "Pipeline ranks: must equal the MPI world size (optional)");
  app.add_option("--backend", o.backend, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--transport", o.transport, "mpi or nccl (default: mpi for cpu, nccl for cuda)")
      ->check(CLI::IsMember({"mpi", "nccl"}));
  app.add_option("--compute", o.compute, "gemm (the MLP math) or synthetic (timed waits)")
      ->check(CLI::IsMember({"gemm", "synthetic"}))
      ->capture_default_str();
  app.add_option("--t-f", o.t_f, "Synthetic F time of one stage (2ms, 500us, or seconds)")
      ->capture_default_str();
  app.add_option("--t-b", o.t_b, "Synthetic B time of one stage")->capture_default_str();
  app.add_option("--t-w", o.t_w, "Synthetic W time of one stage (0: B is the whole backward)")
      ->capture_default_str();
  app.add_option("--t-fb", o.t_fb, "Synthetic overlapped F&B pair time (default: the sum)");
  app.add_option("--hidden", o.hidden, "Hidden width h (LIST)")->capture_default_str();
  app.add_option("--layers", o.layers, "MLP blocks per chunk (LIST)")->capture_default_str();
  app.add_option("--mb-size", o.mb_size, "Rows (tokens) of a micro-batch (LIST)")
      ->capture_default_str();
  app.add_option("--dtype", o.dtype, "fp32 or bf16")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "Untimed steps per configuration")->capture_default_str();
  app.add_option("--iters", o.iters, "Timed steps per configuration")->capture_default_str();
  app.add_option("--sync", o.sync, "barrier (ranks aligned per step) or none (back to back)")
      ->check(CLI::IsMember({"barrier", "none"}))
      ->capture_default_str();
  app.add_flag("--check", o.check,
               "Compare loss and gradients of one extra step with the sequential reference");
  app.add_flag("--recompute{on}", o.recompute,
               "Recompute activations in the backward: --recompute (on), --recompute=off|on|both")
      ->check(CLI::IsMember({"off", "on", "both"}));
  app.add_option("--timeout", o.timeout, "Watchdog: seconds any single wait may take")
      ->capture_default_str();
  app.add_option("--format", o.format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  app.add_option("--optimizer", o.optimizer, "sgd or adam")
      ->check(CLI::IsMember({"sgd", "adam"}))
      ->capture_default_str();
  app.add_option("--lr", o.lr, "Learning rate")->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of parameters, inputs and targets")->capture_default_str();
  app.add_option("--out", o.out, "HDF5 results file (written by rank 0, one run at a time)");
  app.add_flag("--resume", o.resume, "Continue --out: skip the runs already complete in it");
  app.add_flag("--force", o.force, "Replace --out if it exists");
  app.add_option("--trace", o.trace,
                 "Directory for one Chrome-trace JSON per run (the last timed iteration)");
  app.add_flag("--debug-records", o.debug_records,
               "Diagnostics: print every timed action (host clock, ms) on stderr")
      ->group("");  // hidden
  app.add_option("--debug-perturb-grads", o.perturb_grads_rank,
                 "Testing: this rank perturbs the gradients it reports to --check")
      ->group("");  // hidden
  app.add_option("--debug-drop-sends", o.drop_sends_rank,
                 "Testing: this rank skips its sends (the watchdog must fire)")
      ->group("");  // hidden
}

// `run` takes one duration per flag (no per-chunk lists): "1,2" and "1," are refused.
double duration_of(const std::string& text, const char* what) {
  if (text.find(',') != std::string::npos)
    throw ConfigError(std::string(what) + " takes one duration");
  return parse_duration(text, what, true);
}

ExecutorConfig executor_config(const RunOptions& o, const RunConfig& rc) {
  ExecutorConfig c;
  c.hidden = rc.hidden;
  c.layers = rc.layers;
  c.mb_size = rc.mb_size;
  c.seed = o.seed;
  c.synthetic = o.compute == "synthetic";
  c.t_f = duration_of(o.t_f, "--t-f");
  c.t_b = duration_of(o.t_b, "--t-b");
  c.t_w = duration_of(o.t_w, "--t-w");
  c.t_fb = o.t_fb.empty() ? -1.0 : duration_of(o.t_fb, "--t-fb");
  c.optimizer.kind =
      o.optimizer == "adam" ? OptimizerConfig::Kind::kAdam : OptimizerConfig::Kind::kSgd;
  c.optimizer.lr = static_cast<float>(o.lr);
  c.timeout_s = o.timeout;
  return c;
}

// A LIST option whose every value lies in [lo, hi].
std::vector<int> int_list_in(const std::string& text, const char* what, int lo, int hi) {
  auto values = parse_int_list(text, what);
  for (int x : values)
    if (x < lo || x > hi)
      throw ConfigError(std::string(what) + " must be " + std::to_string(lo) + ".." +
                        std::to_string(hi) + " (got " + std::to_string(x) + ")");
  return values;
}

void validate_options(const RunOptions& o, int world) {
  if (o.resume && o.out.empty()) throw ConfigError("--resume needs --out FILE.h5");
  if (o.force && o.out.empty()) throw ConfigError("--force needs --out FILE.h5");
  if (o.resume && o.force)
    throw ConfigError("--resume and --force exclude each other (continue the file or replace it)");
  if (o.P != 0 && o.P != world)
    throw ConfigError("-P " + std::to_string(o.P) + " does not match the MPI world size " +
                      std::to_string(world) + " (run takes P from mpiexec -n / srun -n)");
  int_list_in(o.hidden, "--hidden", 1, 65536);
  int_list_in(o.layers, "--layers", 1, 4096);
  int_list_in(o.mb_size, "--mb-size", 1, 1 << 20);
  if (o.warmup < 0 || o.warmup > 100000) throw ConfigError("--warmup must be 0..100000");
  if (o.iters < 1 || o.iters > 100000) throw ConfigError("--iters must be 1..100000");
  if (o.sync == "none" && o.iters < 2)
    throw ConfigError("--sync none measures the period between steps: needs --iters >= 2");
  if (!(o.timeout > 0)) throw ConfigError("--timeout must be > 0 seconds");
  if (!(o.lr >= 0) || !std::isfinite(o.lr)) throw ConfigError("--lr must be >= 0");
  if (o.check && o.compute == "synthetic")
    throw ConfigError("--check needs --compute gemm (synthetic compute has no gradients)");
  std::string why;
  if (!backend_supports_dtype(o.backend, o.dtype, &why)) throw ConfigError(why);
  (void)executor_config(o, RunConfig{});  // the durations parse
}

// Seconds as a short exact-enough decimal ("0.001", "0.0025", "0").
std::string seconds_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

// FNV-1a (64 bits): h carried over n more bytes (start with kFnvBasis).
constexpr std::uint64_t kFnvBasis = 0xcbf29ce484222325ull;
std::uint64_t fnv1a(std::uint64_t h, const char* bytes, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    h = (h ^ static_cast<unsigned char>(bytes[i])) * 0x100000001b3ull;
  return h;
}

// FNV-1a of a file's bytes, as 16 hex digits: tells two versions of a CSV schedule apart in
// the run_key. Throws ConfigError when the file cannot be read.
std::string file_hash(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw ConfigError(path + ": cannot read: " + std::strerror(errno));
  std::uint64_t h = kFnvBasis;
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) h = fnv1a(h, buf, n);
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) throw ConfigError(path + ": cannot read");
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// The run_key: every setting that changes what a run measures, as `name=value` items joined
// with '_', sanitized for HDF5 (bb::sanitize_key), e.g.
// 1f1b_P=2_M=8_v=1_cpu_mpi_synthetic_h=64_L=1_b=8_fp32_recompute=0_sync=barrier_warmup=1_
// iters=5_tf=0.001_tb=0.002_tw=0 (the synthetic times, in seconds, only with synthetic compute).
// A CSV schedule adds its contents' hash after its name: csv_dp.csv_hash=0123456789abcdef_P=4_…
std::string run_key(const RunConfig& c, const RunOptions& o, const ExecutorConfig& ec) {
  const Schedule& s = *c.lowered;
  std::string k = c.schedule + (c.csv_hash.empty() ? "" : "_hash=" + c.csv_hash) +
                  "_P=" + std::to_string(s.P) + "_M=" + std::to_string(s.M) +
                  "_v=" + std::to_string(s.v) + "_" + o.backend + "_" +
                  (o.transport.empty() ? default_transport(o.backend) : o.transport) + "_" +
                  o.compute + "_h=" + std::to_string(c.hidden) + "_L=" + std::to_string(c.layers) +
                  "_b=" + std::to_string(c.mb_size) + "_" + o.dtype +
                  "_recompute=" + (c.recompute ? "1" : "0") + "_sync=" + o.sync +
                  "_warmup=" + std::to_string(o.warmup) + "_iters=" + std::to_string(o.iters);
  if (ec.synthetic) {
    k += "_tf=" + seconds_text(ec.t_f) + "_tb=" + seconds_text(ec.t_b) +
         "_tw=" + seconds_text(ec.t_w);
    if (ec.t_fb >= 0) k += "_tfb=" + seconds_text(ec.t_fb);
  }
  return sanitize_key(k);
}

// The sweep's run_keys in order, hashed into 31 bits: ranks that built the same sweep agree.
int sweep_fingerprint(const std::vector<RunConfig>& configs) {
  std::uint64_t h = kFnvBasis;
  for (const RunConfig& c : configs) h = fnv1a(fnv1a(h, c.key.data(), c.key.size()), "\n", 1);
  return static_cast<int>((h ^ (h >> 32)) & 0x7fffffffu);
}

// Every combination of the lists; skipped combinations are reported by rank 0, one line each.
std::vector<RunConfig> expand(const RunOptions& o, int world, bool print) {
  auto names = parse_name_list(o.schedules, "--schedule");
  if (names.size() == 1 && names[0] == "all") names = schedule_names();
  const auto Ms = parse_int_list(o.M, "-M");
  const auto vs = parse_int_list(o.v, "-v");
  const auto hiddens = int_list_in(o.hidden, "--hidden", 1, 65536);
  const auto layerss = int_list_in(o.layers, "--layers", 1, 4096);
  const auto mb_sizes = int_list_in(o.mb_size, "--mb-size", 1, 1 << 20);
  std::vector<bool> recompute_modes;
  if (o.recompute != "on") recompute_modes.push_back(false);
  if (o.recompute != "off") recompute_modes.push_back(true);
  const bool sweep = names.size() * Ms.size() * vs.size() > 1;
  const bool model_sweep = hiddens.size() * layerss.size() * mb_sizes.size() > 1;

  std::vector<RunConfig> out;
  std::set<std::string> keys;
  auto add = [&](const std::string& name, Schedule s) {
    validate_or_throw(s);
    const std::string csv_hash = name.rfind("csv:", 0) == 0 ? file_hash(name.substr(4)) : "";
    auto lowered = std::make_shared<const Schedule>(s.lowered ? std::move(s) : lower(std::move(s)));
    for (int h : hiddens)
      for (int L : layerss)
        for (int b : mb_sizes)
          for (bool rc : recompute_modes) {
            RunConfig c{name, lowered, rc, h, L, b, csv_hash, "", ""};
            c.key = run_key(c, o, executor_config(o, c));
            if (!keys.insert(c.key).second) continue;  // a schedule named twice
            c.label = name + " P=" + std::to_string(lowered->P) +
                      " M=" + std::to_string(lowered->M) + " v=" + std::to_string(lowered->v);
            if (model_sweep)
              c.label +=
                  " h=" + std::to_string(h) + " L=" + std::to_string(L) + " b=" + std::to_string(b);
            if (rc) c.label += " recompute";
            out.push_back(std::move(c));
          }
  };
  ScheduleSweep schedules = expand_schedules(o.schedules, world, Ms, vs);
  for (auto& [name, s] : schedules.schedules) {
    if (name.rfind("csv:", 0) == 0 && s.P != world)
      throw ConfigError(name + " has P=" + std::to_string(s.P) + " but the MPI world size is " +
                        std::to_string(world));
    add(name, std::move(s));
  }
  const std::vector<std::string>& skipped = schedules.skipped;
  // One `skip:` line per rejection (when nothing is left, expand_schedules threw the last).
  if (sweep && print)
    for (const auto& why : skipped) say("skip: " + why);
  if (print)
    for (const auto& note : schedules.notes) say("note: " + note);
  return out;
}

int local_rank() {
  for (const char* var : {"MPI_LOCALRANKID", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  MPI_Comm node;
  BB_CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  const int r = mpi::rank(node);
  MPI_Comm_free(&node);
  return r;
}

// --- Phase 2: one configuration -------------------------------------------------------------

// Per-rank record of a configuration, packed as doubles for the gather:
//   [steps, then per step: origin, first_start, last_end, busy, wait, comm, actions]
//   [peak_units, peak_bytes, param_bytes, peak_device_bytes]
//   [per kind F, B, W, BW, FB: count, then the durations in stage units (seconds / fraction)]
//   [events: count, then per event kEventFields values (EventSummary)]
constexpr int kStepFields = 8;
constexpr int kKinds = 5;
constexpr int kEventFields = 8;

// Event kinds of the results file: the compute kinds (RecordKind order), then the
// communication ops (Op order from SEND_F).
constexpr const char* kEventKinds[] = {"F",      "B",      "W",      "BW",    "FB",
                                       "SEND_F", "RECV_F", "SEND_B", "RECV_B"};
constexpr int kFirstCommKind = 5;

// origin: the step's origin on the rank's host clock (seconds); other times are relative to it.
struct StepSummary {
  double origin, first_start, last_end, busy, wait, comm, actions;
  double bookkeeping;  // StepRecord::bookkeeping()
};

// One compute or communication event of a timed step, times from the rank's step origin.
// ready = start for communication.
struct EventSummary {
  double iter, index, kind, chunk, mb, ready, start, end;
};

struct RankSummary {
  std::vector<StepSummary> steps;
  double peak_units = 0, peak_bytes = 0, param_bytes = 0, peak_device_bytes = 0;
  std::vector<double> durations[kKinds];
  std::vector<EventSummary> events;
};

std::vector<double> pack(const RankSummary& s) {
  std::vector<double> out;
  out.reserve(8 + s.steps.size() * kStepFields + s.events.size() * kEventFields);
  out.push_back(static_cast<double>(s.steps.size()));
  for (const StepSummary& st : s.steps)
    out.insert(out.end(), {st.origin, st.first_start, st.last_end, st.busy, st.wait, st.comm,
                           st.actions, st.bookkeeping});
  out.insert(out.end(), {s.peak_units, s.peak_bytes, s.param_bytes, s.peak_device_bytes});
  for (const auto& d : s.durations) {
    out.push_back(static_cast<double>(d.size()));
    out.insert(out.end(), d.begin(), d.end());
  }
  out.push_back(static_cast<double>(s.events.size()));
  for (const EventSummary& e : s.events)
    out.insert(out.end(), {e.iter, e.index, e.kind, e.chunk, e.mb, e.ready, e.start, e.end});
  return out;
}

RankSummary unpack(const std::vector<double>& in) {
  RankSummary s;
  std::size_t i = 0;
  const auto n = static_cast<std::size_t>(in.at(i++));
  for (std::size_t k = 0; k < n; ++k, i += kStepFields)
    s.steps.push_back({in.at(i), in.at(i + 1), in.at(i + 2), in.at(i + 3), in.at(i + 4),
                       in.at(i + 5), in.at(i + 6), in.at(i + 7)});
  s.peak_units = in.at(i++);
  s.peak_bytes = in.at(i++);
  s.param_bytes = in.at(i++);
  s.peak_device_bytes = in.at(i++);
  for (auto& d : s.durations) {
    const auto m = static_cast<std::size_t>(in.at(i++));
    d.assign(in.begin() + static_cast<std::ptrdiff_t>(i),
             in.begin() + static_cast<std::ptrdiff_t>(i + m));
    i += m;
  }
  const auto ne = static_cast<std::size_t>(in.at(i++));
  s.events.reserve(ne);
  for (std::size_t k = 0; k < ne; ++k, i += kEventFields)
    s.events.push_back({in.at(i), in.at(i + 1), in.at(i + 2), in.at(i + 3), in.at(i + 4),
                        in.at(i + 5), in.at(i + 6), in.at(i + 7)});
  return s;
}

struct CheckOutcome {
  std::string status = "skipped";  // pass | fail | skipped
  double max_rel_error = 0;
  std::string message;
};

// The extra step of --check: gradients before any optimizer update, gathered to rank 0.
CheckOutcome run_check(Executor& ex, Backend& backend, const Schedule& s, const RunOptions& o,
                       const RunConfig& c, MPI_Comm comm) {
  mpi::barrier(comm, o.timeout);
  ex.run_step(nullptr);
  ex.sum_partner_gradients();
  GradientSet mine = ex.gradients();
  if (o.perturb_grads_rank == mpi::rank(comm))
    for (LayerGrads& g : mine.layers) g.dw1[0] += 1.0f;
  std::vector<float> packed;
  for (const LayerGrads& g : mine.layers) {
    packed.push_back(static_cast<float>(g.layer));
    packed.insert(packed.end(), g.dw1.begin(), g.dw1.end());
    packed.insert(packed.end(), g.dw2.begin(), g.dw2.end());
  }
  const auto grads = mpi::gather(packed, 0, comm, o.timeout);
  const auto losses = mpi::gather(std::vector<double>{ex.loss_sum()}, 0, comm, o.timeout);
  ex.zero_grads();
  ex.reset_loss();

  CheckOutcome out;
  int pass = 0;
  if (mpi::rank(comm) == 0) {
    GradientSet got;
    double loss = 0;
    for (const auto& l : losses) loss += l.at(0);
    got.loss = loss;
    const std::size_t w =
        4 * static_cast<std::size_t>(c.hidden) * static_cast<std::size_t>(c.hidden);
    for (const auto& r : grads)
      for (std::size_t i = 0; i + 2 * w + 1 <= r.size(); i += 2 * w + 1) {
        LayerGrads g;
        g.layer = static_cast<int>(r[i]);
        g.dw1.assign(r.begin() + static_cast<std::ptrdiff_t>(i + 1),
                     r.begin() + static_cast<std::ptrdiff_t>(i + 1 + w));
        g.dw2.assign(r.begin() + static_cast<std::ptrdiff_t>(i + 1 + w),
                     r.begin() + static_cast<std::ptrdiff_t>(i + 1 + 2 * w));
        got.layers.push_back(std::move(g));
      }
    ReferenceConfig rc;
    rc.hidden = c.hidden;
    rc.rows = c.mb_size;
    rc.num_layers = ex.num_layers_total();
    rc.num_microbatches = s.M;
    rc.seed = o.seed;
    // The reference runs on this rank's backend, so with --dtype bf16 it rounds the same GEMM
    // operands to bf16 as the pipeline: what differs is only the order in which the fp32
    // accumulators sum the micro-batches' weight gradients (~1e-7), and any error in the
    // pipeline's math or data movement shows at O(1). bf16 gets 1e-4 for that margin.
    const GradientSet ref = run_reference(backend, rc);
    CompareResult cmp = compare(ref, got, o.dtype == "bf16" ? 1e-4 : 1e-5);
    if (cmp.pass && static_cast<int>(got.layers.size()) != rc.num_layers) {
      cmp.pass = false;
      cmp.message = "gradients of " + std::to_string(got.layers.size()) +
                    " layers arrived, the model has " + std::to_string(rc.num_layers);
    }
    pass = cmp.pass ? 1 : 0;
    out.max_rel_error = cmp.max_rel_error;
    out.message = cmp.message;
  }
  mpi::broadcast(pass, 0, comm, o.timeout);
  out.status = pass ? "pass" : "fail";
  return out;
}

// What every run shares: the options, the backend and transport, and on rank 0 the outputs.
struct RunContext {
  RunContext(const RunOptions& options, Backend& b, Transport& t, MPI_Comm c)
      : o(options), backend(b), transport(t), comm(c) {}
  const RunOptions& o;
  Backend& backend;
  Transport& transport;
  MPI_Comm comm;                   // collectives (gathers, barriers)
  bool shared_clock = true;        // all ranks on one host clock (rank 0's verdict)
  std::vector<std::string> host;   // rank 0: per rank, gethostname()
  std::vector<int> device;         // rank 0: per rank, the CUDA device or -1
  ResultsFile* results = nullptr;  // rank 0 with --out
  std::string trace_dir;           // rank 0 with --trace
  // Activation buffers, one pool per tensor size (hidden · mb_size), kept across runs.
  std::map<std::size_t, std::unique_ptr<BufferPool>> pools;
  // Rank 0: the last run's results-file entry and trace, written by a thread while the next
  // run builds its executor and warms up (no MPI, and the only HDF5 user at that time), and
  // what to do once they are written (print its progress line). finish_writing() waits for
  // both; run_config calls it before the first timed step, so a write never overlaps a timed
  // step. An IoError of the writer is rethrown there (exit 4).
  std::future<void> writing;
  std::function<void()> after_writing;

  void finish_writing() {
    if (writing.valid()) writing.get();
    if (after_writing) {
      auto then = std::move(after_writing);
      after_writing = nullptr;
      then();
    }
  }

  BufferPool& pool(std::size_t count) {
    auto& p = pools[count];
    if (!p) p = std::make_unique<BufferPool>(backend, count);
    return *p;
  }
};

// The display name of a lowered action (an FB pair as "(0F4;3BW1)FB").
std::string action_name(const Schedule& s, int rank, std::size_t index, bool fb) {
  const auto& acts = s.ranks[static_cast<std::size_t>(rank)];
  if (index >= acts.size()) return "?";
  if (fb && index + 1 < acts.size())
    return "(" + to_string(acts[index]) + ";" + to_string(acts[index + 1]) + ")FB";
  return to_string(acts[index]);
}

// Chrome trace of the last timed iteration: ranks as processes; compute on thread 0, SEND/RECV
// on thread 1, the wait of a compute for its inputs (ready -> start, when > 0) on thread 2.
std::vector<TraceSlice> trace_slices(const Schedule& s, const std::vector<RankSummary>& ranks,
                                     const std::vector<std::vector<double>>& shift,
                                     std::size_t last) {
  std::vector<TraceSlice> slices;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const int pid = static_cast<int>(r);
    const double sh = shift[r][last];
    for (const EventSummary& e : ranks[r].events) {
      if (static_cast<std::size_t>(e.iter) != last) continue;
      const int kind = static_cast<int>(e.kind);
      const bool comm = kind >= kFirstCommKind;
      const std::string name = action_name(s, pid, static_cast<std::size_t>(e.index),
                                           kind == static_cast<int>(RecordKind::FB));
      const std::string cat =
          comm ? (kind == kFirstCommKind || kind == kFirstCommKind + 2 ? "send" : "recv")
               : kEventKinds[kind];
      slices.push_back(
          {pid, comm ? 1 : 0, name, cat, (sh + e.start) * 1e6, (e.end - e.start) * 1e6});
      if (!comm && e.start > e.ready)
        slices.push_back(
            {pid, 2, "wait " + name, "wait", (sh + e.ready) * 1e6, (e.start - e.ready) * 1e6});
    }
  }
  return slices;
}

double nan_or(bool present, double x) {
  return present ? x : std::nan("");
}

// Runs one configuration on every rank; returns its JSON summary on rank 0 (null elsewhere).
// On rank 0 it also starts writing the run to the results file and its trace (ctx.writing).
json run_config(const RunConfig& c, RunContext& ctx, bool* check_failed) {
  const RunOptions& o = ctx.o;
  Backend& backend = ctx.backend;
  Transport& transport = ctx.transport;
  const MPI_Comm comm = ctx.comm;
  const bool shared_clock = ctx.shared_clock;
  const Schedule& s = *c.lowered;
  ExecutorConfig ec = executor_config(o, c);
  ec.recompute = c.recompute;
  ec.drop_sends = o.drop_sends_rank == transport.rank();
  backend.reset_peak_allocated();  // peak_device_bytes: this configuration's
  Executor ex(s, backend, transport,
              ctx.pool(static_cast<std::size_t>(c.hidden) * static_cast<std::size_t>(c.mb_size)),
              ec);

  CheckOutcome check;
  if (o.check) {
    check = run_check(ex, backend, s, o, c, comm);
    if (check.status == "fail") *check_failed = true;
  }

  // Events of every timed step for the results file; of the last one for a trace only.
  // (Every rank knows whether rank 0 has --out / --trace: the same arguments.)
  const bool all_events = !o.out.empty();
  const bool last_events = all_events || !o.trace.empty();
  RankSummary mine;
  StepRecord rec;
  const bool barrier = o.sync == "barrier";
  for (int step = 0; step < o.warmup + o.iters; ++step) {
    if (step == o.warmup) ctx.finish_writing();  // the previous run's files (rank 0)
    if (barrier || step == 0) mpi::barrier(comm, o.timeout);
    if (step == o.warmup) ex.reset_peaks();
    ex.run_step(&rec);
    ex.sum_partner_gradients();
    ex.optimizer_step();
    ex.zero_grads();
    ex.reset_loss();
    if (step < o.warmup) continue;
    if (o.debug_records)
      for (const ActionRecord& a : rec.actions)
        std::fprintf(
            stderr,
            "record rank %d step %d %s chunk %d mb %u ready %.4f start %.4f end %.4f wait %.4f\n",
            transport.rank(), step, record_kind_name(a.kind), a.chunk, a.mb,
            (rec.origin + a.ready) * 1e3, (rec.origin + a.start) * 1e3, (rec.origin + a.end) * 1e3,
            a.wait * 1e3);
    const double iter = static_cast<double>(mine.steps.size());
    mine.steps.push_back({rec.origin, rec.first_start, rec.last_end, rec.busy, rec.wait, rec.comm,
                          static_cast<double>(rec.num_actions), rec.bookkeeping()});
    for (const ActionRecord& a : rec.actions)
      mine.durations[static_cast<int>(a.kind)].push_back((a.end - a.start) / a.fraction);
    if (all_events || (last_events && step == o.warmup + o.iters - 1)) {
      for (const ActionRecord& a : rec.actions)
        mine.events.push_back({iter, static_cast<double>(a.index), static_cast<double>(a.kind),
                               static_cast<double>(a.chunk), static_cast<double>(a.mb), a.ready,
                               a.start, a.end});
      for (const CommRecord& m : rec.comms)
        mine.events.push_back({iter, static_cast<double>(m.index),
                               static_cast<double>(kFirstCommKind + static_cast<int>(m.op) -
                                                   static_cast<int>(Op::SEND_F)),
                               static_cast<double>(m.chunk), static_cast<double>(m.mb), m.start,
                               m.start, m.end});
    }
  }
  mine.peak_units = ex.peak_activation_units();
  mine.peak_bytes = static_cast<double>(ex.peak_activation_bytes());
  mine.param_bytes = static_cast<double>(ex.param_bytes());
  mine.peak_device_bytes = static_cast<double>(backend.peak_allocated_bytes());
  const auto all = mpi::gather(pack(mine), 0, comm, o.timeout);
  if (transport.rank() != 0) return nullptr;

  // --- Rank 0: the summary -------------------------------------------------------------
  const int P = s.P;
  std::vector<RankSummary> ranks;
  for (const auto& r : all) ranks.push_back(unpack(r));
  const std::size_t n = ranks[0].steps.size();
  // Per step: the makespan T from the first compute start to the last compute end over all
  // ranks. With one host clock for all ranks (one machine), on that clock: the barrier's exit
  // skew does not count. Otherwise each rank's times count from its own barrier exit.
  // With --sync none the step ends on the common time line give the period.
  // shift[r][k]: added to rank r's times of step k to put them on the step's common start
  // (rank 0's origin of that step with a shared clock; 0 otherwise).
  std::vector<std::vector<double>> shift(ranks.size(), std::vector<double>(n, 0.0));
  std::vector<double> step_time, fraction, overhead, ends;
  for (std::size_t k = 0; k < n; ++k) {
    double first = 1e300, last = -1e300, busy = 0, over = 0, actions = 0, end = -1e300;
    for (std::size_t ri = 0; ri < ranks.size(); ++ri) {
      const RankSummary& r = ranks[ri];
      const StepSummary& st = r.steps[k];
      if (shared_clock) shift[ri][k] = st.origin - ranks[0].steps[k].origin;
      const double sh =
          shared_clock ? st.origin - ranks[0].steps[0].origin : st.origin - r.steps[0].origin;
      first = std::min(first, shared_clock ? sh + st.first_start : 0.0);
      last = std::max(last, shared_clock ? sh + st.last_end : st.last_end);
      end = std::max(end, sh + st.last_end);
      busy += st.busy;
      over += st.bookkeeping;
      actions += st.actions;
    }
    const double T = last - first;
    step_time.push_back(T);
    ends.push_back(end);
    fraction.push_back(T > 0 ? (P * T - busy) / (P * T) : 0);
    overhead.push_back(actions > 0 ? over / actions : 0);
  }
  std::vector<double> period, fraction_steady;
  for (std::size_t k = 1; k < n; ++k) {
    const double p = ends[k] - ends[k - 1];
    double busy = 0;
    for (const RankSummary& r : ranks) busy += r.steps[k].busy;
    period.push_back(p);
    fraction_steady.push_back(p > 0 ? (P * p - busy) / (P * p) : 0);
  }

  std::vector<double> kind_median(kKinds);
  for (int k = 0; k < kKinds; ++k) {
    std::vector<double> d;
    for (const RankSummary& r : ranks)
      d.insert(d.end(), r.durations[k].begin(), r.durations[k].end());
    kind_median[static_cast<std::size_t>(k)] = median(d);
  }
  const auto has = [&](RecordKind k) { return !std::isnan(kind_median[static_cast<int>(k)]); };
  const auto med = [&](RecordKind k) { return kind_median[static_cast<int>(k)]; };
  // Stage-unit times for the simulator and the closed form: B and W where the backward is
  // split somewhere in the schedule, else the fused BW as B with W = 0.
  const double t_f = has(RecordKind::F) ? med(RecordKind::F) : 0;
  double t_b = 0, t_w = 0;
  if (has(RecordKind::B)) {
    t_b = med(RecordKind::B);
    t_w = has(RecordKind::W) ? med(RecordKind::W) : 0;
  } else if (has(RecordKind::BW)) {
    t_b = med(RecordKind::BW);
  }
  const double t_fb = has(RecordKind::FB) ? med(RecordKind::FB) : -1;

  // The model's activation bytes of one micro-batch-stage: the F-time footprint of a chunk,
  // 9·L·b·h floats (the chunk input with recompute: b·h), divided by the chunk's fraction of
  // a stage. (After B a chunk holds 10·L·b·h until W: the runtime's peak lies between.)
  const double bh = static_cast<double>(c.hidden) * c.mb_size;
  const double chunk_bytes = 4.0 * (c.recompute ? bh : 9.0 * c.layers * bh);
  SimConfig sc;
  sc.t_f = {t_f};
  sc.t_b = {t_b};
  sc.t_w = {t_w};
  sc.t_fb = t_fb;
  sc.act_bytes = chunk_bytes / s.chunk_fraction(0);
  const SimResult sim = simulate(s, sc);
  ModelInput mi;
  mi.schedule = c.schedule;
  mi.P = P;
  mi.M = s.M;
  mi.v = s.v;
  mi.t_f = t_f;
  mi.t_b = t_b;
  mi.t_w = t_w;
  mi.t_fb = t_fb;
  const ModelResult model = closed_form(mi);
  const std::string transport_name(transport.name());

  json j;
  j["run_key"] = c.key;
  j["schedule"] = c.schedule;
  j["P"] = P;
  j["M"] = s.M;
  j["v"] = s.v;
  j["recompute"] = c.recompute;
  j["backend"] = o.backend;
  j["transport"] = transport_name;
  j["compute"] = o.compute;
  j["hidden"] = c.hidden;
  j["layers"] = c.layers;
  j["mb_size"] = c.mb_size;
  j["dtype"] = o.dtype;
  j["warmup"] = o.warmup;
  j["iters"] = o.iters;
  j["sync"] = o.sync;
  j["step_time_s"] = step_time;
  j["makespan_s"] = median(step_time);
  j["bubble_fraction_measured"] = barrier ? median(fraction) : median(fraction_steady);
  if (!barrier) j["period_s"] = median(period);
  j["bubble_fraction_sim"] = barrier ? sim.single.bubble_fraction : sim.steady.bubble_fraction;
  if (model.applies)
    j["bubble_fraction_model"] =
        barrier ? model.single.bubble_fraction : model.steady.bubble_fraction;
  else
    j["bubble_fraction_model"] = nullptr;
  if (!model.applies) j["model_reason"] = model.reason;
  auto time_or_null = [](bool present, double x) { return present ? json(x) : json(nullptr); };
  const bool has_f = has(RecordKind::F), has_b = has(RecordKind::B) || has(RecordKind::BW),
             has_w = has(RecordKind::B), has_fb = has(RecordKind::FB);
  j["t_f_s"] = time_or_null(has_f, t_f);
  j["t_b_s"] = time_or_null(has_b, t_b);
  j["t_w_s"] = time_or_null(has_w, t_w);
  j["t_fb_s"] = time_or_null(has_fb, t_fb);
  std::vector<double> busy, wait, comm_s, units, bytes, params, device;
  for (const RankSummary& r : ranks) {
    std::vector<double> b, w, cm;
    for (const StepSummary& st : r.steps) {
      b.push_back(st.busy);
      w.push_back(st.wait);
      cm.push_back(st.comm);
    }
    busy.push_back(median(b));
    wait.push_back(median(w));
    comm_s.push_back(median(cm));
    units.push_back(r.peak_units);
    bytes.push_back(r.peak_bytes);
    params.push_back(r.param_bytes);
    device.push_back(r.peak_device_bytes);
  }
  j["busy_s"] = busy;
  j["wait_s"] = wait;
  j["comm_s"] = comm_s;
  j["peak_activation_bytes"] = bytes;
  j["peak_activations"] = units;
  j["peak_activations_schedule"] = peak_activations(s);
  j["param_bytes"] = params;
  j["peak_device_bytes"] = device;
  j["clock"] = shared_clock ? "shared" : "per-rank";
  j["overhead_us_per_action"] = median(overhead) * 1e6;
  j["check"] = check.status;
  if (check.status != "skipped") {
    j["check_max_rel_error"] = check.max_rel_error;
    j["check_message"] = check.message;
  }

  std::optional<RunRecord> record;
  if (ctx.results != nullptr) {
    RunRecord run;
    run.key = c.key;
    const double nan = std::nan("");
    auto i64 = [](auto x) { return AttrValue{static_cast<std::int64_t>(x)}; };
    auto str = [](const std::string& x) { return AttrValue{x}; };
    run.attrs = {
        {"schedule", str(c.schedule)},
        {"P", i64(P)},
        {"M", i64(s.M)},
        {"v", i64(s.v)},
        {"backend", str(o.backend)},
        {"transport", str(transport_name)},
        {"compute", str(o.compute)},
        {"hidden", i64(c.hidden)},
        {"layers", i64(c.layers)},
        {"mb_size", i64(c.mb_size)},
        {"dtype", str(o.dtype)},
        {"recompute", i64(c.recompute ? 1 : 0)},
        {"warmup", i64(o.warmup)},
        {"iters", i64(o.iters)},
        {"t_f_s", nan_or(has_f, t_f)},
        {"t_b_s", nan_or(has_b, t_b)},
        {"t_w_s", nan_or(has_w, t_w)},
        {"t_fb_s", nan_or(has_fb, t_fb)},
        {"makespan_s", median(step_time)},
        {"bubble_fraction_measured", j["bubble_fraction_measured"].get<double>()},
        {"bubble_fraction_model", model.applies ? j["bubble_fraction_model"].get<double>() : nan},
        {"bubble_fraction_sim", j["bubble_fraction_sim"].get<double>()},
        {"check", str(check.status)},
        {"sync", str(o.sync)},
        {"period_s", barrier ? nan : median(period)},
        {"run_key", str(c.key)},
        {"clock", str(shared_clock ? "shared" : "per-rank")},
        {"overhead_us_per_action", median(overhead) * 1e6},
        {"model_reason", str(model.applies ? "" : model.reason)},
        {"seed", i64(o.seed)},
        {"optimizer", str(o.optimizer)},
        {"lr", o.lr},
    };
    if (check.status != "skipped") {
      run.attrs.emplace_back("check_max_rel_error", check.max_rel_error);
      run.attrs.emplace_back("check_message", str(check.message));
    }
    if (ec.synthetic) {
      run.attrs.emplace_back("synthetic_t_f_s", ec.t_f);
      run.attrs.emplace_back("synthetic_t_b_s", ec.t_b);
      run.attrs.emplace_back("synthetic_t_w_s", ec.t_w);
      run.attrs.emplace_back("synthetic_t_fb_s", ec.t_fb >= 0 ? ec.t_fb : nan);
    }
    run.step_time_s = step_time;
    std::size_t total = 0;
    for (const RankSummary& r : ranks) total += r.events.size();
    run.events.reserve(total);
    for (std::size_t r = 0; r < ranks.size(); ++r)
      for (const EventSummary& e : ranks[r].events) {
        const auto k = static_cast<std::size_t>(e.iter);
        run.events.push_back({static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(r),
                              static_cast<std::uint32_t>(e.chunk), static_cast<std::uint32_t>(e.mb),
                              kEventKinds[static_cast<int>(e.kind)], shift[r][k] + e.start,
                              shift[r][k] + e.end});
      }
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      RankRecord rr;
      rr.rank = static_cast<std::uint32_t>(r);
      rr.host = r < ctx.host.size() ? ctx.host[r] : "";
      rr.device = r < ctx.device.size() ? ctx.device[r] : -1;
      rr.busy_s = busy[r];
      rr.wait_s = wait[r];
      rr.comm_s = comm_s[r];
      rr.peak_activation_bytes = static_cast<std::uint64_t>(bytes[r]);
      rr.peak_device_bytes = static_cast<std::uint64_t>(device[r]);
      rr.param_bytes = static_cast<std::uint64_t>(params[r]);
      rr.peak_activation_bytes_model =
          static_cast<std::uint64_t>(std::llround(sim.ranks[r].peak_activation_bytes));
      run.ranks.push_back(std::move(rr));
    }
    record = std::move(run);
  }
  std::string trace_path;
  std::vector<TraceSlice> slices;
  if (!ctx.trace_dir.empty() && n > 0) {
    trace_path = (std::filesystem::path(ctx.trace_dir) / (c.key + ".json")).string();
    slices = trace_slices(s, ranks, shift, n - 1);
  }
  if (record || !trace_path.empty())
    ctx.writing = std::async(std::launch::async,
                             [results = ctx.results, record = std::move(record), trace_path,
                              slices = std::move(slices), P, title = c.label] {
                               if (record) results->write_run(*record);
                               if (!trace_path.empty())
                                 write_chrome_trace(trace_path, slices, P, title);
                             });
  return j;
}

// --- Output ----------------------------------------------------------------------------------

std::string num(const json& x, double scale = 1, int prec = 4) {
  return x.is_number() ? fmt(x.get<double>() * scale, prec) : "n/a";
}

void print_summary(const json& rows, bool steady) {
  // The stage model's columns only when the sweep varies it.
  bool model_cols = false;
  for (const json& j : rows)
    for (const char* k : {"hidden", "layers", "mb_size"})
      model_cols = model_cols || j[k] != rows[0][k];
  std::vector<std::string> cols = {"schedule",
                                   "P",
                                   "M",
                                   "v",
                                   "recompute",
                                   steady ? "period_ms" : "makespan_ms",
                                   "measured",
                                   "sim",
                                   "model",
                                   "peak_act",
                                   "peak_act_sched",
                                   "peak_act_MiB",
                                   "check"};
  if (model_cols) cols.insert(cols.begin() + 4, {"hidden", "layers", "mb_size"});
  std::vector<std::vector<std::string>> table;
  for (const json& j : rows) {
    double pu = 0, ps = 0, pb = 0;
    for (const auto& x : j["peak_activations"]) pu = std::max(pu, x.get<double>());
    for (const auto& x : j["peak_activations_schedule"]) ps = std::max(ps, x.get<double>());
    for (const auto& x : j["peak_activation_bytes"]) pb = std::max(pb, x.get<double>());
    table.push_back({j["schedule"].get<std::string>(), std::to_string(j["P"].get<int>()),
                     std::to_string(j["M"].get<int>()), std::to_string(j["v"].get<int>()),
                     j["recompute"].get<bool>() ? "on" : "off",
                     num(steady ? j["period_s"] : j["makespan_s"], 1e3),
                     num(j["bubble_fraction_measured"]), num(j["bubble_fraction_sim"]),
                     num(j["bubble_fraction_model"]), fmt(pu), fmt(ps), fmt(pb / (1 << 20)),
                     j["check"].get<std::string>()});
    if (model_cols)
      table.back().insert(table.back().begin() + 4, {std::to_string(j["hidden"].get<int>()),
                                                     std::to_string(j["layers"].get<int>()),
                                                     std::to_string(j["mb_size"].get<int>())});
  }
  print_table(std::cout, cols, table);
  std::cout << "measured/sim/model: bubble fraction "
            << (steady ? "(steady state, period)" : "(single step, makespan)")
            << "; peak_act: peak live activations per rank (max over ranks) in micro-batch-stage "
               "units, runtime vs schedule\n";
  for (const json& j : rows)
    if (j["check"] == "fail")
      std::cout << "check failed: " << j["schedule"].get<std::string>() << " M=" << j["M"]
                << " v=" << j["v"] << ": " << j["check_message"].get<std::string>() << "\n";
}

// --- Outputs: the results file's root attributes, the trace directory -----------------------

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return mpi::processor_name();
  return name;
}

// The CUDA device of this rank's backend, -1 on CPU.
int device_of([[maybe_unused]] Backend& backend) {
#if defined(BB_HAVE_CUDA)
  if (auto* cuda = dynamic_cast<cuda::CudaBackend*>(&backend)) return cuda->device();
#endif
  return -1;
}

std::string utc_now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The command line as typed, arguments with spaces or shell characters single-quoted.
std::string command_line(int argc, char** argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyz"
                                         "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                         "-_=+.,:/@%") == std::string::npos;
    if (!plain) {
      std::string q = "'";
      for (char ch : a) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      a = q + "'";
    }
    if (i > 0) out += ' ';
    out += a;
  }
  return out;
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "unknown";
  std::string s(text, static_cast<std::size_t>(std::max(0, len)));
  s = s.substr(0, s.find('\n'));
  // One line, whitespace runs (MPICH puts a tab after "Version:") as one space.
  std::string out;
  for (char ch : s) {
    if (ch == '\0') break;
    const bool space = ch == ' ' || ch == '\t' || ch == '\r';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : ch;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// Root attributes of a new results file (design §6; schema_version is the writer's).
Attrs root_attributes(int argc, char** argv) {
#if defined(BB_HAVE_CUDA)
  const std::string cuda_version = cuda::runtime_version_string();
  const std::string cuda_driver = cuda::driver_version_string();
  const std::string nccl_version = cuda::nccl_version_string();
#else
  const std::string cuda_version = "none", cuda_driver = "none", nccl_version = "none";
#endif
  return {
      {"tool_version", std::string(BB_VERSION)},
      {"git_sha", std::string(build_git_sha())},
      {"created_utc", utc_now_iso8601()},
      {"hostname", host_name()},
      {"cmdline", command_line(argc, argv)},
      {"mpi_library", mpi_library_version()},
      {"cuda_version", cuda_version},
      {"cuda_driver_version", cuda_driver},
      {"nccl_version", nccl_version},
      {"slurm_job_id", env_or_empty("SLURM_JOB_ID")},
      {"slurm_array_job_id", env_or_empty("SLURM_ARRAY_JOB_ID")},
      {"slurm_array_task_id", env_or_empty("SLURM_ARRAY_TASK_ID")},
  };
}

// Creates the trace directory (and its parents) if missing; throws ConfigError when it cannot
// be created or written.
std::string make_trace_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir))
    throw ConfigError("--trace " + dir + ": cannot create the directory" +
                      (ec ? " (" + ec.message() + ")" : std::string()));
  if (access(dir.c_str(), W_OK) != 0)
    throw ConfigError("--trace " + dir + ": the directory is not writable");
  return dir;
}

int run_all(int argc, char** argv) {
  const int world = mpi::size(MPI_COMM_WORLD);
  const int me = world_rank();
  RunOptions o;
  CLI::App app{"bubblebench run: every schedule end to end over MPI (start under mpiexec -n P)",
               "bubblebench run"};
  // A flag given twice takes its last value (a job's EXTRA_ARGS after a params line's flags).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  add_options(app, o);

  SetupError err;
  std::vector<RunConfig> configs;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transport> transport;
  MPI_Comm p2p = MPI_COMM_NULL, coll = MPI_COMM_NULL;
  bool help = false;
  try {
    try {
      app.parse(argc - 1, argv + 1);
    } catch (const CLI::CallForHelp&) {
      help = true;
    } catch (const CLI::ParseError& e) {
      throw ConfigError(e.what() + std::string(" (see --help)"));
    }
    if (help) {
      if (me == 0) std::cout << app.help();
      return kExitOk;
    }
    validate_options(o, world);
    configs = expand(o, world, me == 0);
  } catch (const ConfigError& e) {
    err = {kExitConfig, std::string("bubblebench: error: ") + e.what()};
  } catch (const ScheduleError& e) {
    err = {kExitCheckFailed, std::string("bubblebench: invalid schedule: ") + e.what()};
  } catch (const IoError& e) {
    err = {kExitIo, std::string("bubblebench: I/O error: ") + e.what()};
  }
  // Agreement after each phase: the worst exit code wins and the lowest rank that has it
  // prints its line. Phases that make collective objects (the NCCL transport) only start
  // when every rank got through the previous one.
  auto agree = [&]() {
    const int code = mpi::allreduce_max(err.code, MPI_COMM_WORLD, o.timeout);
    if (code != 0) {
      const int printer =
          mpi::allreduce_min(err.code == code ? me : world, MPI_COMM_WORLD, o.timeout);
      if (printer == me) say(err.line);
    }
    return code;
  };
  auto attempt = [&](auto&& phase) {
    try {
      phase();
    } catch (const ConfigError& e) {
      err = {kExitConfig, std::string("bubblebench: error: ") + e.what()};
    } catch (const std::exception& e) {
      err = {kExitConfig,
             std::string("bubblebench: error: rank ") + std::to_string(me) + ": " + e.what()};
    }
  };
  if (const int code = agree(); code != 0) return code;
  // Each rank built the sweep from its own arguments and files. Unless they all built the same
  // one (an MPMD launch with other flags per rank, a csv:FILE that differs between nodes), the
  // first message would wait for ever: rank 0's fingerprint of its run_keys goes to every rank.
  {
    const int mine = sweep_fingerprint(configs);
    int first = mine;
    mpi::broadcast(first, 0, MPI_COMM_WORLD, o.timeout);
    if (mine != first)
      err = {kExitConfig, "bubblebench: error: rank " + std::to_string(me) +
                              " built other configurations than rank 0 (every rank needs the "
                              "same arguments and the same csv: files)"};
  }
  if (const int code = agree(); code != 0) return code;
  // The communicators and the backend.
  attempt([&] {
    p2p = mpi::duplicate(MPI_COMM_WORLD, o.timeout);
    coll = mpi::duplicate(MPI_COMM_WORLD, o.timeout);
    backend = make_backend(o.backend, o.backend == "cuda" ? local_rank() : 0, o.dtype);
  });
  if (const int code = agree(); code != 0) return code;

  // The outputs, on rank 0 only: the results file (created, resumed or replaced) and the trace
  // directory. Any problem is a configuration error (exit 2): an existing file without
  // --resume/--force, a missing or read-only folder, with --resume a truncated or corrupt
  // file or another schema_version (such a file is left untouched).
  std::unique_ptr<ResultsFile> results;
  std::string trace_dir;
  bool new_file = false;  // this launch made the file: removed again if the setup fails below
  attempt([&] {
    if (me != 0) return;
    try {
      if (!o.out.empty()) {
        std::error_code ec;
        new_file = o.force || !std::filesystem::exists(o.out, ec);
        results = std::make_unique<ResultsFile>(o.out,
                                                o.resume  ? OpenMode::kResume
                                                : o.force ? OpenMode::kForce
                                                          : OpenMode::kCreate,
                                                root_attributes(argc, argv));
      }
      if (!o.trace.empty()) trace_dir = make_trace_dir(o.trace);
    } catch (const IoError& e) {
      throw ConfigError(e.what());
    }
  });
  auto drop_new_file = [&] {
    if (results && new_file && results->complete_keys().empty()) {
      std::error_code ec;
      std::filesystem::remove(results->path(), ec);
    }
  };
  if (const int code = agree(); code != 0) {
    drop_new_file();
    return code;
  }
  // --resume: rank 0 tells every rank which configurations the file holds already (a
  // non-blocking broadcast), before the transport exists: before any point-to-point message.
  std::vector<int> skip(configs.size(), 0);
  if (results)
    for (std::size_t i = 0; i < configs.size(); ++i)
      skip[i] = results->has_complete(configs[i].key) ? 1 : 0;
  if (o.resume) mpi::broadcast(skip, 0, coll, o.timeout);

  // The transport (collective; NCCL connects its peers here).
  attempt([&] {
    transport = make_transport(o.transport.empty() ? default_transport(o.backend) : o.transport,
                               p2p, *backend);
  });
  if (const int code = agree(); code != 0) {
    transport.reset();
    drop_new_file();
    return code;
  }

  RunContext ctx(o, *backend, *transport, coll);
  ctx.results = results.get();
  ctx.trace_dir = trace_dir;
  // Host names and devices for the ranks dataset; one host clock for all ranks when they
  // share one machine (steady_clock is system-wide).
  const std::string host = host_name();
  ctx.host = mpi::gather(host, 0, coll, o.timeout);
  for (const std::string& h : ctx.host) ctx.shared_clock = ctx.shared_clock && h == host;
  for (const auto& d :
       mpi::gather(std::vector<double>{double(device_of(*backend))}, 0, coll, o.timeout))
    ctx.device.push_back(static_cast<int>(d.at(0)));
  // Ranks on one GPU (more ranks than a node's GPUs, --transport mpi) take turns on it: each
  // action's GPU time then includes the other ranks' kernels unless CUDA MPS runs them side by
  // side, so the run is a functional test, not a per-stage timing (docs/gpu.md).
  if (me == 0 && o.backend == "cuda")
    if (const std::string shared = shared_gpu_note(ctx.host, ctx.device); !shared.empty())
      say("bubblebench: warning: " + shared +
          ": their kernels time-slice unless CUDA MPS runs, so timings are not one GPU per "
          "stage (docs/gpu.md)");

  json rows = json::array();
  bool check_failed = false;
  using Clock = std::chrono::steady_clock;
  const auto sweep_start = Clock::now();
  const auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  const std::size_t to_run =
      configs.size() - static_cast<std::size_t>(std::count(skip.begin(), skip.end(), 1));
  std::size_t ran = 0;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const RunConfig& c = configs[i];
    char head[64];
    std::snprintf(head, sizeof head, "[%zu/%zu] ", i + 1, configs.size());
    if (skip[i]) {
      if (me == 0) {
        ctx.finish_writing();  // the lines in order
        say(head + c.label + ": skipped (complete in " + o.out + ")");
      }
      continue;
    }
    const auto run_start = Clock::now();
    json j = run_config(c, ctx, &check_failed);
    if (me == 0) {
      rows.push_back(std::move(j));
      // The progress line once the run is written: the time of the run itself (its write
      // overlaps the next run's warmup), the elapsed time and the ETA then.
      ctx.after_writing = [&, line = std::string(head) + c.label, run_s = since(run_start)] {
        ++ran;
        const double elapsed = since(sweep_start);
        char tail[160];
        std::snprintf(tail, sizeof tail, ": %.2f s, elapsed %.1f s, ETA %.1f s", run_s, elapsed,
                      elapsed / static_cast<double>(ran) * static_cast<double>(to_run - ran));
        say(line + tail);
      };
      if (!ctx.writing.valid()) ctx.finish_writing();  // nothing to write: the line now
    }
  }
  ctx.finish_writing();
  mpi::barrier(coll, o.timeout);
  if (me == 0) {
    if (o.format == "json")
      std::cout << rows.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    else
      print_summary(rows, o.sync == "none");
    std::cout.flush();
  }
  transport.reset();
  ctx.pools.clear();
  MPI_Comm_free(&p2p);
  MPI_Comm_free(&coll);
  return check_failed ? kExitCheckFailed : kExitOk;
}

}  // namespace

std::string shared_gpu_note(const std::vector<std::string>& host, const std::vector<int>& device) {
  const std::size_t n = std::min(host.size(), device.size());
  for (std::size_t a = 0; a < n; ++a) {
    std::vector<std::size_t> same{a};
    for (std::size_t b = a + 1; b < n; ++b)
      if (host[b] == host[a] && device[b] == device[a]) same.push_back(b);
    if (same.size() < 2) continue;
    std::string ranks;
    for (std::size_t i = 0; i < same.size(); ++i)
      ranks += (i == 0 ? "" : i + 1 == same.size() ? " and " : ", ") + std::to_string(same[i]);
    return "ranks " + ranks + " share GPU " + std::to_string(device[a]) + " on " + host[a];
  }
  return "";
}

int run_main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    say("bubblebench: error: MPI_Init failed");
    return kExitConfig;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
#if defined(__linux__)
  // Sleeps of ~µs (the waits' backoff, synthetic compute) otherwise overshoot by the default
  // 50 µs timer slack.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
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
  } catch (const std::exception& e) {
    fail("error: ", e, kExitCheckFailed);
  }
  MPI_Finalize();
  return code;
}

}  // namespace bb
