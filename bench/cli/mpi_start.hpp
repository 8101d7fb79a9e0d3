// The start of an MPI command (`run`, `calibrate`): MPI_Init_thread (funneled), errors
// returned rather than fatal, on Linux a 1 µs timer slack so that the waits' µs sleeps (and
// synthetic compute) do not overshoot by the default 50 µs; then every rank's arguments are
// compared with rank 0's before any work is done (an MPMD launch `mpiexec -n 1 bubblebench
// run --out x.h5 : -n 1 bubblebench run` would otherwise write rank 0's events only, or hang).
// And the end of a failing job (abort_job).
#pragma once

#include <string>
#include <vector>

namespace bb {

// kExitOk (0) when MPI started and every rank was given the same arguments: go on. Otherwise
// the exit code, MPI already finalized: 2 (kExitConfig) after one line, "bubblebench: error:
// MPI_Init failed", or from the lowest rank whose arguments differ from rank 0's, the first
// differing argument. The exchange is non-blocking (MPI_Test and backoff); past this rank's
// --timeout (default 600 s) a rank that never arrives ends the job with exit 3 and one line.
int start_mpi(int* argc, char*** argv);

// The line for a rank whose arguments (after the program name) differ from rank 0's, or ""
// when they agree. The first differing argument is named: "bubblebench: error: rank 1 was
// given other arguments than rank 0: argument 3 is '--out' on rank 0 and '--iters' on rank 1
// (every rank needs the same arguments)".
std::string argument_difference(const std::vector<std::string>& rank0,
                                const std::vector<std::string>& mine, int me);

// Flushes stdout and stderr, gives the launcher's proxy a moment to forward them, and ends the
// whole job with `code` (MPI_Abort).
[[noreturn]] void abort_job(int code);

}  // namespace bb
