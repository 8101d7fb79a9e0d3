// ONE training step, the same for `run`'s timed and untimed steps, `run --check` and
// gbench_pipeline: an optional barrier (non-blocking, with the watchdog), the executor's step,
// the DualPipe gradient sum, then the optimizer and zeroing (unless the caller wants the
// gradients: --check reads them before any update).
#pragma once

#include <mpi.h>

#include "runtime/executor.hpp"

namespace bb::harness {

struct StepOptions {
  bool barrier = true;  // align the ranks first
  bool update = true;   // optimizer step, zero the gradients and the loss
  double timeout_s = 600;
};

void training_step(Executor& ex, StepRecord* record, MPI_Comm comm, const StepOptions& o);

}  // namespace bb::harness
