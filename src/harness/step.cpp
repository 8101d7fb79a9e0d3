#include "harness/step.hpp"

#include "runtime/mpi_util.hpp"

namespace bb::harness {

void training_step(Executor& ex, StepRecord* record, MPI_Comm comm, const StepOptions& o) {
  if (o.barrier) mpi::barrier(comm, o.timeout_s);
  ex.run_step(record);
  ex.sum_partner_gradients();
  if (!o.update) return;
  ex.optimizer_step();
  ex.zero_grads();
  ex.reset_loss();
}

}  // namespace bb::harness
