// Link costs per directed rank pair: what one point-to-point message of a given size costs,
// fitted to measured times (`bubblebench calibrate`, src/runtime/calibrate.hpp).
//
// A link's time is modelled as α + bytes/β (latency α in seconds, bandwidth β in bytes per
// second). Measured shared-memory MPI times are not one straight line: the library switches
// protocol with the size (eager, then rendezvous; other steps show at a few sizes), so a fit
// has two forms, both kept and both reported:
//  - `line`: one α-β line over all measured sizes;
//  - `regimes`: piecewise α-β over consecutive size ranges (at most FitOptions::max_regimes
//    and one per 3 measured sizes, each with at least min_points sizes, 2 by default; fewer
//    sizes than 3: the line), the segmentation chosen by dynamic programming to
//    minimise the largest relative error (then the sum of squared relative errors); the
//    fewest regimes that reach FitOptions::target_rel, else the best.
// Each line is a least-squares fit in relative terms (every size weighs alike, whatever its
// time), with α, β >= 0. Errors are relative, |fit - measured| / measured, over the measured
// sizes (in-sample).
//
// A LinkModel holds fits for some directed pairs; cost(src, dst, bytes) uses the piecewise
// form plus the pair's wake-up (LinkFit::wake_s: what a receiver that has waited long, asleep
// in the runtime's backoff, adds to a hop; 0 where not measured). The simulator
// (SimConfig::links) and the replay use it as the time of one message to a waiting receiver;
// a receiver that is busy when the message arrives does not wait for it either way.
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "schedule/schedule.hpp"

namespace bb {

// One measured size: the median one-way time of a message of `bytes` bytes.
struct LinkSample {
  double bytes = 0;
  double seconds = 0;
};

// seconds = alpha + bytes / beta; beta == 0 means infinite bandwidth.
struct AlphaBeta {
  double alpha = 0;  // seconds
  double beta = 0;   // bytes per second (0: infinite)
  double at(double bytes) const { return alpha + (beta > 0 ? bytes / beta : 0.0); }
};

// A regime of the piecewise fit: the line that holds over the measured sizes lo..hi.
struct LinkRegime {
  double lo_bytes = 0, hi_bytes = 0;
  AlphaBeta line;
};

// Relative error of a fit over the measured sizes.
struct FitError {
  double max_rel = 0;
  double median_rel = 0;
};

// Defaults: MPICH/UCX over shared memory on the project's 2-core machine, measured with
// warm-up at every size, shows a flat latency to ~256 B, a slope to ~4 KiB, the shared-memory
// bandwidth to ~256 KiB and a lower one past the caches (each step 2-2.5x the last): up to six
// regimes of at least two sizes. (min_points 1 lets a regime hold a single size: a spike the
// fit then reproduces exactly, i.e. interpolates rather than fits.)
struct FitOptions {
  int max_regimes = 6;       // regimes of the piecewise fit (1: the line)
  int min_points = 2;        // measured sizes per regime (>= 1)
  double target_rel = 0.05;  // fewest regimes whose largest relative error is at most this
};

struct LinkFit {
  int src = 0, dst = 0;
  std::vector<LinkSample> samples;  // by size
  AlphaBeta line;                   // one line over every size
  FitError line_error;
  std::vector<LinkRegime> regimes;  // piecewise, by size; at least one
  FitError regimes_error;
  double wake_s = 0;  // measured apart from the sizes (calibrate's cold round trips), seconds
  // The piecewise cost of one message, seconds. Below the first regime the first line holds,
  // above the last the last; between two regimes' measured sizes the boundary is the
  // geometric mean of the two sizes.
  double cost(double bytes) const;
  // The piecewise fit's signed relative error at a measured size: (cost - measured) / measured.
  double rel_error(const LinkSample& x) const { return (cost(x.bytes) - x.seconds) / x.seconds; }
};

// The relative least-squares α-β line through samples (α, β >= 0). Throws ConfigError for an
// empty range or a time <= 0.
AlphaBeta fit_alpha_beta(const LinkSample* first, const LinkSample* last);

// Relative error of `line` over the samples.
FitError fit_error(const std::vector<LinkSample>& samples, const AlphaBeta& line);

// Both fits of one directed pair. Samples are sorted by size; sizes must be distinct and
// times > 0 (ConfigError otherwise).
LinkFit fit_link(int src, int dst, std::vector<LinkSample> samples, const FitOptions& = {});

// The regimes' error (the form a LinkFit read from a file carries) recomputed from samples.
FitError regimes_error(const LinkFit& fit);

// Link costs of the directed pairs that have a fit; every other pair is free (cost 0).
class LinkModel {
 public:
  LinkModel() = default;
  explicit LinkModel(std::vector<LinkFit> fits);  // one fit per pair (ConfigError otherwise)

  // Seconds for one message of `bytes` from rank src to rank dst to a waiting receiver: the
  // fit's cost plus its wake_s (0 without a fit).
  double cost(int src, int dst, double bytes) const;
  bool covers(int src, int dst) const { return index_.count({src, dst}) != 0; }
  bool empty() const { return fits_.empty(); }
  const std::vector<LinkFit>& fits() const { return fits_; }

 private:
  std::vector<LinkFit> fits_;
  std::map<std::pair<int, int>, std::size_t> index_;
};

// The directed rank pairs (src != dst) a schedule's messages use, sorted: each compute
// action's output (edges.hpp) goes from its rank to the rank of the consuming chunk.
std::vector<std::pair<int, int>> pipeline_pairs(const Schedule& s);

// Every directed pair of P ranks, and the neighbours r -> r±1 only (sorted).
std::vector<std::pair<int, int>> all_pairs(int P);
std::vector<std::pair<int, int>> neighbour_pairs(int P);

}  // namespace bb
