// Per-rank work split over the machine's cores: the core's passes that treat each rank's list
// on its own (validation, lowering's list building and its timed dry run; the simulator's
// counts run beside its engine) use up to two threads once a schedule is large enough for that
// to pay; small schedules stay on the calling thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include "schedule/schedule.hpp"

namespace bb {

// Below this many actions a second thread costs more than it saves.
inline constexpr std::size_t kParallelMinActions = std::size_t{1} << 20;

// Threads the core's passes may use (default 2; 1: none). Tests set it to compare the
// threaded passes with the plain ones.
inline std::atomic<int> core_thread_limit{2};
inline void set_core_threads(int n) {
  core_thread_limit = std::max(1, n);
}

// Workers for up to max_workers: no more than the limit above or the machine's cores.
inline int rank_workers(int max_workers) {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, std::min({max_workers, core_thread_limit.load(), hw}));
}

// Whether a pass over s gets a second thread.
inline bool core_parallel(const Schedule& s) {
  return rank_workers(2) > 1 && s.size() >= kParallelMinActions;
}

// Calls body(worker, rank) for ranks 0 ... P-1, each once, where rank r holds (or will hold)
// size(r) of `total` actions. Worker w of n takes a contiguous range of ranks holding about 1/n
// of them, so body may keep per-worker scratch. An exception from any worker is rethrown here
// after all have stopped.
template <class Size, class Body>
void for_each_rank_of(int P, std::size_t total, int max_workers, Size&& size, Body&& body) {
  const int n = total < kParallelMinActions ? 1 : std::min(rank_workers(max_workers), P);
  if (n <= 1) {
    for (int r = 0; r < P; ++r) body(0, r);
    return;
  }
  // Rank boundaries: worker w takes [cut[w], cut[w+1]).
  std::vector<int> cut(n + 1, P);
  cut[0] = 0;
  std::size_t acc = 0;
  int w = 1;
  for (int r = 0; r < P && w < n; ++r) {
    acc += size(r);
    if (acc * n >= total * w) cut[w++] = r + 1;
  }
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  const auto work = [&](int k) {
    try {
      for (int r = cut[k]; r < cut[k + 1]; ++r) body(k, r);
    } catch (...) {
      errors[k] = std::current_exception();
    }
  };
  for (int k = 1; k < n; ++k) threads.emplace_back(work, k);
  work(0);
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// The same over the ranks of s, by the actions their lists hold.
template <class Body>
void for_each_rank(const Schedule& s, int max_workers, Body&& body) {
  for_each_rank_of(
      s.P, s.size(), max_workers, [&s](int r) { return s.ranks[r].size(); },
      std::forward<Body>(body));
}

// A generator's lists, built rank by rank: build(rank, list) appends rank's actions to its
// (empty) list, reserved for per_rank of them. Each list depends on its rank alone, so a large
// schedule's are built on two threads, each writing only its ranks' lists.
template <class Build>
void build_rank_lists(Schedule& s, std::size_t per_rank, Build&& build) {
  for_each_rank_of(
      s.P, per_rank * static_cast<std::size_t>(s.P), 2, [per_rank](int) { return per_rank; },
      [&](int, int r) {
        s.ranks[r].reserve(per_rank);
        build(r, s.ranks[r]);
      });
}

}  // namespace bb
