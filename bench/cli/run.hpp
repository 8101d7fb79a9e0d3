// `bubblebench run`: the end-to-end pipeline under mpiexec/srun (design §5.1). It owns its
// argument parsing because MPI must be initialised first, so that only rank 0 prints errors.
#pragma once

namespace bb {

// argv[1] is "run". Returns the process exit code (design §5.3), the same on every rank.
int run_main(int argc, char** argv);

}  // namespace bb
