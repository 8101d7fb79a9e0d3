// The eight per-rank steps shared by DualPipe and DualPipeV (see dualpipe.cpp).
#pragma once

#include <vector>

#include "schedule/action.hpp"

namespace bb::detail {

struct DualPipePhase {
  int chunk = 0;     // the rank's chunk for this phase
  int first_mb = 0;  // the phase's first micro-batch
};

// Appends one rank's steps to `out`. K: ranks of one half-pipeline (P/2 for DualPipe, P for
// DualPipeV); k: this rank's position in it; N: micro-batches per phase.
void append_dualpipe_steps(std::vector<Action>& out, int K, int k, int N,
                           const DualPipePhase& phase0, const DualPipePhase& phase1);

}  // namespace bb::detail
