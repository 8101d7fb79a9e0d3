#include "schedule/schedule.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "common/error.hpp"

namespace bb {

bool Schedule::uniform_routes() const {
  for (const Route& rt : routes)
    if (!(rt == routes.front())) return false;
  return true;
}

std::size_t Schedule::size() const {
  std::size_t n = 0;
  for (const auto& r : ranks) n += r.size();
  return n;
}

std::size_t Schedule::compute_size() const {
  std::size_t n = 0;
  for (const auto& r : ranks)
    for (const auto& a : r) n += is_compute(a.op) ? 1 : 0;
  return n;
}

std::string action_limits_problem(int P, int M, int v, long long chunks) {
  if (M <= kMaxMicroBatches && chunks <= kMaxChunks) return {};
  return "P=" + std::to_string(P) + ", M=" + std::to_string(M) + ", v=" + std::to_string(v) +
         " is out of range (at most " + std::to_string(kMaxMicroBatches) + " micro-batches and " +
         std::to_string(kMaxChunks) + " chunks)";
}

namespace {

// Every placement sizes the schedule here: a generator or the CSV loader that asks for more
// micro-batches or chunks than an action can name gets one line, before any list is built.
// The chunks are counted as P x max(v, 2) whatever the placement (one bound for all).
int checked_chunks(const Schedule& s, long long chunks) {
  const std::string problem =
      action_limits_problem(s.P, s.M, s.v, static_cast<long long>(s.P) * std::max(s.v, 2));
  if (!problem.empty()) throw ConfigError(s.name + ": " + problem);
  return static_cast<int>(chunks);
}

}  // namespace

Schedule make_schedule(std::string name, int P, int M, int v) {
  Schedule s;
  s.name = std::move(name);
  s.P = P;
  s.M = M;
  s.v = v;
  return s;
}

void set_looped_placement(Schedule& s) {
  const int C = checked_chunks(s, static_cast<long long>(s.P) * s.v);
  s.chunk_rank.resize(C);
  s.chunk_stage.resize(C);
  for (int c = 0; c < C; ++c) {
    s.chunk_rank[c] = c % s.P;
    s.chunk_stage[c] = c;
  }
  s.routes.assign(s.M, Route{0, C - 1});
  s.ranks.assign(s.P, {});
}

void set_v_placement(Schedule& s) {
  s.v = 2;
  const int C = checked_chunks(s, 2LL * s.P);
  s.chunk_rank.resize(C);
  s.chunk_stage.resize(C);
  for (int c = 0; c < C; ++c) {
    s.chunk_rank[c] = c < s.P ? c : C - 1 - c;
    s.chunk_stage[c] = c;
  }
  s.routes.assign(s.M, Route{0, C - 1});
  s.ranks.assign(s.P, {});
}

void set_dualpipe_placement(Schedule& s) {
  set_v_placement(s);
  const int P = s.P;
  for (int c = P; c < 2 * P; ++c) s.chunk_stage[c] = c - P;
  for (int m = 0; m < s.M; ++m) s.routes[m] = m < s.M / 2 ? Route{0, P - 1} : Route{P, 2 * P - 1};
}

}  // namespace bb
