/* LD_PRELOAD shim for tests/mpi/run_finalize_bound.sh: an MPI_Finalize that never returns, as
 * MPICH 4.0's does when it deadlocks across hosts (jobs/README.md, Troubleshooting). */
#include <unistd.h>

int MPI_Finalize(void) {
  for (;;) pause();
}
