// A pipeline schedule: per-rank action lists plus the chunk placement and micro-batch routes
// they refer to. Pure data; generation, validation, lowering and I/O live beside it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "schedule/action.hpp"

namespace bb {

// Micro-batch m visits chunks first, first+1, ..., last (inclusive).
struct Route {
  int first = 0;
  int last = 0;
  int length() const { return last - first + 1; }
  friend bool operator==(const Route&, const Route&) = default;
};

// An order of all ranks' compute actions in which every input is produced before it is used,
// as runs: a rank and how many of its next compute actions (an FB pair counting once) come
// next. A dataflow pass finds one; it holds for any costs, so later passes replay it.
struct ComputeRun {
  std::uint16_t rank;
  std::uint16_t units;
};
using ComputeOrder = std::vector<ComputeRun>;

struct Schedule {
  std::string name;                        // generator name, e.g. "1f1b", or "csv"
  int P = 1;                               // pipeline ranks
  int M = 1;                               // micro-batches per step
  int v = 1;                               // chunks per rank
  std::vector<int> chunk_rank;             // chunk -> rank, size C
  std::vector<int> chunk_stage;            // chunk -> model stage it holds (DualPipe: 2 copies)
  std::vector<Route> routes;               // micro-batch -> chunks it visits, size M
  std::vector<std::vector<Action>> ranks;  // per rank, in execution order
  bool lowered = false;                    // SEND/RECV actions present
  // The order lowering found for the compute actions, kept so that simulating the lowered
  // schedule need not search for one again. A cache, not part of the schedule: == ignores it
  // and CSV does not carry it. Edit the lists and it no longer fits them; the simulator then
  // notices (an input missing, or a rank's actions not all run) and searches instead.
  std::shared_ptr<const ComputeOrder> compute_order;

  int num_chunks() const { return static_cast<int>(chunk_rank.size()); }
  // Stage-equivalents of one chunk for one micro-batch (1/v for looped placements, 1/2 for
  // V, 1 for DualPipe): the unit used for costs and activation memory.
  double chunk_fraction(int mb) const { return static_cast<double>(P) / routes[mb].length(); }
  // True when every micro-batch visits the same chunks (all but DualPipe's two directions).
  bool uniform_routes() const;
  // Number of actions of all ranks.
  std::size_t size() const;
  std::size_t compute_size() const;
  friend bool operator==(const Schedule& a, const Schedule& b) {
    return a.name == b.name && a.P == b.P && a.M == b.M && a.v == b.v &&
           a.chunk_rank == b.chunk_rank && a.chunk_stage == b.chunk_stage && a.routes == b.routes &&
           a.ranks == b.ranks && a.lowered == b.lowered;
  }
};

// Why P, M, v with this many chunks cannot be held in actions (action.hpp), or empty.
std::string action_limits_problem(int P, int M, int v, long long chunks);

// An empty schedule with its shape set (placement and lists come next).
Schedule make_schedule(std::string name, int P, int M, int v);

// Placements. Each throws ConfigError ("<name>: ... is out of range") for more micro-batches
// or chunks than actions can name.
// Looped: chunk c on rank c mod P, C = P*v; every micro-batch visits all chunks.
void set_looped_placement(Schedule& s);
// V: rank r holds chunks r and 2P-1-r; every micro-batch visits all 2P chunks.
void set_v_placement(Schedule& s);
// DualPipe: V placement of chunks, but micro-batches [0, M/2) visit chunks 0..P-1 and
// [M/2, M) visit P..2P-1 (the second model copy, stage s = chunk P+s on rank P-1-s).
void set_dualpipe_placement(Schedule& s);

}  // namespace bb
