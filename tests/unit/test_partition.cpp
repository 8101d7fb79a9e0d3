// The partitioner (model/partition.hpp): its search equals a brute force over every
// composition of small models (random costs, every built-in placement, with and without a
// memory weight, with and without empty chunks); the loads, the layouts of real schedules, the
// per-chunk costs and the errors; and, simulated, a heavy LM head makes the auto partition's
// step shorter than the even split's for 1F1B and interleaved.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "advise/partition_step.hpp"
#include "common/error.hpp"
#include "model/partition.hpp"
#include "schedule/generators.hpp"
#include "schedule/schedule.hpp"
#include "sim/sim.hpp"

namespace bb {
namespace {

PartitionCosts random_costs(std::mt19937& rng, int blocks, double head_scale) {
  std::uniform_real_distribution<double> u(0.5, 2.0);
  PartitionCosts c;
  for (int i = 0; i < blocks; ++i) c.blocks.push_back({u(rng), u(rng), u(rng), u(rng)});
  c.first = {0.3 * u(rng), 0.0, 0.3 * u(rng), u(rng)};
  c.last = {head_scale * u(rng), head_scale * u(rng), head_scale * u(rng), head_scale * u(rng)};
  return c;
}

// Calls f on every list of K entries >= min summing to N.
void for_each_composition(int N, int K, int min, const std::function<void(std::vector<int>&)>& f) {
  std::vector<int> cur(static_cast<std::size_t>(K), 0);
  std::function<void(int, int)> rec = [&](int k, int left) {
    if (k == K - 1) {
      if (left < min) return;
      cur[static_cast<std::size_t>(k)] = left;
      f(cur);
      return;
    }
    for (int b = min; b <= left - (K - 1 - k) * min; ++b) {
      cur[static_cast<std::size_t>(k)] = b;
      rec(k + 1, left - b);
    }
  };
  rec(0, N);
}

struct LayoutCase {
  const char* schedule;
  int P, v;
};

const LayoutCase kLayouts[] = {{"1f1b", 2, 1},        {"1f1b", 3, 1},        {"1f1b", 4, 1},
                               {"interleaved", 2, 2}, {"interleaved", 3, 2}, {"interleaved", 2, 3},
                               {"zb-v", 2, 1},        {"zb-v", 3, 1},        {"dualpipev", 2, 1},
                               {"dualpipe", 2, 1},    {"dualpipe", 4, 1}};

Schedule schedule_of(const LayoutCase& lc) {
  return generate(lc.schedule, ScheduleParams{lc.P, 2 * lc.P, lc.v});
}

TEST(Partition, SearchEqualsBruteForceOverEveryComposition) {
  std::mt19937 rng(20);
  int checked = 0;
  for (const LayoutCase& lc : kLayouts) {
    const PartitionLayout layout = partition_layout(schedule_of(lc));
    const int K = static_cast<int>(layout.positions.size());
    for (int min_blocks : {0, 1}) {
      for (int N = std::max(1, K * min_blocks); N <= K * min_blocks + 7; ++N) {
        for (double head : {0.0, 1.0, 6.0}) {
          for (double lambda : {0.0, 0.4, 3.0}) {
            const PartitionCosts costs = random_costs(rng, N, head);
            // The least objective, then the least slowest chunk among those.
            double brute = std::numeric_limits<double>::infinity();
            double brute_chunk = brute;
            for_each_composition(N, K, min_blocks, [&](std::vector<int>& b) {
              const Partition e = evaluate_partition(costs, layout, b, lambda);
              if (std::isinf(brute) || e.objective < brute - 1e-9 * brute) {
                brute = e.objective;
                brute_chunk = e.max_chunk_time;
              } else if (e.objective <= brute + 1e-9 * brute) {
                brute_chunk = std::min(brute_chunk, e.max_chunk_time);
              }
            });
            const Partition p = optimal_partition(costs, layout, lambda, min_blocks);
            const std::string what =
                std::string(lc.schedule) + " P=" + std::to_string(lc.P) +
                " v=" + std::to_string(lc.v) + " N=" + std::to_string(N) +
                " min=" + std::to_string(min_blocks) + " lambda=" + std::to_string(lambda) +
                " head=" + std::to_string(head) + ": " + partition_text(p.blocks);
            EXPECT_TRUE(p.proven) << what;
            EXPECT_NEAR(p.objective, brute, 1e-9 * brute) << what;
            EXPECT_NEAR(p.max_chunk_time, brute_chunk, 1e-9 * brute_chunk) << what;
            ASSERT_EQ(static_cast<int>(p.blocks.size()), K) << what;
            int sum = 0;
            for (int b : p.blocks) {
              EXPECT_GE(b, min_blocks) << what;
              sum += b;
            }
            EXPECT_EQ(sum, N) << what;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 500);
}

TEST(Partition, LoadsOfAGivenSplit) {
  // 1F1B at P = 2: position k on rank k. Blocks of time 1+2+3 = 6 and memory 10; the
  // embedding adds 1 (memory 5) to block 0's chunk, the head 12 (memory 40) to the last.
  PartitionCosts c;
  c.blocks.assign(4, BlockCost{1, 2, 3, 10});
  c.first = {1, 0, 0, 5};
  c.last = {4, 4, 4, 40};
  const PartitionLayout layout = partition_layout(generate("1f1b", ScheduleParams{2, 4, 1}));
  const Partition even = evaluate_partition(c, layout, {2, 2}, 0.5);
  EXPECT_EQ(even.rank_time, (std::vector<double>{13, 24}));
  EXPECT_EQ(even.rank_memory, (std::vector<double>{25, 60}));
  EXPECT_DOUBLE_EQ(even.max_time, 24);
  EXPECT_DOUBLE_EQ(even.objective, 24 + 0.5 * 60);
  EXPECT_DOUBLE_EQ(even.imbalance, 24 / 18.5 - 1);
  const Partition best = optimal_partition(c, layout);
  EXPECT_EQ(best.blocks, (std::vector<int>{3, 1}));  // 19 and 18
  EXPECT_DOUBLE_EQ(best.max_time, 19);
  EXPECT_EQ(optimal_partition(c, layout, 0.0, 0).blocks, (std::vector<int>{3, 1}));
  // A heavy memory weight moves every block off the head's rank when chunks may be empty:
  // {4,0} costs 25 + 10 * max(45, 40) = 475 against {3,1}'s 19 + 10 * 50 = 519.
  EXPECT_EQ(optimal_partition(c, layout, 10.0, 0).blocks, (std::vector<int>{4, 0}));
  EXPECT_EQ(optimal_partition(c, layout, 10.0, 1).blocks, (std::vector<int>{3, 1}));
}

TEST(Partition, EvenSplitKeptWhenItIsOptimal) {
  PartitionCosts c;
  c.blocks.assign(8, BlockCost{1, 1, 1, 1});
  const PartitionLayout layout = partition_layout(generate("1f1b", ScheduleParams{4, 4, 1}));
  const Partition p = optimal_partition(c, layout);
  EXPECT_EQ(p.blocks, (std::vector<int>{2, 2, 2, 2}));
  EXPECT_DOUBLE_EQ(p.imbalance, 0);
  EXPECT_EQ(even_partition(10, 4), (std::vector<int>{3, 3, 2, 2}));
  EXPECT_EQ(even_partition(3, 4), (std::vector<int>{1, 1, 1, 0}));
}

TEST(Partition, LayoutsOfSchedules) {
  // Looped interleaved P=2 v=2: positions 0..3 on ranks 0,1,0,1; V: ranks 0,1,1,0; DualPipe:
  // each model stage s on rank s (first half of the micro-batches) and rank P-1-s (second).
  const auto ranks = [](const PartitionLayout& l) {
    std::vector<std::vector<int>> out;
    for (const auto& places : l.positions) {
      out.emplace_back();
      for (const ChunkPlace& p : places) out.back().push_back(p.rank);
    }
    return out;
  };
  const PartitionLayout inter = partition_layout(generate("interleaved", ScheduleParams{2, 4, 2}));
  EXPECT_EQ(ranks(inter), (std::vector<std::vector<int>>{{0}, {1}, {0}, {1}}));
  EXPECT_DOUBLE_EQ(inter.positions[0][0].share, 1);
  const PartitionLayout v = partition_layout(generate("zb-v", ScheduleParams{2, 4, 1}));
  EXPECT_EQ(ranks(v), (std::vector<std::vector<int>>{{0}, {1}, {1}, {0}}));
  const PartitionLayout dp = partition_layout(generate("dualpipe", ScheduleParams{2, 4, 1}));
  EXPECT_EQ(ranks(dp), (std::vector<std::vector<int>>{{0, 1}, {1, 0}}));
  EXPECT_DOUBLE_EQ(dp.positions[0][0].share, 0.5);
  EXPECT_DOUBLE_EQ(dp.positions[0][1].share, 0.5);
}

TEST(Partition, ChunkCostsFollowTheSplit) {
  PartitionCosts c;
  for (int i = 0; i < 5; ++i) c.blocks.push_back({1.0 + i, 10.0 * (1 + i), 100.0 * (1 + i), 0});
  c.first = {0.5, 0, 0.25, 0};
  c.last = {1000, 2000, 3000, 0};
  const Schedule s = generate("interleaved", ScheduleParams{2, 4, 2});
  const ChunkCosts cc = partition_chunk_costs(c, s, {2, 1, 0, 2});
  EXPECT_EQ(cc.f, (std::vector<double>{1 + 2 + 0.5, 3, 0, 4 + 5 + 1000}));
  EXPECT_EQ(cc.b, (std::vector<double>{10 + 20, 30, 0, 40 + 50 + 2000}));
  EXPECT_EQ(cc.w, (std::vector<double>{100 + 200 + 0.25, 300, 0, 400 + 500 + 3000}));
  EXPECT_EQ(partition_text({2, 1, 0, 2}), "2,1,0,2");
}

TEST(Partition, Errors) {
  PartitionCosts c;
  c.blocks.assign(3, BlockCost{1, 1, 1, 1});
  const PartitionLayout layout = partition_layout(generate("1f1b", ScheduleParams{4, 4, 1}));
  EXPECT_THROW(optimal_partition(c, layout), ConfigError);  // 3 blocks, 4 chunks of >= 1
  EXPECT_NO_THROW(optimal_partition(c, layout, 0, 0));
  EXPECT_THROW(optimal_partition(c, layout, -1, 0), ConfigError);
  EXPECT_THROW(evaluate_partition(c, layout, {1, 1, 1}), ConfigError);     // 3 entries for 4
  EXPECT_THROW(evaluate_partition(c, layout, {1, 1, 1, 1}), ConfigError);  // 4 blocks, not 3
  EXPECT_THROW(evaluate_partition(c, layout, {2, 2, -1, 0}), ConfigError);
  c.blocks[1].w = -1;
  EXPECT_THROW(optimal_partition(c, layout, 0, 0), ConfigError);
}

TEST(Partition, BudgetStopsTheSearchWithTheBestFound) {
  // Interleaved P=8 v=2, 48 equal blocks: loads come in whole blocks, so far more partitions
  // tie than bounds can prune; the search stops at its budget with the best it found.
  PartitionCosts c;
  c.blocks.assign(48, BlockCost{1.0, 1.2, 0.7, 0});
  c.last = {3, 0, 1.5, 0};
  const PartitionLayout wide = partition_layout(generate("interleaved", ScheduleParams{8, 16, 2}));
  const Partition even = evaluate_partition(c, wide, even_partition(48, 16));
  const Partition p = optimal_partition(c, wide, 0, 1, 20'000);
  EXPECT_FALSE(p.proven);
  EXPECT_LT(p.objective, even.objective);
  // Small cases finish: proven.
  std::mt19937 rng(3);
  const PartitionCosts small = random_costs(rng, 8, 1.0);
  EXPECT_TRUE(
      optimal_partition(small, partition_layout(generate("1f1b", ScheduleParams{2, 4, 1}))).proven);
}

TEST(Partition, MedianOfMeasurements) {
  const auto costs = [](double x) {
    PartitionCosts c;
    c.blocks = {{x, 2 * x, 3 * x, 4 * x}, {5 * x, 0, 0, 0}};
    c.first = {x, 0, 0, 0};
    c.last = {0, 0, x, 10 * x};
    return c;
  };
  const PartitionCosts m = median_costs({costs(1), costs(7), costs(2)});
  ASSERT_EQ(m.blocks.size(), 2u);
  EXPECT_EQ(m.blocks[0].f, 2);
  EXPECT_EQ(m.blocks[0].w, 6);
  EXPECT_EQ(m.blocks[0].memory, 8);
  EXPECT_EQ(m.blocks[1].f, 10);
  EXPECT_EQ(m.first.f, 2);
  EXPECT_EQ(m.last.memory, 20);
  // Each figure on its own: the median F and the median W may come from other measurements.
  PartitionCosts odd = costs(100);
  odd.blocks[0].f = 0;
  EXPECT_EQ(median_costs({costs(1), odd, costs(2)}).blocks[0].f, 1);
  EXPECT_EQ(median_costs({costs(1), odd, costs(2)}).blocks[0].w, 6);
  EXPECT_EQ(median_costs({costs(1), costs(3)}).blocks[0].b, 4);  // the mean of the middle two
  PartitionCosts shorter = costs(1);
  shorter.blocks.pop_back();
  EXPECT_THROW(median_costs({costs(1), shorter}), ConfigError);
  EXPECT_THROW(median_costs({}), ConfigError);
}

// Issue 20: with a heavy LM head (a large vocabulary makes the last chunk expensive), the auto
// partition gives a shorter simulated step than the even split, for 1F1B and interleaved.
TEST(Partition, HeavyHeadAutoBeatsEvenInTheSimulator) {
  for (const LayoutCase lc : {LayoutCase{"1f1b", 2, 1}, LayoutCase{"interleaved", 2, 2},
                              LayoutCase{"1f1b", 4, 1}, LayoutCase{"interleaved", 4, 2}}) {
    // Transformer-like blocks (B > F > W), 4 per chunk, and a head of about two blocks' work.
    PartitionCosts c;
    c.blocks.assign(static_cast<std::size_t>(4 * lc.P * lc.v), BlockCost{1.0, 1.2, 0.7, 0});
    c.first = {0.2, 0.0, 0.1, 0};
    c.last = {4.0, 0.0, 2.0, 0};
    for (int M : {lc.P, 2 * lc.P, 4 * lc.P, 8 * lc.P}) {
      const Schedule s = generate(lc.schedule, ScheduleParams{lc.P, M, lc.v});
      const PartitionLayout layout = partition_layout(s);
      const int K = static_cast<int>(layout.positions.size());
      const Partition best = optimal_partition(c, layout);
      const std::vector<int> even = even_partition(static_cast<int>(c.blocks.size()), K);
      const std::string what = std::string(lc.schedule) + " P=" + std::to_string(lc.P) +
                               " M=" + std::to_string(M) + ": auto " + partition_text(best.blocks) +
                               ", even " + partition_text(even);
      ASSERT_NE(best.blocks, even) << what;
      EXPECT_LT(best.max_time, evaluate_partition(c, layout, even).max_time) << what;
      const auto step = [&](const std::vector<int>& blocks) {
        return std::pair{simulated_step(c, s, blocks, true), simulated_step(c, s, blocks, false)};
      };
      const auto [auto_single, auto_steady] = step(best.blocks);
      const auto [even_single, even_steady] = step(even);
      EXPECT_LT(auto_single, even_single) << what;
      EXPECT_LT(auto_steady, even_steady) << what;
    }
  }
}

}  // namespace
}  // namespace bb
