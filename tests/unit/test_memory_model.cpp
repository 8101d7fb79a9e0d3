// The memory model of a rank over one step (sim/memory.hpp), on hand-counted cases. Its
// agreement with the runtime's allocations, byte for byte, is Executor.MemoryModelIsEveryRanks-
// AllocatorPeak (test_executor.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "common/error.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/validate.hpp"
#include "sim/memory.hpp"

namespace bb {
namespace {

constexpr int kW = static_cast<int>(MemoryKind::weights);
constexpr int kA = static_cast<int>(MemoryKind::activations);
constexpr int kM = static_cast<int>(MemoryKind::messages);
constexpr int kS = static_cast<int>(MemoryKind::workspace);
constexpr int kR = static_cast<int>(MemoryKind::runtime);

Schedule schedule(const std::string& name, int P, int M, int v = 1, bool lowered = false) {
  Schedule s = generate(name, {P, M, v});
  validate_or_throw(s);
  return lowered ? lower(std::move(s)) : s;
}

// Bytes small enough to count by hand: a stage's weights 1000, workspace 7; a micro-batch's
// input 1 and saved tensors 10; a message 100.
MemoryConfig counted(bool recompute = false) {
  MemoryConfig m;
  ChunkMemory c;
  c.params = 1000;
  c.workspace = 7;
  c.input = 1;
  c.saved = 10;
  m.chunks = {c};
  m.message = 100;
  m.recompute = recompute;
  return m;
}

TEST(MemoryModel, GPipeHoldsEveryMicroBatch) {
  const Schedule s = schedule("gpipe", 2, 4);
  const auto r = rank_memory(s, counted());
  // Rank 0: 4 micro-batches' inputs and saved tensors; during an F its made input and output.
  EXPECT_EQ(r[0].peak_bytes[kA], 4 * 11);
  EXPECT_EQ(r[0].peak_bytes[kM], 2 * 100);
  EXPECT_EQ(r[0].peak_bytes[kW], 1000);
  EXPECT_EQ(r[0].peak_bytes[kS], 7);
  EXPECT_EQ(r[0].peak, 1000 + 7 + 44 + 200);
  // Rank 1 keeps each loss gradient from its F to its backward: at the last F three of them,
  // its input and its output.
  EXPECT_EQ(r[1].peak_bytes[kM], 5 * 100);
  EXPECT_EQ(r[1].peak, 1000 + 7 + 44 + 500);
}

TEST(MemoryModel, RecomputeKeepsSavedTensorsFromBToW) {
  const auto r = rank_memory(schedule("gpipe", 2, 4), counted(true));
  EXPECT_EQ(r[0].peak_bytes[kA], 4 * 1 + 10);  // 4 inputs, one re-made forward at a time
  const auto z = rank_memory(schedule("zb-h1", 2, 4), counted(true));
  // ZB-H1 splits B and W: the saved tensors live from B to W, at most two at once here.
  const auto zs = rank_memory(schedule("zb-h1", 2, 4), counted(false));
  EXPECT_LT(z[0].peak_bytes[kA], zs[0].peak_bytes[kA]);
  EXPECT_GE(z[0].peak_bytes[kA], 2 * 1 + 10);
}

TEST(MemoryModel, HeldSendsStayUntilTheStepEnds) {
  const Schedule s = schedule("gpipe", 2, 4, 1, true);
  MemoryConfig m = counted();
  m.eager_bytes = 1e9;  // sends complete when posted
  EXPECT_EQ(rank_memory(s, m)[0].peak_bytes[kM], 2 * 100);
  m.hold_sends = true;  // all four outputs until the end; the last F's made input beside
  EXPECT_EQ(rank_memory(s, m)[0].peak_bytes[kM], 5 * 100);
  EXPECT_EQ(rank_memory(s, m)[1].peak_bytes[kM], rank_memory(s, counted())[1].peak_bytes[kM]);
}

// On the simulator's times, a send that is not eager waits for its receiver's consumer: 1F1B's
// first output is still held while rank 0 runs its second F.
TEST(MemoryModel, LargeSendsWaitForTheirConsumer) {
  const Schedule s = schedule("1f1b", 2, 4);
  SimConfig sim;
  sim.t_f = {1};
  sim.t_b = {2};
  MemoryConfig m = counted();
  EXPECT_EQ(simulate_memory(s, m, sim)[0].peak_bytes[kM], 3 * 100);
  m.eager_bytes = 100;
  EXPECT_EQ(simulate_memory(s, m, sim)[0].peak_bytes[kM], 2 * 100);
}

TEST(MemoryModel, SamplesAreTheLiveBytes) {
  const Schedule s = schedule("interleaved", 2, 8, 2);
  SimConfig sim;
  sim.t_f = {1};
  sim.t_b = {1};
  sim.t_w = {1};
  MemoryConfig m = counted();
  m.rank_bytes = 3;
  const auto r = simulate_memory(s, m, sim, true);
  for (const RankMemory& rank : r) {
    ASSERT_FALSE(rank.samples.empty());
    double top = 0;
    for (const MemorySample& x : rank.samples) {
      top = std::max(top, x.total());
      EXPECT_EQ(x.bytes[kW], 2000);  // two chunks
      EXPECT_EQ(x.bytes[kS], 14);
      EXPECT_EQ(x.bytes[kR], 3);
      EXPECT_GE(x.bytes[kA], 0);
      EXPECT_GE(x.bytes[kM], 0);
    }
    EXPECT_EQ(top, rank.live_peak);
    EXPECT_LE(rank.live_peak, rank.peak);  // pools at their own high-waters
    for (std::size_t k = 1; k < rank.samples.size(); ++k)
      EXPECT_LT(rank.samples[k - 1].t, rank.samples[k].t);
    // The step ends with nothing in flight.
    EXPECT_EQ(rank.samples.back().bytes[kA] + rank.samples.back().bytes[kM], 0);
  }
  // Without samples the peaks are the same.
  const auto q = simulate_memory(s, m, sim, false);
  EXPECT_EQ(q[0].peak, r[0].peak);
  EXPECT_TRUE(q[0].samples.empty());
}

// A measured step's events may start before its t = 0 (a receive posted before the step's start
// on that rank's clock): the samples still start at the first of them and stay in time order.
TEST(MemoryModel, SamplesStayInOrderWhenEventsPrecedeTheStart) {
  const Schedule s = schedule("zb-h1", 2, 2);
  SimConfig sim;
  sim.t_f = {1};
  sim.t_b = {1};
  sim.t_w = {1};
  sim.record_events = true;
  const SimResult run = simulate(s, sim);
  std::vector<SimEvent> early = run.events;
  for (SimEvent& e : early) {
    e.ready -= 0.5;
    e.start -= 0.5;
    e.end -= 0.5;
  }
  const auto r = rank_memory(s, counted(), {&early, &sim}, true);
  for (const RankMemory& rank : r) {
    ASSERT_FALSE(rank.samples.empty());
    for (std::size_t k = 1; k < rank.samples.size(); ++k)
      EXPECT_LT(rank.samples[k - 1].t, rank.samples[k].t);
  }
  EXPECT_EQ(r[0].samples.front().t, -0.5);  // rank 0's first F
}

TEST(MemoryModel, DualPipeReceivesThePartnersGradients) {
  const Schedule s = schedule("dualpipe", 2, 4, 2);
  const auto r = rank_memory(s, counted());
  // Each rank holds two chunks (stage r and stage 1 − r's copy); each copy's partner is on the
  // other rank: a receive buffer of its gradients per chunk.
  EXPECT_EQ(r[0].peak_bytes[kW], 2 * 1000 + 2 * 1000);
}

TEST(MemoryModel, RuntimeBytesAndRefusals) {
  const Schedule s = schedule("1f1b", 2, 4);
  auto r = rank_memory(s, counted());
  const double before = r[0].peak;
  add_runtime_bytes(r[0], 50);
  EXPECT_EQ(r[0].peak, before + 50);
  EXPECT_EQ(r[0].peak_bytes[kR], 50);
  MemoryConfig m = counted();
  m.chunks.resize(3);  // neither one nor one per chunk
  EXPECT_THROW(rank_memory(s, m), ConfigError);
  m = counted();
  m.chunks[0].saved = -1;
  EXPECT_THROW(rank_memory(s, m), ConfigError);
  m = counted();
  m.message = std::numeric_limits<double>::infinity();
  EXPECT_THROW(rank_memory(s, m), ConfigError);
  EXPECT_STREQ(memory_kind_name(MemoryKind::messages), "messages");
}

}  // namespace
}  // namespace bb
