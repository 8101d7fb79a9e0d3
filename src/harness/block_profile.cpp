#include "harness/block_profile.hpp"

#include <algorithm>
#include <limits>
#include <memory>

#include "common/error.hpp"

namespace bb {
namespace {

// A seed of its own for the profile's inputs and output gradients (not the run's data).
constexpr std::uint64_t kProfileSeed = 0x9e3779b97f4a7c15ull;

BlockCost cost_of(const ChunkTimes& t, const ChunkModel& chunk) {
  return {t.f + t.loss, t.b, t.w,
          static_cast<double>(2 * chunk.param_bytes() + t.peak_activation_bytes)};
}

// What `with` costs more than `without` (never below 0: the ends' differences are small
// beside timing noise in B).
BlockCost difference(const BlockCost& with, const BlockCost& without) {
  return {std::max(0.0, with.f - without.f), std::max(0.0, with.b - without.b),
          std::max(0.0, with.w - without.w), std::max(0.0, with.memory - without.memory)};
}

}  // namespace

ChunkTimes time_chunk(ChunkModel& chunk, int reps, int warmup, bool input, bool loss) {
  Backend& be = chunk.backend();
  const std::size_t n = chunk.activation_count();
  Buffer x = be.allocate(n), y = be.allocate(n), dx = be.allocate(n);
  const auto timed = [&be](auto&& work) {
    be.synchronize();
    const double t0 = be.now();
    work();
    be.synchronize();
    return be.now() - t0;
  };
  constexpr double inf = std::numeric_limits<double>::infinity();
  ChunkTimes best{inf, loss ? inf : 0.0, inf, inf, 0};
  for (int r = 0; r < warmup + reps; ++r) {
    if (input)
      chunk.make_input(r, x.data());
    else
      make_seeded_input(be, kProfileSeed, r, n, x.data());
    chunk.reset_peak_activation_bytes();
    const double f = timed([&] { chunk.forward(r, x.data(), y.data()); });
    double l = 0;
    if (loss)
      l = timed([&] { chunk.loss(r, 1, y.data(), y.data()); });
    else
      make_seeded_input(be, kProfileSeed + 1, r, n, y.data());  // an output gradient
    const double b = timed([&] { chunk.backward_input(r, y.data(), dx.data()); });
    const std::size_t peak = chunk.peak_activation_bytes();
    const double w = timed([&] { chunk.backward_weight(r); });
    if (r < warmup) continue;
    best = {std::min(best.f, f), std::min(best.loss, l), std::min(best.b, b), std::min(best.w, w),
            std::max(best.peak_activation_bytes, peak)};
  }
  return best;
}

PartitionCosts profile_blocks(Backend& backend, const ExecutorConfig& config, int blocks, int reps,
                              int warmup) {
  if (config.synthetic) throw ConfigError("--partition auto needs real compute (not --synthetic)");
  if (blocks < 1 || reps < 1 || warmup < 0)
    throw ConfigError("profile_blocks: needs blocks >= 1, reps >= 1 and warmup >= 0");
  // One block per chunk: chunk `stage` is global layer `stage`.
  ExecutorConfig one = config;
  one.layers = 1;
  one.model_layers = 0;  // not the run's split: chunk `stage` is global layer `stage`
  one.partition.clear();
  const int vocab = one.transformer ? one.transformer->vocab : 0;
  if (one.transformer) one.transformer->vocab = 0;  // the blocks alone: seeded input, MSE
  PartitionCosts costs;
  for (int l = 0; l < blocks; ++l) {
    const std::unique_ptr<ChunkModel> chunk = make_chunk(backend, one, l, nullptr);
    costs.blocks.push_back(cost_of(time_chunk(*chunk, reps, warmup, false, false), *chunk));
  }
  if (vocab > 0) {
    // Stage 0 of 2 holds the embedding and block 0; stage 1 of 2 block 1 and the head.
    ExecutorConfig ends = one;
    ends.transformer->vocab = vocab;
    const std::unique_ptr<ChunkModel> first = make_chunk(backend, ends, 0, nullptr, 2);
    const std::unique_ptr<ChunkModel> last = make_chunk(backend, ends, 1, nullptr, 2);
    const std::unique_ptr<ChunkModel> b0 = make_chunk(backend, one, 0, nullptr);
    const std::unique_ptr<ChunkModel> b1 = make_chunk(backend, one, 1, nullptr);
    costs.first = difference(cost_of(time_chunk(*first, reps, warmup, true, false), *first),
                             cost_of(time_chunk(*b0, reps, warmup, false, false), *b0));
    costs.last = difference(cost_of(time_chunk(*last, reps, warmup, false, true), *last),
                            cost_of(time_chunk(*b1, reps, warmup, false, false), *b1));
  }
  return costs;
}

}  // namespace bb
