#include "advise/partition_step.hpp"

#include "sim/sim.hpp"

namespace bb {

double simulated_step(const PartitionCosts& costs, const Schedule& s,
                      const std::vector<int>& blocks, bool single) {
  const ChunkCosts cc = partition_chunk_costs(costs, s, blocks);
  SimConfig sc;
  sc.t_f = cc.f;
  sc.t_b = cc.b;
  sc.t_w = cc.w;
  const SimResult r = simulate(s, sc);
  return single ? r.single.span : r.steady.span;
}

}  // namespace bb
