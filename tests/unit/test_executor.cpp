// The executor without MPI: P ranks as threads over an in-process transport. Every schedule's
// gradients and loss match the sequential reference; peak activations match the schedule;
// records are complete; the watchdog fires on a missing message.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/executor.hpp"
#include "runtime/reference.hpp"
#include "runtime/wait.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/validate.hpp"
#include "sim/memory.hpp"
#include "sim/sim.hpp"

namespace bb {
namespace {

// Messages between threads: a send is copied and complete at once (eager), or, with a send
// latency, that long after it was posted (a slow link's sender waits for it); a receive
// completes when a message from its peer with its tag is there (first one in send order).
class Hub {
 public:
  struct Message {
    int tag;
    std::vector<unsigned char> data;
  };
  void put(int src, int dst, int tag, const void* buf, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto* p = static_cast<const unsigned char*>(buf);
    queues_[{src, dst}].push_back({tag, std::vector<unsigned char>(p, p + bytes)});
  }
  bool take(int src, int dst, int tag, void* buf, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& q = queues_[{src, dst}];
    for (auto it = q.begin(); it != q.end(); ++it) {
      if (it->tag != tag) continue;
      if (it->data.size() != bytes) throw std::runtime_error("hub: message size mismatch");
      std::copy(it->data.begin(), it->data.end(), static_cast<unsigned char*>(buf));
      q.erase(it);
      return true;
    }
    return false;
  }

 private:
  std::mutex mu_;
  std::map<std::pair<int, int>, std::deque<Message>> queues_;
};

class ThreadTransport final : public Transport {
 public:
  ThreadTransport(Hub& hub, int rank, int size, double send_latency_s = 0)
      : hub_(hub), rank_(rank), size_(size), send_latency_s_(send_latency_s) {}
  std::string_view name() const override { return "threads"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Request isend(ConstTensorPtr buf, std::size_t count, int peer, int tag) override {
    hub_.put(rank_, peer, tag, buf.get(), buf.bytes(count));
    if (send_latency_s_ <= 0) return Request{};  // complete
    send_done_.push_back(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(send_latency_s_)));
    return Request{kSendIds + static_cast<std::int64_t>(send_done_.size() - 1)};
  }
  Request irecv(TensorPtr buf, std::size_t count, int peer, int tag) override {
    recvs_.push_back({buf.get(), buf.bytes(count), peer, tag, true});
    return Request{static_cast<std::int64_t>(recvs_.size() - 1)};
  }
  bool test(Request& r) override {
    if (!r.valid()) return true;
    if (r.id >= kSendIds) {
      if (Clock::now() < send_done_.at(static_cast<std::size_t>(r.id - kSendIds))) return false;
      r = Request{};
      return true;
    }
    Recv& rv = recvs_.at(static_cast<std::size_t>(r.id));
    if (rv.pending && hub_.take(rv.peer, rank_, rv.tag, rv.buf, rv.bytes)) rv.pending = false;
    if (rv.pending) return false;
    r = Request{};
    return true;
  }

 private:
  struct Recv {
    void* buf;
    std::size_t bytes;
    int peer, tag;
    bool pending;
  };
  using Clock = std::chrono::steady_clock;
  static constexpr std::int64_t kSendIds = std::int64_t{1} << 40;  // request ids of sends
  Hub& hub_;
  int rank_, size_;
  double send_latency_s_;
  std::vector<Recv> recvs_;
  std::vector<Clock::time_point> send_done_;
};

struct RankResult {
  GradientSet grads;
  double loss = 0;
  double peak_units = 0;
  std::size_t peak_bytes = 0;
  std::size_t peak_allocated = 0;  // the backend's allocator high-water (pools included)
  StepRecord record;
  int layers_total = 0;
  std::string error;
};

std::vector<RankResult> run_threads(const Schedule& lowered, const ExecutorConfig& cfg, int steps,
                                    bool record, double send_latency_s = 0) {
  Hub hub;
  std::vector<RankResult> out(static_cast<std::size_t>(lowered.P));
  std::vector<std::thread> threads;
  for (int r = 0; r < lowered.P; ++r)
    threads.emplace_back([&, r] {
      RankResult& res = out[static_cast<std::size_t>(r)];
      try {
        CpuBackend backend;
        ThreadTransport transport(hub, r, lowered.P, send_latency_s);
        BufferPool pool(backend, activation_count(cfg));
        Executor ex(lowered, backend, transport, pool, cfg);
        for (int s = 0; s < steps; ++s) ex.run_step(record ? &res.record : nullptr);
        ex.sum_partner_gradients();
        if (!cfg.synthetic) {
          res.grads = ex.gradients();
          res.loss = ex.loss_sum();
        }
        res.peak_units = ex.peak_activation_units();
        res.peak_bytes = ex.peak_activation_bytes();
        res.peak_allocated = backend.peak_allocated_bytes();
        res.layers_total = ex.num_layers_total();
      } catch (const std::exception& e) {
        res.error = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

// Every rank's gradients, rank after rank, with the sum of their losses. Throws the first
// rank's error, if any.
GradientSet gathered(const std::vector<RankResult>& ranks) {
  GradientSet all;
  double loss = 0;
  for (const auto& r : ranks) {
    if (!r.error.empty()) throw std::runtime_error(r.error);
    loss += r.loss;
    all.layers.insert(all.layers.end(), r.grads.layers.begin(), r.grads.layers.end());
  }
  all.loss = loss;
  return all;
}

Schedule lowered_schedule(const std::string& name, int P, int M, int v) {
  Schedule s = generate(name, {P, M, v});
  validate_or_throw(s);
  return lower(std::move(s));
}

ExecutorConfig gemm_config(bool recompute) {
  // (.partition, .transformer and .optimizer named: GCC 12 warns on skipped members without
  // initialisers)
  return {.hidden = 8,
          .layers = 2,
          .model_layers = 0,
          .partition = {},
          .mb_size = 3,
          .seed = 77,
          .recompute = recompute,
          .transformer = {},
          .optimizer = {},
          .timeout_s = 30};
}

struct Case {
  std::string schedule;
  int P, M, v;
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const auto& name : schedule_names())
    for (int P : {1, 2, 3, 4})
      for (int M : {P, 2 * P, 2 * P + 2})
        for (int v : {1, 2}) {
          if (!schedule_takes_v(name) && v != 1) continue;
          try {
            generate(name, {P, M, v});
          } catch (const std::exception&) {
            continue;
          }
          cases.push_back({name, P, M, v});
        }
  return cases;
}

TEST(Executor, EverySchedulesGradientsMatchTheReference) {
  int checked = 0;
  for (const Case& c : all_cases())
    for (bool recompute : {false, true}) {
      SCOPED_TRACE(c.schedule + " P=" + std::to_string(c.P) + " M=" + std::to_string(c.M) +
                   " v=" + std::to_string(c.v) + (recompute ? " recompute" : ""));
      const Schedule s = lowered_schedule(c.schedule, c.P, c.M, c.v);
      const ExecutorConfig cfg = gemm_config(recompute);
      const auto ranks = run_threads(s, cfg, 1, false);
      GradientSet got;
      ASSERT_NO_THROW(got = gathered(ranks));
      CpuBackend be;
      ReferenceConfig rc;
      rc.hidden = cfg.hidden;
      rc.rows = cfg.mb_size;
      rc.num_layers = ranks[0].layers_total;
      rc.num_microbatches = c.M;
      rc.seed = cfg.seed;
      const GradientSet ref = run_reference(be, rc);
      ASSERT_EQ(got.layers.size(), ref.layers.size());
      const CompareResult cmp = compare(ref, got, 1e-5);
      EXPECT_TRUE(cmp.pass) << cmp.message;
      const auto want = peak_activations(s);
      for (int r = 0; r < c.P; ++r) EXPECT_DOUBLE_EQ(ranks[r].peak_units, want[r]) << "rank " << r;
      ++checked;
    }
  EXPECT_GT(checked, 100);
}

// Transformer chunks (runtime/transformer_stage.hpp) on every schedule, against the
// transformer's sequential reference.
TEST(Executor, EverySchedulesTransformerGradientsMatchTheReference) {
  int checked = 0;
  for (const auto& name : schedule_names())
    for (int P : {2, 3})
      for (const int vocab : {0, 11}) {  // 11: the model's ends (embedding, LM head)
        const int M = 2 * P, v = schedule_takes_v(name) ? 2 : 1;
        try {
          generate(name, {P, M, v});
        } catch (const std::exception&) {
          continue;
        }
        const bool recompute = P == 3;
        SCOPED_TRACE(name + " P=" + std::to_string(P) + (recompute ? " recompute" : "") +
                     " vocab=" + std::to_string(vocab));
        const Schedule s = lowered_schedule(name, P, M, v);
        ExecutorConfig cfg = gemm_config(recompute);
        cfg.layers = 1;
        cfg.mb_size = 2;
        TransformerConfig tc;
        tc.heads = 2;
        tc.seq = 4;
        tc.ffn = 12;
        tc.causal = true;
        tc.vocab = vocab;
        cfg.transformer = tc;
        const auto ranks = run_threads(s, cfg, 1, false);
        GradientSet got;
        ASSERT_NO_THROW(got = gathered(ranks));
        CpuBackend be;
        TransformerConfig model = tc;
        model.hidden = cfg.hidden;
        model.rows = cfg.mb_size;
        model.seed = cfg.seed;
        const GradientSet ref = run_transformer_reference(be, model, ranks[0].layers_total, M);
        ASSERT_EQ(got.layers.size(), ref.layers.size());
        const CompareResult cmp = compare(ref, got, 1e-5);
        EXPECT_TRUE(cmp.pass) << cmp.message;
        ++checked;
      }
  EXPECT_GT(checked, 20);
}

// The memory model (sim/memory.hpp) gives every rank's allocator high-water exactly on the
// threads' transport, whose sends complete when posted: every schedule, recompute both, the
// MLP and the transformer with its ends, uneven partitions, send buffers released when they
// complete and held to the step's end (the model on the order of the lists alone).
TEST(Executor, MemoryModelIsEveryRanksAllocatorPeak) {
  int checked = 0;
  for (const Case& k : all_cases())
    for (const bool transformer : {false, true}) {
      if (transformer && (k.P < 2 || k.P > 3)) continue;
      const bool recompute = (k.M + k.v) % 2 == 1, hold = k.P == 2 && k.M == 2 * k.P;
      SCOPED_TRACE(k.schedule + " P=" + std::to_string(k.P) + " M=" + std::to_string(k.M) +
                   " v=" + std::to_string(k.v) + (recompute ? " recompute" : "") +
                   (transformer ? " transformer" : "") + (hold ? " hold_sends" : ""));
      const Schedule s = lowered_schedule(k.schedule, k.P, k.M, k.v);
      ExecutorConfig cfg = gemm_config(recompute);
      cfg.hold_sends = hold;
      if (transformer) {
        cfg.mb_size = 2;
        cfg.transformer = TransformerConfig{.heads = 2, .seq = 4, .ffn = 12, .vocab = 11};
        const int stages = model_stages(s);  // uneven: stage 0 holds two blocks more
        cfg.model_layers = stages + 2;
        cfg.partition.assign(static_cast<std::size_t>(stages), 1);
        cfg.partition[0] = 3;
      }
      const auto ranks = run_threads(s, cfg, 2, false);
      const std::vector<RankMemory> model = rank_memory(s, memory_config(s, cfg));
      for (int r = 0; r < k.P; ++r) {
        ASSERT_TRUE(ranks[static_cast<std::size_t>(r)].error.empty())
            << ranks[static_cast<std::size_t>(r)].error;
        EXPECT_EQ(model[static_cast<std::size_t>(r)].peak,
                  static_cast<double>(ranks[static_cast<std::size_t>(r)].peak_allocated))
            << "rank " << r;
      }
      ++checked;
    }
  EXPECT_GT(checked, 100);
}

TEST(StageLayers, EvenSplitPartitionAndOneLineErrors) {
  ExecutorConfig c = gemm_config(false);
  EXPECT_EQ(stage_layers(c, 3), (std::vector<int>{2, 2, 2}));  // --layers 2 per chunk
  EXPECT_EQ(model_layer_count(c, 3), 6);
  c.model_layers = 7;
  EXPECT_EQ(stage_layers(c, 4), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(stage_layers(c, 2), (std::vector<int>{4, 3}));
  EXPECT_EQ(model_layer_count(c, 4), 7);
  EXPECT_EQ(widest_chunk(c, 4).layers, 2);
  EXPECT_THROW(stage_layers(c, 8), ConfigError);  // fewer blocks than chunks
  c.partition = {3, 2, 1, 1};
  EXPECT_EQ(stage_layers(c, 4), c.partition);
  EXPECT_EQ(widest_chunk(c, 4).layers, 3);
  EXPECT_THROW(stage_layers(c, 2), ConfigError);  // entries != chunks
  c.partition = {3, 2, 2, 1};
  EXPECT_THROW(stage_layers(c, 4), ConfigError);  // sums to 8
  c.partition = {4, 3, 0, 0};
  EXPECT_THROW(stage_layers(c, 4), ConfigError);  // an empty chunk
  c.model_layers = 0;
  c.partition = {1, 1};
  EXPECT_THROW(stage_layers(c, 2), ConfigError);  // a partition needs model_layers
}

// --model-layers: every schedule runs the same model, whatever its route's chunks, so the loss,
// the parameter count and the gradients of every global block agree with one reference (the
// parameters depend on the global block index only), with uneven partitions too.
TEST(Executor, FixedModelIsTheSameForEverySchedule) {
  for (const int vocab : {0, 11})
    for (const bool explicit_split : {false, true})
      for (const Case& c : std::vector<Case>{{"1f1b", 2, 4, 1},
                                             {"interleaved", 2, 4, 2},
                                             {"zb-v", 2, 4, 1},
                                             {"dualpipev", 2, 4, 1},
                                             {"dualpipe", 2, 4, 1},
                                             {"gpipe", 3, 3, 1}}) {
        SCOPED_TRACE(c.schedule + " P=" + std::to_string(c.P) + " vocab=" + std::to_string(vocab) +
                     (explicit_split ? " partition" : " even"));
        const Schedule s = lowered_schedule(c.schedule, c.P, c.M, c.v);
        ExecutorConfig cfg = gemm_config(false);
        cfg.layers = 0;
        cfg.model_layers = 7;
        cfg.mb_size = 2;
        const int stages = model_stages(s);
        if (explicit_split) {  // the first chunk gets what the even split leaves
          cfg.partition.assign(static_cast<std::size_t>(stages), 1);
          cfg.partition[0] = 7 - (stages - 1);
        }
        TransformerConfig tc;
        tc.heads = 2;
        tc.seq = 4;
        tc.vocab = vocab;
        cfg.transformer = tc;
        const auto ranks = run_threads(s, cfg, 1, false);
        GradientSet got;
        ASSERT_NO_THROW(got = gathered(ranks));
        EXPECT_EQ(ranks[0].layers_total, 7);
        CpuBackend be;
        TransformerConfig model = tc;
        model.hidden = cfg.hidden;
        model.rows = cfg.mb_size;
        model.seed = cfg.seed;
        const GradientSet ref = run_transformer_reference(be, model, 7, c.M);
        ASSERT_EQ(got.layers.size(), ref.layers.size());
        const CompareResult cmp = compare(ref, got, 1e-5);
        EXPECT_TRUE(cmp.pass) << cmp.message;
        // The whole model's parameters: 7 blocks and both ends, whatever the route.
        ExecutorConfig one = cfg;
        one.model_layers = 0;
        one.partition.clear();
        one.layers = 7;
        std::size_t ends = 0;
        for (const LayerGrads& g : ref.layers)
          if (g.layer < 0 || g.layer >= 7) ends += g.dw1.size() + g.dw2.size();
        EXPECT_EQ(model_param_count(cfg, stages), chunk_param_count(one) + ends);
      }
}

TEST(Executor, DualPipeCopiesStayIdenticalAfterTheGradientSum) {
  const Schedule s = lowered_schedule("dualpipe", 4, 8, 2);
  const auto ranks = run_threads(s, gemm_config(false), 1, false);
  // Rank r's primary copy of stage r and rank P-1-r's copy (chunk P+r) hold the same sum:
  // gradients() returns primaries only, so every layer appears exactly once.
  std::vector<int> seen;
  for (const auto& r : ranks) {
    ASSERT_EQ(r.error, "");
    for (const auto& g : r.grads.layers) seen.push_back(g.layer);
  }
  std::sort(seen.begin(), seen.end());
  ASSERT_EQ(seen.size(), 8u);  // 4 stages x 2 layers
  for (int i = 0; i < 8; ++i) EXPECT_EQ(seen[i], i);
}

// A small model whose actions are synthetic spins of the given seconds.
ExecutorConfig synthetic_config(double t_f, double t_b, double t_w) {
  ExecutorConfig cfg;
  cfg.hidden = 8;
  cfg.mb_size = 2;
  cfg.synthetic = true;
  cfg.t_f = t_f;
  cfg.t_b = t_b;
  cfg.t_w = t_w;
  return cfg;
}

TEST(Executor, SyntheticRecordsAndTimes) {
  const Schedule s = lowered_schedule("zb-h1", 2, 4, 1);
  const ExecutorConfig cfg = synthetic_config(1e-3, 1e-3, 0.5e-3);
  const auto ranks = run_threads(s, cfg, 2, true);
  for (int r = 0; r < 2; ++r) {
    const RankResult& res = ranks[r];
    ASSERT_EQ(res.error, "");
    const StepRecord& rec = res.record;
    EXPECT_EQ(rec.actions.size(), s.compute_size() / 2);  // 3 actions x 4 mbs per rank
    EXPECT_EQ(rec.num_actions, s.ranks[r].size());
    double busy = 0, shortest_fb = 1e9, shortest_w = 1e9;  // excess over the synthetic time
    for (const ActionRecord& a : rec.actions) {
      const double want = a.kind == RecordKind::W ? 0.5e-3 : 1e-3;
      // A synthetic action spins at least its time between its marks.
      EXPECT_GE(a.end - a.start, want * 0.99);
      EXPECT_LE(a.ready, a.start);
      EXPECT_GE(a.wait, 0);
      busy += a.end - a.start;
      double& shortest = a.kind == RecordKind::W ? shortest_w : shortest_fb;
      shortest = std::min(shortest, a.end - a.start - want);
    }
    // And no more than that, give or take 5 ms, for the shortest of each kind: a spin that is
    // preempted on a loaded machine takes longer (7.9 ms for a 1 ms action was seen while CI
    // shared the cores), so one action's excess says nothing, but an excess in every action of
    // a kind (a synthetic time in the wrong unit, say) does.
    EXPECT_LT(shortest_fb, 5e-3);
    EXPECT_LT(shortest_w, 5e-3);
    EXPECT_NEAR(rec.busy, busy, 1e-12);
    EXPECT_GE(rec.last_end, rec.busy);
    EXPECT_DOUBLE_EQ(res.peak_units, peak_activations(s)[r]);

    // One CommRecord per SEND/RECV of the lowered list, in list order. A RECV ends when its
    // consumer's wait ended: before that compute starts.
    const auto& acts = s.ranks[static_cast<std::size_t>(r)];
    std::size_t k = 0;
    for (std::size_t i = 0; i < acts.size(); ++i) {
      if (!is_comm(acts[i].op)) continue;
      ASSERT_LT(k, rec.comms.size());
      const CommRecord& m = rec.comms[k++];
      EXPECT_EQ(m.index, i);
      EXPECT_EQ(m.op, acts[i].op);
      EXPECT_EQ(m.chunk, acts[i].chunk);
      EXPECT_EQ(m.mb, acts[i].mb);
      EXPECT_GE(m.start, 0);
      EXPECT_LE(m.start, m.end);
      EXPECT_LE(m.end, rec.last_end + 1.0);
      if (!is_recv(m.op)) continue;
      const RecordKind want = m.op == Op::RECV_F ? RecordKind::F : RecordKind::B;
      bool found = false;
      for (const ActionRecord& a : rec.actions)
        if (a.kind == want && a.chunk == m.chunk && a.mb == m.mb) {
          found = true;
          EXPECT_LE(m.end, a.start + 1e-9);
          EXPECT_GE(m.end, a.ready);
        }
      EXPECT_TRUE(found) << "no consumer of " << to_string(acts[i]);
    }
    EXPECT_EQ(k, rec.comms.size());
    EXPECT_GT(k, 0u);
  }
}

// overhead_us_per_action is the bookkeeping time per action: what lies between a step's origin
// and its last compute end and is neither compute, waiting nor communication. Sends posted
// after the last compute and the end-of-step wait for sends to complete are communication too,
// but after last_end: subtracting them (the whole `comm`) made the overhead negative (-0.13 µs
// per action for gpipe at P=4 under MPI). Here a send completes 1 ms after it is posted, so
// GPipe's ranks 1..3, whose last action is a SEND_B, wait 1 ms after their last compute.
TEST(Executor, BookkeepingExcludesCommunicationAfterTheLastCompute) {
  const Schedule s = lowered_schedule("gpipe", 4, 4, 1);
  ExecutorConfig cfg = synthetic_config(0.2e-3, 0.2e-3, 0);
  cfg.timeout_s = 30;
  const auto ranks = run_threads(s, cfg, 2, true, /*send_latency_s=*/1e-3);
  for (int r = 0; r < 4; ++r) {
    const RankResult& res = ranks[static_cast<std::size_t>(r)];
    ASSERT_EQ(res.error, "");
    SCOPED_TRACE("rank " + std::to_string(r));
    const StepRecord& rec = res.record;
    EXPECT_GE(rec.comm_tail, r > 0 ? 1e-3 : 0.0);
    EXPECT_LE(rec.comm_tail, rec.comm);
    EXPECT_GE(rec.bookkeeping(), 0);
    EXPECT_DOUBLE_EQ(rec.bookkeeping(),
                     rec.last_end - rec.busy - rec.wait - rec.comm + rec.comm_tail);
  }
}

TEST(Executor, WatchdogNamesTheMissingMessage) {
  const Schedule s = lowered_schedule("1f1b", 2, 2, 1);
  ExecutorConfig cfg = gemm_config(false);
  cfg.timeout_s = 0.2;
  cfg.drop_sends = true;  // nothing ever arrives
  const auto ranks = run_threads(s, cfg, 1, false);
  EXPECT_EQ(ranks[0].error, "rank 0: waiting RECV_B chunk 0 mb 0 from rank 1");
  EXPECT_EQ(ranks[1].error, "rank 1: waiting RECV_F chunk 1 mb 0 from rank 0");
}

// A device whose queue never drains (on GPU: the compute stream waits for an NCCL receive
// that never arrives, with no host-side wait of its own) ends in the watchdog's line, not in
// a synchronize that waits for ever.
TEST(Executor, WatchdogCoversTheDevicesQueue) {
  struct StuckQueue : CpuBackend {
    bool queue_done() override { return false; }
  };
  const Schedule s = lowered_schedule("1f1b", 1, 2, 1);
  ExecutorConfig cfg = gemm_config(false);
  cfg.timeout_s = 0.2;
  Hub hub;
  StuckQueue backend;
  ThreadTransport transport(hub, 0, 1, 0);
  BufferPool pool(backend, static_cast<std::size_t>(cfg.hidden) * cfg.mb_size);
  Executor ex(s, backend, transport, pool, cfg);
  for (StepRecord* record : {static_cast<StepRecord*>(nullptr), new StepRecord}) {
    std::unique_ptr<StepRecord> owned(record);
    const auto start = std::chrono::steady_clock::now();
    try {
      ex.run_step(record);
      ADD_FAILURE() << "the step ended with the device's queue still busy";
    } catch (const TimeoutError& e) {
      EXPECT_EQ(std::string(e.what()),
                "rank 0: waiting for the device to finish the step (a receive it waits for never "
                "completed?)");
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  }
}

TEST(Executor, RejectsAnUnloweredScheduleAndAWrongWorld) {
  CpuBackend be;
  Hub hub;
  ThreadTransport t(hub, 0, 2);
  ExecutorConfig cfg = gemm_config(false);
  BufferPool pool(be, static_cast<std::size_t>(cfg.hidden) * cfg.mb_size);
  const Schedule raw = generate("1f1b", {2, 2, 1});
  EXPECT_THROW(Executor(raw, be, t, pool, cfg), std::invalid_argument);
  const Schedule three = lowered_schedule("1f1b", 3, 3, 1);
  EXPECT_THROW(Executor(three, be, t, pool, cfg), std::invalid_argument);
}

TEST(Transport, MessageTagsAreDistinctAndInRange) {
  EXPECT_NE(message_tag(Direction::kForward, 0, 0, 4), message_tag(Direction::kBackward, 0, 0, 4));
  EXPECT_NE(message_tag(Direction::kForward, 1, 0, 4), message_tag(Direction::kForward, 0, 1, 4));
  EXPECT_LT(message_tag(Direction::kBackward, 1023, 1 << 20, 1024, 16384), 16384);
  EXPECT_GE(message_tag(Direction::kBackward, 1023, 1 << 20, 1024, 16384), 0);
}

TEST(Wait, BackoffAndDeadline) {
  int polls = 0;
  wait_until([&] { return ++polls > 50; }, 10.0, [] { return std::string("never"); });
  EXPECT_EQ(polls, 51);
  EXPECT_THROW(wait_until([] { return false; }, 0.05, [] { return std::string("late"); }),
               TimeoutError);
  try {
    wait_until([] { return false; }, 0.01, [] { return std::string("rank 3: waiting x"); });
  } catch (const TimeoutError& e) {
    EXPECT_STREQ(e.what(), "rank 3: waiting x");
  }
  // A shaped backoff (calibrate's: sleep at once, long cap) polls until done and keeps the
  // deadline.
  polls = 0;
  wait_until([&] { return ++polls > 3; }, [] {}, 10.0, [] { return std::string("never"); },
             Backoff(std::chrono::milliseconds(1), std::chrono::nanoseconds(0)));
  EXPECT_EQ(polls, 4);
  EXPECT_THROW(wait_until([] { return false; }, [] {}, 0.05, [] { return std::string("late"); },
                          Backoff(std::chrono::milliseconds(20), std::chrono::nanoseconds(0))),
               TimeoutError);
}

}  // namespace
}  // namespace bb
