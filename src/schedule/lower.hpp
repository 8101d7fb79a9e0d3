// Lowering: insert SEND/RECV actions into a validated compute schedule in an order that
// cannot deadlock under blocking, in-order matched sends and receives per peer pair (NCCL's
// semantics), then prove it with a dry run of all ranks.
//
// How: run the compute schedule as-soon-as-possible with unit costs; every message gets the
// time its producer ends. On every rank, comm actions are ordered by the global key
// (time, source rank, direction, chunk, micro-batch), sends right after their producer and
// receives just before the compute that runs over their time. Every rank's comm order is
// then a sub-sequence of one global order in which each message's producer depends only on
// earlier messages, so the message with the smallest key can always complete.
//
// The proof: a timed dry run (timed_dry_run below) replays every rank's lowered list against
// the unit times and checks that each rank keeps to that global order. Should it ever fail,
// the searching dry run (dry_run) decides, and lower() throws if that finds a deadlock.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

#include "schedule/schedule.hpp"

namespace bb {

// Schedules with at least this many actions (and one route for every micro-batch) get their
// unit times from the periodic engine (periodic_engine.hpp), which jumps over the repetitions
// of a pipeline that repeats itself; the lowered lists are the same either way. Such a lowered
// schedule carries no compute_order. Tests set it to 0 to compare both ways.
inline std::atomic<std::size_t> periodic_lower_min_actions{std::size_t{1} << 20};

// Seconds spent in each phase of lower(), for benchmarks.
struct LowerPhases {
  double validate = 0;    // of the compute schedule
  double unit_times = 0;  // the unit-time pass (also finds cyclic waits)
  double lists = 0;       // building the lowered lists
  double proof = 0;       // the timed dry run of the result
};

// Throws ScheduleError when the compute schedule is invalid or its orders form a cyclic
// wait (with a report of who waits for what), and when the dry run fails.
Schedule lower(Schedule s, LowerPhases* phases = nullptr);

// The same for a schedule in periodic form (periodic.hpp), giving the same lists in periodic
// form without writing out the repetitions of a pipeline that repeats itself (see
// lower_periodic.cpp); where it does not repeat, lower() above, compressed.
struct PeriodicSchedule;
PeriodicSchedule lower(const PeriodicSchedule& s, LowerPhases* phases = nullptr);
// lower() as the commands use it (show --lowered, validate, run): by way of the periodic form
// (to_periodic, the lowering above, to_flat) unless flat_passes_forced() (periodic.hpp). The
// same lists either way; the result carries no compute_order.
Schedule lower_by_periodic_form(Schedule s);
// timed_dry_run() below on the segments (the repetitions of a repeating pipeline are checked
// as the repetition they repeat); it passes and fails where timed_dry_run(to_flat(s)) does.
struct DryRunResult;
DryRunResult timed_dry_run(const PeriodicSchedule& lowered);

struct DryRunResult {
  bool ok = true;
  std::string message;  // why not, rank by rank
};

// Executes a lowered schedule without time: each rank has a compute stream (actions in order,
// each waiting for the receives of its inputs) and a comm stream (SEND/RECV in order; a send
// waits for its data, then for the matching receive at the head of the peer's comm stream;
// the k-th send from a to b must be the k-th receive on b from a).
DryRunResult dry_run(const Schedule& lowered);

// The proof lower() gives its own output, without a search: the unit-time timeline of the
// compute actions is replayed rank by rank against every rank's SEND/RECV order (each rank's
// messages must follow one global order of message times, each message sent once after its
// producer and received once). Passing implies dry_run() passes; failing means the lists do
// not keep to the unit-time order, which a hand-made lowered schedule need not (dry_run()
// then decides). The schedule must be lowered and valid.
DryRunResult timed_dry_run(const Schedule& lowered);

}  // namespace bb
