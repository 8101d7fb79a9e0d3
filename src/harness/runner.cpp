#include "harness/runner.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "harness/auto_partition.hpp"
#include "harness/calibration.hpp"
#include "harness/fields.hpp"
#include "harness/memory.hpp"
#include "harness/metrics.hpp"
#include "harness/output.hpp"
#include "harness/step.hpp"
#include "harness/wire.hpp"
#include "results/chrome_trace.hpp"
#include "runtime/cuda_plugin.hpp"
#include "runtime/mpi_util.hpp"
#include "schedule/message.hpp"
#include "schedule/text.hpp"

namespace bb::harness {
namespace {

// The display name of a lowered action (an FB pair as "(0F4;3BW1)FB").
std::string action_name(const Schedule& s, int rank, std::size_t index, bool fb) {
  const auto& acts = s.ranks[static_cast<std::size_t>(rank)];
  if (index >= acts.size()) return "?";
  if (fb && index + 1 < acts.size()) {
    std::string pair = "(";  // appended, not "(" + ...: GCC 12 warns falsely (-Wrestrict)
    pair += to_string(acts[index]);
    pair += ';';
    pair += to_string(acts[index + 1]);
    pair += ")FB";
    return pair;
  }
  return to_string(acts[index]);
}

// Chrome trace of the last timed iteration (docs/traces.md): ranks as processes; compute, the
// wait of a compute for its inputs (ready -> start, when > 0), and SEND/RECV from post to end,
// each message's send and receive joined by a flow. BYTES: one message.
std::vector<TraceSlice> trace_slices(const Schedule& s, const std::vector<RankSummary>& ranks,
                                     const std::vector<std::vector<double>>& shift,
                                     std::size_t last, double bytes) {
  std::vector<TraceSlice> slices;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const int pid = static_cast<int>(r);
    const double sh = shift[r][last];
    for (const EventSummary& e : ranks[r].events) {
      if (static_cast<std::size_t>(e.iter) != last) continue;
      const int kind = static_cast<int>(e.kind);
      const bool comm = kind >= kFirstCommKind;
      TraceSlice t{.pid = pid,
                   .lane = TraceLane::compute,
                   .name = action_name(s, pid, static_cast<std::size_t>(e.index),
                                       kind == static_cast<int>(RecordKind::FB)),
                   .kind = kEventKinds[kind]};
      t.chunk = static_cast<int>(e.chunk);
      t.mb = static_cast<int>(e.mb);
      t.stage = t.chunk < static_cast<int>(s.chunk_stage.size()) ? s.chunk_stage[t.chunk] : -1;
      t.start_us = (sh + e.start) * 1e6;
      t.end_us = (sh + e.end) * 1e6;
      if (comm) {
        const Op op = static_cast<Op>(static_cast<int>(Op::SEND_F) + kind - kFirstCommKind);
        t.lane = is_send(op) ? TraceLane::send : TraceLane::recv;
        t.bytes = bytes;
        t.flow = message_flow_id(message_producer(make_action(op, t.chunk, t.mb)), t.mb,
                                 is_forward_comm(op), s.num_chunks());
      } else if (e.start > e.ready) {
        TraceSlice w = t;
        w.lane = TraceLane::wait;
        w.name = "wait " + t.name;
        w.kind = "wait";
        w.start_us = (sh + e.ready) * 1e6;
        w.end_us = t.start_us;
        slices.push_back(std::move(w));
      }
      slices.push_back(std::move(t));
    }
  }
  return slices;
}

// This rank's record of one timed step (ITER: its index among the timed steps). Compute
// events always (the attribution replays them); communication events when asked for.
void add_step(RankSummary& mine, const StepRecord& rec, bool events) {
  const double iter = static_cast<double>(mine.steps.size());
  mine.steps.push_back(step_summary(rec));
  for (const ActionRecord& a : rec.actions)
    mine.durations[static_cast<int>(a.kind)].push_back((a.end - a.start) / a.fraction);
  for (const ActionRecord& a : rec.actions)
    mine.events.push_back({iter, static_cast<double>(a.index), static_cast<double>(a.kind),
                           static_cast<double>(a.chunk), static_cast<double>(a.mb), a.ready,
                           a.start, a.end});
  if (!events) return;
  for (const CommRecord& m : rec.comms)
    mine.events.push_back({iter, static_cast<double>(m.index),
                           static_cast<double>(kFirstCommKind + static_cast<int>(m.op) -
                                               static_cast<int>(Op::SEND_F)),
                           static_cast<double>(m.chunk), static_cast<double>(m.mb), m.start,
                           m.start, m.end});
}

void print_records(const StepRecord& rec, int rank, int step) {
  for (const ActionRecord& a : rec.actions)
    std::fprintf(
        stderr,
        "record rank %d step %d %s chunk %d mb %u ready %.4f start %.4f end %.4f wait %.4f\n", rank,
        step, record_kind_name(a.kind), a.chunk, a.mb, (rec.origin + a.ready) * 1e3,
        (rec.origin + a.start) * 1e3, (rec.origin + a.end) * 1e3, a.wait * 1e3);
}

// The warmup and timed steps of one configuration on this rank.
RankSummary timed_steps(Executor& ex, RunContext& ctx) {
  const RunSettings& o = ctx.o;
  // Events of every timed step for the results file; of the last one for a trace only.
  // (Every rank knows whether rank 0 has --out / --trace: the same arguments.)
  const bool all_events = !o.out.empty();
  const bool last_events = all_events || !o.trace.empty();
  RankSummary mine;
  StepRecord rec;
  for (int step = 0; step < o.warmup + o.iters; ++step) {
    if (step == o.warmup) {
      ctx.finish_writing();  // the previous run's files (rank 0)
      ex.reset_peaks();
    }
    training_step(ex, &rec, ctx.comm,
                  {.barrier = o.barrier() || step == 0, .update = true, .timeout_s = o.timeout});
    if (step < o.warmup) continue;
    if (o.debug_records) print_records(rec, ctx.transport.rank(), step);
    add_step(mine, rec, all_events || (last_events && step == o.warmup + o.iters - 1));
  }
  return mine;
}

// The memory model (sim/memory.hpp) on timed step ITER as measured: every rank's compute units
// and SEND/RECV on the common time line (seconds; SHIFT as for the trace), with each rank's
// runtime bytes. Empty without the step's events.
std::vector<RankMemory> measured_memory(const RunConfig& c, const RunSettings& o,
                                        const std::vector<RankSummary>& ranks,
                                        const std::vector<std::vector<double>>& shift,
                                        std::size_t iter) {
  std::vector<SimEvent> compute, comms;
  for (std::size_t r = 0; r < ranks.size(); ++r)
    for (const EventSummary& e : ranks[r].events) {
      if (static_cast<std::size_t>(e.iter) != iter) continue;
      const int kind = static_cast<int>(e.kind);
      const double sh = shift[r][iter];
      (kind >= kFirstCommKind ? comms : compute)
          .push_back({static_cast<int>(r), static_cast<std::size_t>(e.index),
                      kind == static_cast<int>(RecordKind::FB) ? 2 : 1, sh + e.ready, sh + e.start,
                      sh + e.end});
    }
  if (compute.empty()) return {};
  std::vector<RankMemory> out =
      rank_memory(*c.lowered, memory_config(c, o), {&compute, nullptr, &comms}, true);
  for (std::size_t r = 0; r < out.size() && r < ranks.size(); ++r)
    add_runtime_bytes(out[r], ranks[r].runtime_bytes + ranks[r].comm_device_bytes);
  return out;
}

std::vector<MemoryRecord> memory_records(const std::vector<RankMemory>& ranks) {
  std::vector<MemoryRecord> out;
  for (std::size_t r = 0; r < ranks.size(); ++r)
    for (const MemorySample& m : ranks[r].samples)
      out.push_back({static_cast<std::uint32_t>(r), m.t, m.bytes[0], m.bytes[1], m.bytes[2],
                     m.bytes[3], m.bytes[4]});
  return out;
}

// Rank 0: writes the run (results file, trace) on a thread.
void start_writing(RunContext& ctx, const RunConfig& c, const RunSettings& o, const RunSummary& s,
                   const std::vector<RankSummary>& ranks) {
  std::optional<RunRecord> record;
  const StepSeries m = measure_steps(ranks, ctx.where.clock);  // the shifts
  const std::size_t n = ranks.empty() ? 0 : ranks[0].steps.size();
  const std::vector<RankMemory> memory = (ctx.results != nullptr || !ctx.trace_dir.empty()) && n > 0
                                             ? measured_memory(c, o, ranks, m.shift, n - 1)
                                             : std::vector<RankMemory>{};
  if (ctx.results != nullptr) {
    RunRecord run = to_record(s);
    std::size_t total = 0;
    for (const RankSummary& r : ranks) total += r.events.size();
    run.events.reserve(total);
    for (std::size_t r = 0; r < ranks.size(); ++r)
      for (const EventSummary& e : ranks[r].events) {
        const auto k = static_cast<std::size_t>(e.iter);
        run.events.push_back({static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(r),
                              static_cast<std::uint32_t>(e.chunk), static_cast<std::uint32_t>(e.mb),
                              kEventKinds[static_cast<int>(e.kind)], m.shift[r][k] + e.start,
                              m.shift[r][k] + e.end});
      }
    run.memory = memory_records(memory);
    record = std::move(run);
  }
  std::string trace_path;
  std::vector<TraceSlice> slices;
  std::vector<TraceCounter> counters;
  if (!ctx.trace_dir.empty() && n > 0) {
    trace_path = (std::filesystem::path(ctx.trace_dir) / trace_file_name(c.key)).string();
    const double bytes =
        static_cast<double>(message_bytes(executor_config(ctx.o, c.hidden, c.layers, c.mb_size)));
    slices = trace_slices(*c.lowered, ranks, m.shift, n - 1, bytes);
    counters = memory_counters(memory, 1e6);
  }
  if (record || !trace_path.empty())
    ctx.writing = std::async(
        std::launch::async,
        [results = ctx.results, record = std::move(record), trace_path, slices = std::move(slices),
         counters = std::move(counters), P = c.lowered->P, title = c.label]() mutable {
          if (record) results->write_run(*record);
          if (!trace_path.empty())
            write_chrome_trace(trace_path, std::move(slices), P, title,
                               "1 us of the ranks' common time line", counters);
        });
}

volatile std::sig_atomic_t g_stop = 0;  // SIGUSR1 seen
extern "C" void on_stop_signal(int) {
  g_stop = 1;
}

}  // namespace

void RunContext::finish_writing() {
  if (writing.valid()) writing.get();
  if (after_writing) {
    auto then = std::move(after_writing);
    after_writing = nullptr;
    then();
  }
}

BufferPool& RunContext::pool(std::size_t count, Dtype dtype) {
  for (auto& [size, p] : pools) p->clear();  // each run's peak its own
  auto& p = pools[{count, dtype}];
  if (!p) p = std::make_unique<BufferPool>(backend, count, dtype);
  return *p;
}

void gather_placement(RunContext& ctx, const RankPlacement& mine) {
  // The device's name from the backend (the placement knows only its index).
  const std::string device =
      mine.device_name.empty() ? cuda_plugin::device_name(ctx.backend) : mine.device_name;
  const std::string wire = mine.host + '\n' + mine.cpus + '\n' + std::to_string(mine.host_cpus) +
                           '\n' + std::to_string(mine.gpu) + '\n' + (mine.mps ? "1" : "0") + '\n' +
                           device;
  ctx.where.ranks.clear();
  std::vector<std::string> hosts;
  for (const std::string& w : mpi::gather(wire, 0, ctx.comm, ctx.o.timeout)) {
    std::istringstream in(w);
    RankPlacement p;
    std::string n, gpu, mps;
    std::getline(in, p.host);
    std::getline(in, p.cpus);
    std::getline(in, n);
    std::getline(in, gpu);
    std::getline(in, mps);
    std::getline(in, p.device_name);
    p.host_cpus = std::stoi(n);
    p.gpu = std::stoi(gpu);
    p.mps = mps == "1";
    hosts.push_back(p.host);
    ctx.where.ranks.push_back(std::move(p));
  }
  ctx.where.clock = clock_of_hosts(hosts);
}

namespace {

// The rank's memory after its timed steps: on CUDA the caching allocator's high-water (its
// blocks, cache, workspaces and bf16 copies), else the bytes allocated through Buffers; the
// runtime's (context, cuBLAS) and the transport's bytes apart.
void set_memory(RankSummary& mine, const Executor& ex, RunContext& ctx) {
  mine.peak_units = ex.peak_activation_units();
  mine.peak_bytes = static_cast<double>(ex.peak_activation_bytes());
  mine.param_bytes = static_cast<double>(ex.param_bytes());
  mine.peak_device_bytes = static_cast<double>(ctx.backend.peak_allocated_bytes());
  mine.runtime_bytes = static_cast<double>(cuda_plugin::runtime_bytes(ctx.backend));
  if (const auto mem = cuda_plugin::device_memory(ctx.backend)) {
    mine.peak_device_bytes = static_cast<double>(mem->peak_allocated);
    mine.device_used_peak_bytes = static_cast<double>(mem->device_peak_used);
  }
  mine.comm_device_bytes = static_cast<double>(ctx.transport.device_bytes());
  mine.pinned_host_bytes = static_cast<double>(ctx.transport.pinned_host_bytes());
}

}  // namespace

RunOutcome run_config(const RunConfig& c, RunContext& ctx) {
  // With --partition auto, the settings of this run hold the split chosen for its schedule.
  const RunSettings o = ctx.o.partition_auto ? with_auto_partition(ctx, c) : ctx.o;
  ExecutorConfig ec = executor_config(o, c.hidden, c.layers, c.mb_size);
  ec.recompute = c.recompute;
  ec.drop_sends = o.drop_sends_rank == ctx.transport.rank();
  ec.debug_delay_s = o.debug_delay_rank == ctx.transport.rank() ? o.debug_delay_s : 0.0;
  Executor ex(*c.lowered, ctx.backend, ctx.transport, ctx.pool(activation_count(ec), ec.dtype), ec);
  CheckOutcome check;
  if (o.check) check = run_check(ex, ctx.backend, c, o, ctx.comm);
  RunOutcome out;
  out.check_failed = check.status == CheckStatus::kFail;
  // peak_device_bytes: this configuration's steps, after --check's reference has gone.
  ctx.backend.reset_peak_allocated();
  (void)cuda_plugin::device_memory(ctx.backend, cuda_plugin::MemoryRead::kRestart);

  RankSummary mine = timed_steps(ex, ctx);
  set_memory(mine, ex, ctx);
  const auto all = mpi::gather(pack(mine), 0, ctx.comm, o.timeout);
  if (ctx.transport.rank() != 0) return out;

  std::vector<RankSummary> ranks;
  for (const auto& r : all) ranks.push_back(unpack(r));
  const std::vector<LinkFit> used =
      ctx.links.empty() ? std::vector<LinkFit>{} : links_used(ctx.links, *c.lowered);
  out.summary = summarize(c, o, ranks, ctx.where, check, used);
  out.summary->device_name = cuda_plugin::device_name(ctx.backend);  // rank 0's: MFU's peak
  if (o.backend == BackendKind::kCuda) {  // the versions the run used, captured now
    const cuda_plugin::Versions v = cuda_plugin::versions();
    out.summary->cuda_version = v.runtime;
    out.summary->cuda_driver_version = v.driver;
    if (o.transport == TransportKind::kNccl) out.summary->nccl_version = v.nccl;
  }
  set_metrics(*out.summary);
  if (!used.empty()) {
    out.summary->links = used;
    out.summary->links_attrs = ctx.links_attrs;
  }
  start_writing(ctx, c, o, *out.summary, ranks);
  return out;
}

SweepOutcome run_sweep(RunContext& ctx, const std::vector<RunConfig>& configs,
                       const std::vector<int>& skip,
                       const std::function<void(const RunSummary&)>& finished) {
  const bool root = ctx.transport.rank() == 0;
  SweepOutcome out;
  using Clock = std::chrono::steady_clock;
  const auto sweep_start = Clock::now();
  const auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  const std::size_t to_run =
      configs.size() - static_cast<std::size_t>(std::count(skip.begin(), skip.end(), 1));
  std::size_t ran = 0;
  if (ctx.o.calibrate) calibrate_sweep(ctx, configs, skip);
  g_stop = 0;
  std::signal(SIGUSR1, on_stop_signal);
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const RunConfig& c = configs[i];
    if (!skip.at(i) && mpi::allreduce_max(g_stop, ctx.comm, ctx.o.timeout) != 0) {
      out.stopped = true;
      if (root) {
        ctx.finish_writing();
        say("note: SIGUSR1: stopped before run " + std::to_string(i + 1) + " of " +
            std::to_string(configs.size()) + " (exit 5); the runs done are complete" +
            (ctx.o.out.empty() ? "" : " in " + ctx.o.out + ", --resume runs the rest"));
      }
      break;
    }
    char head[64];
    std::snprintf(head, sizeof head, "[%zu/%zu] ", i + 1, configs.size());
    if (skip.at(i)) {
      if (root) {
        ctx.finish_writing();  // the lines in order
        say(head + c.label + ": skipped (complete in " + ctx.o.out + ")");
      }
      continue;
    }
    const auto run_start = Clock::now();
    RunOutcome r = run_config(c, ctx);
    out.check_failed = out.check_failed || r.check_failed;
    if (!root) continue;
    out.runs.push_back(std::move(*r.summary));
    if (finished) finished(out.runs.back());
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
  ctx.finish_writing();
  return out;
}

}  // namespace bb::harness
