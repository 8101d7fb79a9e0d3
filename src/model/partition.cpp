#include "model/partition.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/error.hpp"
#include "common/stats.hpp"
#include "schedule/edges.hpp"
#include "schedule/schedule.hpp"

namespace bb {
namespace {

// Prefix sums of the blocks' time and memory, and the cost of one position's run of blocks.
class Segments {
 public:
  Segments(const PartitionCosts& costs, int positions) : costs_(costs), K_(positions) {
    const auto check = [](const BlockCost& c) {
      if (!(c.f >= 0 && c.b >= 0 && c.w >= 0 && c.memory >= 0))
        throw ConfigError("partition: block costs must be >= 0");
    };
    check(costs.first);
    check(costs.last);
    time_.assign(costs.blocks.size() + 1, 0.0);
    memory_.assign(costs.blocks.size() + 1, 0.0);
    for (std::size_t i = 0; i < costs.blocks.size(); ++i) {
      check(costs.blocks[i]);
      time_[i + 1] = time_[i] + costs.blocks[i].time();
      memory_[i + 1] = memory_[i] + costs.blocks[i].memory;
    }
  }
  int blocks() const { return static_cast<int>(costs_.blocks.size()); }
  // Time and memory of position k holding blocks [i, j), the ends included.
  double time(int k, int i, int j) const {
    return time_[j] - time_[i] + (k == 0 ? costs_.first.time() : 0.0) +
           (k == K_ - 1 ? costs_.last.time() : 0.0);
  }
  double memory(int k, int i, int j) const {
    return memory_[j] - memory_[i] + (k == 0 ? costs_.first.memory : 0.0) +
           (k == K_ - 1 ? costs_.last.memory : 0.0);
  }

 private:
  const PartitionCosts& costs_;
  int K_;
  std::vector<double> time_, memory_;
};

void check_layout(const PartitionLayout& layout) {
  if (layout.ranks < 1 || layout.positions.empty())
    throw ConfigError("partition: the layout needs at least one rank and one position");
  for (const auto& places : layout.positions) {
    if (places.empty()) throw ConfigError("partition: a position has no chunk");
    for (const ChunkPlace& p : places)
      if (p.rank < 0 || p.rank >= layout.ranks || !(p.share >= 0))
        throw ConfigError("partition: a chunk's rank or share is out of range");
  }
}

// Adds (sign +1) or removes (-1) position k's loads to the ranks holding it.
void add_position(const PartitionLayout& layout, int k, double time, double memory,
                  std::vector<double>& rank_time, std::vector<double>& rank_memory) {
  for (const ChunkPlace& p : layout.positions[static_cast<std::size_t>(k)]) {
    rank_time[static_cast<std::size_t>(p.rank)] += p.share * time;
    rank_memory[static_cast<std::size_t>(p.rank)] += memory;
  }
}

double max_of(const std::vector<double>& v) {
  return *std::max_element(v.begin(), v.end());
}

// The least level L at which the ranks `ranks`, each filled from its load up to L, take
// `amount` in all: no split of `amount` over them leaves every one below L.
double water_level(const std::vector<double>& load, const std::vector<int>& ranks, double amount,
                   std::vector<double>& sorted) {
  sorted.clear();
  for (int r : ranks) sorted.push_back(load[static_cast<std::size_t>(r)]);
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (std::size_t j = 0; j < sorted.size(); ++j) {
    sum += sorted[j];
    const double level = (sum + amount) / static_cast<double>(j + 1);
    if (j + 1 == sorted.size() || level <= sorted[j + 1]) return level;
  }
  return 0;
}

class Search {
 public:
  Search(const Segments& seg, const PartitionLayout& layout, double lambda, int min_blocks,
         long long max_nodes)
      : seg_(seg),
        layout_(layout),
        lambda_(lambda),
        m_(min_blocks),
        max_nodes_(max_nodes),
        N_(seg.blocks()),
        K_(static_cast<int>(layout.positions.size())) {
    // For the bound: per suffix of positions, the ranks that hold one of them, and the least
    // share sum and chunk count a position of it has.
    const auto P = static_cast<std::size_t>(layout.ranks);
    suffix_.resize(static_cast<std::size_t>(K_) + 1);
    std::vector<bool> seen(P, false);
    double min_share = std::numeric_limits<double>::infinity();
    double min_count = min_share;
    for (int k = K_ - 1; k >= 0; --k) {
      double share = 0;
      for (const ChunkPlace& p : layout.positions[static_cast<std::size_t>(k)]) {
        share += p.share;
        seen[static_cast<std::size_t>(p.rank)] = true;
      }
      min_share = std::min(min_share, share);
      min_count = std::min(
          min_count, static_cast<double>(layout.positions[static_cast<std::size_t>(k)].size()));
      Suffix& s = suffix_[static_cast<std::size_t>(k)];
      for (std::size_t r = 0; r < P; ++r)
        if (seen[r]) s.ranks.push_back(static_cast<int>(r));
      s.min_share = min_share;
      s.min_count = min_count;
    }
    time_.assign(static_cast<std::size_t>(K_) + 1, std::vector<double>(P, 0.0));
    memory_ = time_;
    chunk_.assign(static_cast<std::size_t>(K_) + 1, 0.0);
    current_.assign(static_cast<std::size_t>(K_), 0);
    seen_.resize((static_cast<std::size_t>(K_) + 1) * (static_cast<std::size_t>(N_) + 1));
  }

  void seed(const std::vector<int>& blocks, double objective, double chunk_time) {
    best_ = objective;
    best_chunk_ = chunk_time;
    best_blocks_ = blocks;
  }

  void run() { visit(0, 0); }
  bool stopped() const { return stopped_; }
  const std::vector<int>& best() const { return best_blocks_; }

 private:
  struct Suffix {
    std::vector<int> ranks;
    double min_share = 0, min_count = 0;
  };
  struct State {
    std::vector<double> time, memory;
    double chunk = 0;
  };
  static constexpr std::size_t kStatesKept = 16;

  // Objectives this close are equal (sums in another order may differ in the last bits).
  double tolerance() const { return 1e-12 * std::max(1.0, std::abs(best_)); }

  // The time of positions k..K-1 in all when blocks [i, N) are left: the blocks plus the
  // ends still to come.
  double left_time(int k, int i) const {
    return seg_.time(k, i, N_) + (k < K_ - 1 ? seg_.time(K_ - 1, N_, N_) : 0.0);
  }

  // Lower bounds on the objective and on the slowest chunk of every completion of depth k
  // (positions < k placed, blocks [i, N) left): the current maxima; the ranks still to be
  // loaded filled to one level with what is left (each position at its least share sum or
  // chunk count); the remaining chunks' mean.
  double bound(int k, int i) {
    const auto& t = time_[static_cast<std::size_t>(k)];
    const auto& mem = memory_[static_cast<std::size_t>(k)];
    double max_t = max_of(t), max_m = max_of(mem);
    if (k < K_) {
      const Suffix& s = suffix_[static_cast<std::size_t>(k)];
      const double left_m =
          seg_.memory(k, i, N_) + (k < K_ - 1 ? seg_.memory(K_ - 1, N_, N_) : 0.0);
      max_t = std::max(max_t, water_level(t, s.ranks, s.min_share * left_time(k, i), sorted_));
      if (lambda_ > 0)
        max_m = std::max(max_m, water_level(mem, s.ranks, s.min_count * left_m, sorted_));
    }
    return max_t + lambda_ * max_m;
  }
  double chunk_bound(int k, int i) const {
    const double so_far = chunk_[static_cast<std::size_t>(k)];
    return k < K_ ? std::max(so_far, left_time(k, i) / (K_ - k)) : so_far;
  }

  // True when an earlier state at (k, i) had no rank's time or memory and no chunk above this
  // one's: its completions were as good, and were searched (or pruned against a best no better
  // than today's). Else remembers this state (a few per (k, i)).
  bool dominated(int k, int i) {
    auto& seen = seen_[static_cast<std::size_t>(k) * static_cast<std::size_t>(N_ + 1) +
                       static_cast<std::size_t>(i)];
    const auto& t = time_[static_cast<std::size_t>(k)];
    const auto& mem = memory_[static_cast<std::size_t>(k)];
    const double chunk = chunk_[static_cast<std::size_t>(k)];
    const auto covers = [&](const State& st) {
      if (st.chunk > chunk) return false;
      for (std::size_t r = 0; r < t.size(); ++r)
        if (st.time[r] > t[r] || (lambda_ > 0 && st.memory[r] > mem[r])) return false;
      return true;
    };
    if (std::any_of(seen.begin(), seen.end(), covers)) return true;
    if (seen.size() < kStatesKept) seen.push_back({t, mem, chunk});
    return false;
  }

  void visit(int k, int i) {
    if (k == K_) {
      const double objective = bound(k, i), chunk = chunk_[static_cast<std::size_t>(k)];
      if (objective < best_ - tolerance() || chunk < best_chunk_) seed(current_, objective, chunk);
      return;
    }
    const int hi = k == K_ - 1 ? N_ : N_ - (K_ - 1 - k) * m_;
    const int lo = k == K_ - 1 ? N_ : i + m_;
    // Ends near an even share of what is left first: good partitions early, more pruning.
    std::vector<int> ends;
    for (int j = lo; j <= hi; ++j) ends.push_back(j);
    const double target = seg_.time(k, i, N_) / (K_ - k);
    std::stable_sort(ends.begin(), ends.end(), [&](int a, int b) {
      return std::abs(seg_.time(k, i, a) - target) < std::abs(seg_.time(k, i, b) - target);
    });
    const auto next = static_cast<std::size_t>(k) + 1;
    for (int j : ends) {
      if (++nodes_ > max_nodes_) {  // the best found so far, not proven optimal
        stopped_ = true;
        return;
      }
      time_[next] = time_[next - 1];
      memory_[next] = memory_[next - 1];
      const double t = seg_.time(k, i, j);
      add_position(layout_, k, t, seg_.memory(k, i, j), time_[next], memory_[next]);
      chunk_[next] = std::max(chunk_[next - 1], t);
      // No completion can be better: a higher objective, or an equal one and no shorter
      // slowest chunk.
      const double b = bound(k + 1, j);
      if (b > best_ + tolerance() ||
          (b >= best_ - tolerance() && chunk_bound(k + 1, j) >= best_chunk_) || dominated(k + 1, j))
        continue;
      current_[static_cast<std::size_t>(k)] = j - i;
      visit(k + 1, j);
    }
  }

  const Segments& seg_;
  const PartitionLayout& layout_;
  double lambda_;
  int m_;
  long long max_nodes_, nodes_ = 0;
  bool stopped_ = false;
  int N_, K_;
  std::vector<Suffix> suffix_;
  std::vector<std::vector<double>> time_, memory_;  // per depth, per rank
  std::vector<double> chunk_;                       // per depth, the slowest chunk's time so far
  std::vector<int> current_, best_blocks_;
  std::vector<std::vector<State>> seen_;  // per (k, i)
  std::vector<double> sorted_;            // water_level's scratch
  double best_ = std::numeric_limits<double>::infinity();
  double best_chunk_ = std::numeric_limits<double>::infinity();
};

}  // namespace

PartitionLayout partition_layout(const Schedule& s) {
  PartitionLayout layout;
  layout.ranks = s.P;
  const int C = s.num_chunks();
  int K = 0;
  for (int c = 0; c < C; ++c) K = std::max(K, s.chunk_stage[static_cast<std::size_t>(c)] + 1);
  layout.positions.resize(static_cast<std::size_t>(K));
  for (int c = 0; c < C; ++c) {
    int visits = 0;
    for (const Route& rt : s.routes) visits += route_visits(rt, c) ? 1 : 0;
    layout.positions[static_cast<std::size_t>(s.chunk_stage[static_cast<std::size_t>(c)])]
        .push_back({s.chunk_rank[static_cast<std::size_t>(c)],
                    static_cast<double>(visits) / static_cast<double>(std::max(1, s.M))});
  }
  return layout;
}

Partition evaluate_partition(const PartitionCosts& costs, const PartitionLayout& layout,
                             const std::vector<int>& blocks, double lambda) {
  check_layout(layout);
  const int K = static_cast<int>(layout.positions.size());
  const Segments seg(costs, K);
  if (static_cast<int>(blocks.size()) != K)
    throw ConfigError("partition: " + std::to_string(blocks.size()) + " entries for " +
                      std::to_string(K) + " chunks along the route");
  if (std::any_of(blocks.begin(), blocks.end(), [](int b) { return b < 0; }) ||
      std::accumulate(blocks.begin(), blocks.end(), 0) != seg.blocks())
    throw ConfigError("partition: " + partition_text(blocks) + " does not split the model's " +
                      std::to_string(seg.blocks()) + " blocks");
  Partition p;
  p.blocks = blocks;
  p.rank_time.assign(static_cast<std::size_t>(layout.ranks), 0.0);
  p.rank_memory = p.rank_time;
  int i = 0;
  for (int k = 0; k < K; ++k) {
    const int j = i + blocks[static_cast<std::size_t>(k)];
    add_position(layout, k, seg.time(k, i, j), seg.memory(k, i, j), p.rank_time, p.rank_memory);
    i = j;
  }
  p.max_time = max_of(p.rank_time);
  p.max_memory = max_of(p.rank_memory);
  p.objective = p.max_time + lambda * p.max_memory;
  i = 0;
  for (int k = 0; k < K; ++k) {
    const int j = i + blocks[static_cast<std::size_t>(k)];
    p.max_chunk_time = std::max(p.max_chunk_time, seg.time(k, i, j));
    i = j;
  }
  const double mean = std::accumulate(p.rank_time.begin(), p.rank_time.end(), 0.0) / layout.ranks;
  p.imbalance = mean > 0 ? p.max_time / mean - 1 : 0.0;
  return p;
}

Partition optimal_partition(const PartitionCosts& costs, const PartitionLayout& layout,
                            double lambda, int min_blocks, long long max_nodes) {
  check_layout(layout);
  if (!(lambda >= 0)) throw ConfigError("partition: the memory weight must be >= 0");
  if (min_blocks < 0) throw ConfigError("partition: the least blocks per chunk must be >= 0");
  const int K = static_cast<int>(layout.positions.size());
  const Segments seg(costs, K);
  if (seg.blocks() < K * min_blocks)
    throw ConfigError("partition: " + std::to_string(seg.blocks()) + " blocks cannot give " +
                      std::to_string(K) + " chunks " + std::to_string(min_blocks) + " each");
  Search search(seg, layout, lambda, min_blocks, max_nodes);
  // The even split first: the search keeps it unless something is strictly better.
  const std::vector<int> even = even_partition(seg.blocks(), K);
  if (std::all_of(even.begin(), even.end(), [&](int b) { return b >= min_blocks; })) {
    const Partition p = evaluate_partition(costs, layout, even, lambda);
    search.seed(even, p.objective, p.max_chunk_time);
  }
  search.run();
  Partition best = evaluate_partition(costs, layout, search.best(), lambda);
  best.proven = !search.stopped();
  return best;
}

PartitionCosts median_costs(const std::vector<PartitionCosts>& measured) {
  if (measured.empty()) throw ConfigError("partition: no measurements to take the median of");
  const std::size_t N = measured.front().blocks.size();
  for (const PartitionCosts& m : measured)
    if (m.blocks.size() != N) throw ConfigError("partition: measurements of different models");
  const auto median = [&](auto&& get) {
    std::vector<double> v;
    for (const PartitionCosts& m : measured) v.push_back(get(m));
    return bb::median(std::move(v));
  };
  const auto median_cost = [&](auto&& pick) {
    return BlockCost{median([&](const PartitionCosts& m) { return pick(m).f; }),
                     median([&](const PartitionCosts& m) { return pick(m).b; }),
                     median([&](const PartitionCosts& m) { return pick(m).w; }),
                     median([&](const PartitionCosts& m) { return pick(m).memory; })};
  };
  PartitionCosts out;
  for (std::size_t i = 0; i < N; ++i)
    out.blocks.push_back(
        median_cost([i](const PartitionCosts& m) -> const BlockCost& { return m.blocks[i]; }));
  out.first = median_cost([](const PartitionCosts& m) -> const BlockCost& { return m.first; });
  out.last = median_cost([](const PartitionCosts& m) -> const BlockCost& { return m.last; });
  return out;
}

std::vector<int> even_partition(int blocks, int positions) {
  if (positions < 1 || blocks < 0) throw ConfigError("partition: no positions or no blocks");
  std::vector<int> out(static_cast<std::size_t>(positions), blocks / positions);
  for (int k = 0; k < blocks % positions; ++k) ++out[static_cast<std::size_t>(k)];
  return out;
}

ChunkCosts partition_chunk_costs(const PartitionCosts& costs, const Schedule& s,
                                 const std::vector<int>& blocks) {
  const int K = static_cast<int>(blocks.size());
  std::vector<int> start(blocks.size() + 1, 0);
  std::partial_sum(blocks.begin(), blocks.end(), start.begin() + 1);
  if (start.back() != static_cast<int>(costs.blocks.size()))
    throw ConfigError("partition: " + partition_text(blocks) + " does not split the model's " +
                      std::to_string(costs.blocks.size()) + " blocks");
  ChunkCosts out;
  for (int c = 0; c < s.num_chunks(); ++c) {
    const int k = s.chunk_stage[static_cast<std::size_t>(c)];
    if (k >= K)
      throw ConfigError("partition: " + std::to_string(K) + " entries for a route of more chunks");
    BlockCost sum;
    const auto add = [&sum](const BlockCost& x) {
      sum.f += x.f;
      sum.b += x.b;
      sum.w += x.w;
    };
    for (int i = start[static_cast<std::size_t>(k)]; i < start[static_cast<std::size_t>(k) + 1];
         ++i)
      add(costs.blocks[static_cast<std::size_t>(i)]);
    if (k == 0) add(costs.first);
    if (k == K - 1) add(costs.last);
    out.f.push_back(sum.f);
    out.b.push_back(sum.b);
    out.w.push_back(sum.w);
  }
  return out;
}

std::string partition_text(const std::vector<int>& blocks, char separator) {
  std::string out;
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    if (k > 0) out += separator;
    out += std::to_string(blocks[k]);
  }
  return out;
}

}  // namespace bb
