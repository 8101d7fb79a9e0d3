// `bubblebench run`: the end-to-end pipeline under mpiexec/srun (design §5.1). It owns its
// argument parsing because MPI must be initialised first, so that only rank 0 prints errors.
#pragma once

#include <string>
#include <vector>

#include "harness/output.hpp"

namespace bb {

// argv[1] is "run". Returns the process exit code (design §5.3), the same on every rank.
int run_main(int argc, char** argv);

// Per rank, its host name and GPU index: "ranks 0, 1 and 2 share GPU 0 on node1" for the first
// GPU that several ranks use, "" when every rank has its own. `run` warns with it.
using harness::shared_gpu_note;

}  // namespace bb
