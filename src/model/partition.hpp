// Blocks per chunk for a fixed model cut into a schedule's chunks (issue 20, `--partition
// auto`; docs/transformer.md, "Partitioner"). The model has N blocks, each with its own costs;
// the embedding's costs belong to the chunk holding block 0 and the final LayerNorm + LM head
// + loss's to the chunk holding block N−1. The route's K positions (model stages, in route
// order) take contiguous runs of blocks; a rank's time is the sum over the chunks it holds,
// each weighted by the share of micro-batches that visit it (1, or 1/2 for DualPipe's two
// copies), its memory the sum over its chunks. The partitioner minimises
//
//     max over ranks of time + λ · max over ranks of memory
//
// exactly (ties broken by the slowest chunk) within a budget: a depth-first search over the cut
// points in route order that prunes a branch as soon as its partial objective (which only grows as
// blocks are added) or a lower bound on what the remaining blocks must add reaches the best
// complete partition found so far, or is dominated by an earlier state at the same cut (no rank's
// load lower). tests/unit/test_partition.cpp checks it against every composition of small models.
#pragma once

#include <string>
#include <vector>

namespace bb {

struct Schedule;

// Costs of one block (or one end) for one micro-batch: F, B (input gradient) and W (weight
// gradient) seconds, and the bytes it holds.
struct BlockCost {
  double f = 0, b = 0, w = 0;
  double memory = 0;
  double time() const { return f + b + w; }
};

struct PartitionCosts {
  std::vector<BlockCost> blocks;  // the model's blocks, in order
  BlockCost first;                // the embedding (with the chunk of block 0)
  BlockCost last;                 // final LayerNorm, LM head and loss (with block N−1's chunk)
};

// Where one chunk of a position runs: its rank and the share of micro-batches it sees.
struct ChunkPlace {
  int rank = 0;
  double share = 1;
};

// The route's positions and where their chunks run.
struct PartitionLayout {
  int ranks = 1;
  std::vector<std::vector<ChunkPlace>> positions;  // per position, its chunk(s)
};

// The layout of a schedule: position = chunk_stage[c]; share = the fraction of micro-batches
// whose route visits chunk c.
PartitionLayout partition_layout(const Schedule& s);

struct Partition {
  std::vector<int> blocks;  // per position
  std::vector<double> rank_time, rank_memory;
  double max_time = 0, max_memory = 0;
  double objective = 0;       // max_time + λ · max_memory
  double max_chunk_time = 0;  // the slowest chunk (position), ends included
  double imbalance = 0;       // max_time / mean rank time − 1
  bool proven = true;         // optimal_partition: the search was complete (else the best found)
};

// The loads of `blocks` (per position, summing to the model's blocks). Throws ConfigError on
// a list that does not fit the layout or the model.
Partition evaluate_partition(const PartitionCosts& costs, const PartitionLayout& layout,
                             const std::vector<int>& blocks, double lambda = 0);

// The partition with the least objective among those giving every position at least
// `min_blocks` blocks; among equal objectives, the one with the shortest slowest chunk (a rank's
// sum can hide very uneven chunks, which lengthen interleaved pipelines' fill and drain); then
// the even split when it is among them, else the first the search finds. Throws ConfigError when
// none exists (fewer blocks than positions · min_blocks), on λ < 0 or negative costs. A search
// that would visit more than `max_nodes` partial partitions stops there (no hang) and returns the
// best it found — never worse than the even split — with `proven` false: many ranks with several
// chunks each and near-equal blocks leave wide plateaus of equal loads that bounds cannot prune.
Partition optimal_partition(const PartitionCosts& costs, const PartitionLayout& layout,
                            double lambda = 0, int min_blocks = 1, long long max_nodes = 2'000'000);

// Element-wise median of several measurements of the same model (e.g. one per rank): each
// block's and end's F, B, W and memory separately (an even count: the mean of the middle two).
// Throws ConfigError when the list is empty or the measurements differ in blocks.
PartitionCosts median_costs(const std::vector<PartitionCosts>& measured);

// N blocks over K positions as evenly as possible, the remainder to the first positions.
std::vector<int> even_partition(int blocks, int positions);

// Per-chunk F, B and W of one micro-batch (SimConfig's per-chunk lists) for `blocks` over the
// schedule's positions.
struct ChunkCosts {
  std::vector<double> f, b, w;
};
ChunkCosts partition_chunk_costs(const PartitionCosts& costs, const Schedule& s,
                                 const std::vector<int>& blocks);

// Blocks per chunk as text: "3,2,2,1" (separator ',') or "3-2-2-1".
std::string partition_text(const std::vector<int>& blocks, char separator = ',');

}  // namespace bb
