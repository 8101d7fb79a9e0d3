#include "harness/auto_partition.hpp"

#include <string>

#include "common/error.hpp"
#include "runtime/block_profile.hpp"
#include "runtime/mpi_util.hpp"

namespace bb::harness {
namespace {

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

}  // namespace bb::harness
