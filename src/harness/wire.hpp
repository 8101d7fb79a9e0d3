// What each rank sends rank 0 after a configuration's timed steps, and its MPI wire format:
// one vector of doubles per rank (gathered with mpi::gather):
//   [steps, then per step: origin, first_start, last_end, busy, wait, comm, actions, bookkeeping]
//   [peak_units, peak_bytes, param_bytes, peak_device_bytes, runtime_bytes]
//   [per kind F, B, W, BW, FB: count, then the durations in stage units (seconds / fraction)]
//   [events: count, then per event kEventFields values (EventSummary)]
#pragma once

#include <vector>

#include "runtime/executor.hpp"

namespace bb::harness {

inline constexpr int kStepFields = 8;
inline constexpr int kKinds = 5;
inline constexpr int kEventFields = 8;

// Event kinds of the results file: the compute kinds (RecordKind order), then the
// communication ops (Op order from SEND_F).
inline constexpr const char* kEventKinds[] = {"F",      "B",      "W",      "BW",    "FB",
                                              "SEND_F", "RECV_F", "SEND_B", "RECV_B"};
inline constexpr int kFirstCommKind = 5;

// One timed step of one rank. origin: the step's origin on the rank's own clock (seconds);
// the other times are relative to it.
struct StepSummary {
  double origin = 0, first_start = 0, last_end = 0, busy = 0, wait = 0, comm = 0, actions = 0;
  double bookkeeping = 0;  // StepRecord::bookkeeping()
};

// One compute or communication event of a timed step, times from the rank's step origin.
// ready = start for communication.
struct EventSummary {
  double iter, index, kind, chunk, mb, ready, start, end;
};

struct RankSummary {
  std::vector<StepSummary> steps;
  double peak_units = 0, peak_bytes = 0, param_bytes = 0, peak_device_bytes = 0;
  double runtime_bytes = 0;  // Backend::runtime_bytes()
  // The transport's device and pinned host bytes; the device's (total − free) at its highest
  // sample (CUDA; 0 on CPU).
  double comm_device_bytes = 0, pinned_host_bytes = 0, device_used_peak_bytes = 0;
  std::vector<double> durations[kKinds];
  std::vector<EventSummary> events;
};

// A rank's StepRecord as a StepSummary.
StepSummary step_summary(const StepRecord& rec);

// One step alone (gbench_pipeline gathers one per iteration): kStepFields doubles.
std::vector<double> pack_step(const StepSummary& st);
StepSummary unpack_step(const std::vector<double>& in);  // std::out_of_range when short

std::vector<double> pack(const RankSummary& s);
// Throws std::out_of_range on a truncated vector.
RankSummary unpack(const std::vector<double>& in);

}  // namespace bb::harness
