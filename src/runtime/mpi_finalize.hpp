// The end of every MPI front end (run, calibrate, advise --verify, gbench_pipeline):
// MPI_Finalize under a deadline. MPICH 4.0 with UCX can deadlock in MPI_Finalize when ranks
// are on different hosts (one rank waits in a PMI barrier without progressing UCX while
// another waits for its endpoint to that rank to close; jobs/README.md, Troubleshooting).
// Every output is written and closed before finalize, so a rank that is still in MPI_Finalize
// after the deadline has nothing left to lose: it prints one line and ends with its own exit
// code, the code the run would have had.
#pragma once

#include <functional>
#include <string>

namespace bb::mpi {

constexpr double kDefaultFinalizeTimeout = 60;  // seconds

// BB_FINALIZE_TIMEOUT: seconds MPI_Finalize may take (a number >= 0; 0: no bound, finalize
// may wait for ever). Unset, empty or not such a number: kDefaultFinalizeTimeout.
double finalize_timeout(const char* env);

// Flushes stdout and stderr (std::cout, std::cerr, C stdio), then MPI_Finalize under
// finalize_timeout(getenv("BB_FINALIZE_TIMEOUT")). Returns `code` once MPI_Finalize returns;
// past the deadline this rank prints one line naming the MPICH 4.0 finalize deadlock and
// ends with _exit(code). Call it after every output of the run is closed.
int finalize(int code);

// The bound itself, for any `finalize`: calls it and returns `code` when it returns within
// `seconds` (<= 0: no bound). Otherwise a watchdog thread writes `line` and a newline to
// stderr and ends the process with _exit(code) while `finalize` still runs.
int finalize_within(const std::function<void()>& finalize, double seconds, int code,
                    const std::string& line);

}  // namespace bb::mpi
