// The simulated step of a partition of a fixed model (`run --partition auto` reports it beside
// the even split's): the partitioner's per-chunk costs (model/partition.hpp) simulated
// (sim/sim.hpp), so it lives above both.
#pragma once

#include <vector>

#include "model/partition.hpp"

namespace bb {

// Simulated time of one step (single step with `single`, else the steady-state period) of S
// with the per-chunk costs of COSTS split as BLOCKS.
double simulated_step(const PartitionCosts& costs, const Schedule& s,
                      const std::vector<int>& blocks, bool single);

}  // namespace bb
