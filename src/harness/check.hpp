// The gradient check of `run --check`: one extra untimed step whose gradients (before any
// optimizer update) rank 0 compares with the sequential reference on its backend.
#pragma once

#include <mpi.h>

#include <optional>
#include <string>

#include "harness/settings.hpp"
#include "harness/sweep.hpp"
#include "runtime/executor.hpp"

namespace bb::harness {

struct CheckOutcome {
  CheckStatus status = CheckStatus::kSkipped;
  double max_rel_error = 0;
  std::string message;
  std::optional<double> loss;  // rank 0: the pipeline's loss of the step (before any update)
};

// Collective over COMM; the status is the same on every rank, the error and message are rank
// 0's.
CheckOutcome run_check(Executor& ex, Backend& backend, const RunConfig& c, const RunSettings& o,
                       MPI_Comm comm);

}  // namespace bb::harness
