#include "cli/mpi_start.hpp"

#include <mpi.h>

#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include "harness/output.hpp"

namespace bb {

bool start_mpi(int* argc, char*** argv) {
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    harness::say("bubblebench: error: MPI_Init failed");
    return false;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
#if defined(__linux__)
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
  return true;
}

}  // namespace bb
