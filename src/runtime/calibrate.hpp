// Link calibration: the time of one point-to-point message per directed rank pair and size,
// over the Transport a run uses (MPI, or NCCL with the CUDA backend), for the α-β fits of
// sim/links.hpp.
//
// Method, per directed pair (src, dst), one pair at a time (a barrier in between, so that no
// other traffic shares the ranks' cores or links):
//   src: isend `bytes` to dst, irecv an 8-byte reply, wait for both; dst: irecv, wait, isend
//   the reply, wait. Waits poll Transport::test() with the runtime's backoff (runtime/wait.hpp)
//   and then the backend's queue (CUDA: the stream has finished), as the executor waits.
//   The sizes are visited in `rounds` sweeps (alternately upwards and downwards), and each
//   visit of a size starts with `warmup` untimed round trips (the first messages of a size are
//   cold: protocol set-up, buffer registration) before its share of the `reps` timed ones, on
//   src's steady clock. So a phase of load on the machine falls on every size alike instead of
//   on the few sizes measured while it lasted.
//   The one-way time of a size is median round trip(bytes) − median round trip(8 B) / 2, so
//   8 B gets half its round trip and each direction is measured on its own; the quartiles of
//   the round trips, shifted alike, give its spread. Both ranks wait hot (sched_yield, no
//   sleep) during these round trips.
//   Then the wake-up: `cold_reps` round trips of 8 B, src pausing `cold_pause_s` before each,
//   while dst waits for the message with the runtime's own backoff (after 50 µs it sleeps
//   between polls, as a rank waiting for its input does): wake = median cold round trip −
//   median hot round trip of 8 B (>= 0), the time a receiver that has waited long adds to a
//   hop.
// Sizes: 8 B doubling up to the first size >= max_bytes (the transport moves floats, so
// every size is a multiple of 4 bytes).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/transport.hpp"
#include "sim/links.hpp"

namespace bb {

struct CalibrationOptions {
  std::vector<std::pair<int, int>> pairs;  // directed (src, dst), src != dst
  std::size_t max_bytes = 1 << 20;         // sizes 8 B doubling to the first >= this
  int reps = 200;      // timed round trips per size, all rounds together (median)
  int warmup = 5;      // untimed round trips at each visit of a size
  int rounds = 10;     // sweeps over the sizes (at most reps); the reps are shared among them
  int cold_reps = 50;  // round trips to a receiver that has waited (0: no wake measured)
  double cold_pause_s = 1e-3;  // src's pause before each of them
  double timeout_s = 600;      // any single wait (TimeoutError past it)
};

// 8, 16, ..., the first >= max_bytes (at least 8). Throws ConfigError beyond 2^31 floats.
std::vector<std::size_t> calibration_sizes(std::size_t max_bytes);

// The spread of one size's one-way time: the quartiles of its timed round trips, less the
// same half of the 8-byte round trip as the median.
struct SampleSpread {
  double q25 = 0, q75 = 0;  // seconds
};

// The method in one line (the `method` attribute of /links).
inline constexpr const char* kCalibrationMethod =
    "ping-pong per directed pair, sizes visited in rounds, each visit warmed up: one way = "
    "median round trip (bytes, 8 B reply) - median round trip (8 B) / 2; wake = median round "
    "trip (8 B) to a receiver that has waited 1 ms with the runtime's backoff - the hot one";

// One directed pair's measured one-way times (median and spread), by size.
struct PairSamples {
  int src = 0, dst = 0;
  std::vector<LinkSample> samples;
  std::vector<SampleSpread> spread;  // one per sample
  double wake = 0;  // seconds a receiver that has waited long adds to a hop (LinkFit::wake_s)
};

// Collective over `comm` (the same ranks as the transport; every rank passes the same
// options). Returns every pair's samples on rank 0 of `comm`, nothing elsewhere. Throws
// ConfigError for a pair outside the ranks or with src == dst, TimeoutError when a wait
// passes options.timeout_s.
std::vector<PairSamples> calibrate_links(Transport& transport, Backend& backend, MPI_Comm comm,
                                         const CalibrationOptions& options);

// The fits of calibrate_links' samples (rank 0), one per pair.
std::vector<LinkFit> fit_links(const std::vector<PairSamples>& measured,
                               const FitOptions& options = {});

}  // namespace bb
