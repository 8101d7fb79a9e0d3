#include "harness/auto_partition.hpp"

#include <cstdio>
#include <memory>
#include <string>
#include <tuple>

#include "advise/partition_step.hpp"
#include "common/error.hpp"
#include "harness/block_profile.hpp"
#include "harness/output.hpp"
#include "runtime/mpi_util.hpp"

namespace bb::harness {
namespace {

constexpr int kProfileReps = 3;  // micro-batches timed per block (after one warm-up)
constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

// F, B, W and memory of the blocks, then of the two ends.
std::vector<double> pack_costs(const PartitionCosts& c) {
  std::vector<double> out;
  const auto add = [&out](const BlockCost& b) { out.insert(out.end(), {b.f, b.b, b.w, b.memory}); };
  for (const BlockCost& b : c.blocks) add(b);
  add(c.first);
  add(c.last);
  return out;
}

PartitionCosts unpack_costs(const std::vector<double>& v) {
  std::vector<BlockCost> all;
  for (std::size_t i = 0; i + 3 < v.size(); i += 4)
    all.push_back({v[i], v[i + 1], v[i + 2], v[i + 3]});
  PartitionCosts c;
  c.last = all.back();
  all.pop_back();
  c.first = all.back();
  all.pop_back();
  c.blocks = std::move(all);
  return c;
}

}  // namespace

PartitionCosts profile_median(Backend& backend, const ExecutorConfig& config, int blocks, int reps,
                              MPI_Comm comm, double timeout_s) {
  const PartitionCosts mine = profile_blocks(backend, config, blocks, reps);
  std::vector<PartitionCosts> all;
  for (const std::vector<double>& v : mpi::gather(pack_costs(mine), 0, comm, timeout_s))
    all.push_back(unpack_costs(v));
  return all.empty() ? PartitionCosts{} : median_costs(all);
}

Partition choose_partition(const PartitionCosts& costs, const Schedule& s, double lambda,
                           MPI_Comm comm, double timeout_s) {
  const PartitionLayout layout = partition_layout(s);
  Partition p;
  p.blocks.assign(layout.positions.size(), 0);
  std::string error;
  if (mpi::rank(comm) == 0) {
    try {
      p = optimal_partition(costs, layout, lambda);
    } catch (const ConfigError& e) {  // every rank stops, not only this one
      error = e.what();
      p.blocks.assign(layout.positions.size(), -1);
    }
  }
  mpi::broadcast(p.blocks, 0, comm, timeout_s);
  if (!p.blocks.empty() && p.blocks.front() < 0)
    throw ConfigError(error.empty() ? "--partition auto failed on rank 0" : error);
  return p;
}

RunSettings with_auto_partition(RunContext& ctx, const RunConfig& c) {
  RunSettings o = ctx.o;
  ExecutorConfig ec = executor_config(o, c.hidden, c.layers, c.mb_size);
  ec.recompute = c.recompute;
  ec.partition.clear();
  auto& profile = ctx.partition_profiles[std::make_tuple(c.hidden, c.mb_size, c.recompute)];
  if (!profile)
    profile = std::make_shared<const PartitionCosts>(
        profile_median(ctx.backend, ec, o.model_layers, kProfileReps, ctx.comm, o.timeout));
  const Schedule& s = *c.lowered;
  const Partition p =
      choose_partition(*profile, s, o.partition_lambda / kBytesPerGiB, ctx.comm, o.timeout);
  o.partition = p.blocks;
  if (ctx.transport.rank() != 0) return o;
  o.partition_costs = profile;
  const std::vector<int> even = stage_layers(ec, model_stages(s));
  char line[256];
  std::snprintf(
      line, sizeof line,
      "partition: %s (predicted imbalance %.1f %%%s; simulated step %.2f ms, even %s: %.2f ms)",
      partition_text(p.blocks).c_str(), 100 * p.imbalance, p.proven ? "" : ", not proven optimal",
      1e3 * simulated_step(*profile, s, p.blocks, o.barrier()), partition_text(even).c_str(),
      1e3 * simulated_step(*profile, s, even, o.barrier()));
  say(line);
  return o;
}

}  // namespace bb::harness
