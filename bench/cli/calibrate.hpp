// `bubblebench calibrate`: per directed rank pair, the time of one message by size over the
// transport a run would use, fitted α + bytes/β (one line, and piecewise over size regimes);
// see runtime/calibrate.hpp and sim/links.hpp. Under mpiexec/srun like `run`: it initialises
// MPI itself, so that only rank 0 prints.
#pragma once

#include <string>
#include <vector>

#include "sim/links.hpp"

namespace bb {

// argv[1] is "calibrate". Returns the exit code (design §5.3), the same on every rank.
int calibrate_main(int argc, char** argv);

// The table calibrate prints: one row per pair (α, β and both fits' errors), then each pair's
// regimes, one line each.
std::string links_table(const std::vector<LinkFit>& fits);

}  // namespace bb
