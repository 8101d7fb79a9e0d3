// `bubblebench calibrate`: per directed rank pair, the time of one message by size over the
// transport a run would use, fitted α + bytes/β (one line, and piecewise over size regimes);
// see runtime/calibrate.hpp and sim/links.hpp. Under mpiexec/srun like `run`: it initialises
// MPI itself, so that only rank 0 prints.
#pragma once

#include <string>
#include <vector>

#include "runtime/calibrate.hpp"
#include "sim/links.hpp"

namespace bb {

// argv[1] is "calibrate". Returns the exit code (design §5.3), the same on every rank.
int calibrate_main(int argc, char** argv);

// The table calibrate prints: one row per pair (α, β and both fits' errors), then each pair's
// regimes, one line each.
std::string links_table(const std::vector<LinkFit>& fits);

// The largest relative error per size that the fit should keep to (issue 19: 10 %).
inline constexpr double kCalibrationTarget = 0.10;

// What calibrate prints per size: for every pair and size the measured median, its quartiles,
// the piecewise fit's time, the relative error and the regime; then per pair its largest
// |error| (and, where the quartiles are wider than the target, that the time itself varies),
// the largest over all pairs against kCalibrationTarget, and a note when `ranks` exceed
// `cpus` (the CPUs they may run on together; 0: unknown). MEASURED and FITS are in the same order
// (fit_links).
std::string calibration_report(const std::vector<PairSamples>& measured,
                               const std::vector<LinkFit>& fits, int ranks, int cpus);

}  // namespace bb
