// The start of an MPI command (`run`, `calibrate`): MPI_Init_thread (funneled), errors
// returned rather than fatal, and on Linux a 1 µs timer slack so that the waits' µs sleeps
// (and synthetic compute) do not overshoot by the default 50 µs.
#pragma once

namespace bb {

// False (after one "bubblebench: error: MPI_Init failed" line) when MPI does not start.
bool start_mpi(int* argc, char*** argv);

}  // namespace bb
