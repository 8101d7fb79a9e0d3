// The dataflow engine of engine.hpp over lists in periodic form (periodic.hpp), with jumps:
// once the whole pipeline repeats itself, it skips the repetitions instead of running them.
//
// Every rank runs its list as soon as its inputs have arrived, exactly as DataflowEngine does
// (same policy, same times), with the messages in flight by channel (ChannelSlots). In each
// step, every rank's longest segment is its periodic part (1F1B: the F/B pair). The engine holds
// every rank at the start of repetition f of that segment (a fence), takes the state there — each
// rank's clock and every message produced but not yet consumed — and does the same at f+1. (Where a
// rank's part starts elsewhere in the pattern than its neighbours', holding it at f would
// hold up the others: its fence then moves a repetition on, rank by rank, until all can stop;
// each rank keeps its own offset from f, so the two states compare like with like.) When the
// state at f+1 is the state at f moved by λ in time and by the segment's micro-batch step in
// micro-batch numbers, the pipeline from f+1 on is the one from f moved the same way (the
// engine's rules do not depend on when or on which micro-batch), repetition after repetition,
// as long as every rank is still in its periodic part. So the engine moves every rank J
// repetitions on at once (J = the fewest repetitions any rank has left), adds J·λ to every
// clock and in-flight time, renumbers the in-flight messages J steps on, and runs the rest.
//
// Exactness: J·λ equals λ added J times only where the arithmetic is exact; the caller checks
// that every cost is a multiple of a power of two small enough that all times stay exact
// (sim.cpp), so jumping gives bit for bit the times the plain engine gives.
//
// Preconditions: a validated schedule with one route for every micro-batch (the route does not
// then depend on the micro-batch number) or, after allow_routes_by_chunk(), routes that share
// no chunk (DualPipe's two directions: a chunk's route then names the route of every
// micro-batch it computes, which again does not depend on the micro-batch number); lists whose
// segments do not split FB pairs (else Outcome::no_period). The engine reports Outcome::no_period
// when the ranks' periodic parts do not line up (no fence can be held, or the state does not repeat
// within kMaxFenceTries repetitions) and Outcome::stuck for a cyclic wait; callers then run the
// plain engine, which also explains a cyclic wait.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <vector>

#include "schedule/edges.hpp"
#include "schedule/message_slots.hpp"
#include "schedule/periodic.hpp"
#include "schedule/schedule.hpp"

namespace bb {

// Policy: as DataflowEngine's, with Time = double (record() gets index 0: the periodic engine
// does not number actions).
template <class Policy>
class PeriodicEngine {
 public:
  enum class Outcome { done, stuck, no_period };
  static constexpr int kMaxFenceTries = 64;  // repetitions held at a fence before giving up

  PeriodicEngine(const Schedule& s, const PeriodicLists& lists, Policy& policy, int steps)
      : s_(s), L_(lists), pol_(policy), steps_(steps) {}

  // Before run(): a step may have several periodic parts, one after the other (GPipe: its forwards,
  // then its backwards), each with its own fences and jump. Only where every rank has the same
  // number of segments long enough to fence, the k-th ones with one micro-batch step; a phase whose
  // fence cannot be held is run through. Jump (jump_in) tells of the first phase.
  void allow_phases() { many_phases_ = true; }
  // Before run(): every rank is held at the start of each step; where two steps start λ apart on
  // every rank (nothing is in flight between steps), every later step is the last one moved by
  // λ, and the engine records their ends without running them.
  void skip_repeated_steps() { step_fences_ = true; }
  // Before run(): also take schedules with several routes that share no chunk (each chunk on
  // one route only), with each action's route that of its chunk.
  void allow_routes_by_chunk() { by_chunk_ = true; }

  Outcome run() {
    const int P = s_.P;
    if (steps_ > kMaxSteps || !routes_by_chunk() || !pairs_whole(L_)) return Outcome::no_period;
    if (!choose_periodic_parts()) return Outcome::no_period;
    st_.assign(P, RankState{});
    msgs_.reset(2 * chunks_);
    step_end_.assign(P, 0.0);
    step_start_.assign(P, 0.0);
    for (int r = P - 1; r >= 0; --r) ready_.push_back(r);
    start_phase(0, 0);
    for (;;) {
      while (!ready_.empty()) {
        const int r = ready_.back();
        ready_.pop_back();
        advance(r);
      }
      if (finished_ == P) return Outcome::done;
      if (step_fences_ && at_boundary_ == P) {
        at_step_boundary();
        continue;
      }
      if (fence_on_ && parked_ > 0 && parked_ < P) {
        // Held ranks hold up the others (their parts start elsewhere in the pattern): those
        // ranks' fences move one repetition on, and the state is taken where all can stop.
        if (!move_held_fences() && !skip_phase()) return Outcome::no_period;
        continue;
      }
      if (!fence_on_ || parked_ != P) return parked_ > 0 ? Outcome::no_period : Outcome::stuck;
      if (!at_fence() && !skip_phase()) return Outcome::no_period;
    }
  }

  // Compute units (FB pairs once) the jumps skipped, over all ranks and steps.
  std::size_t jumped_units() const { return jumped_; }

  // Before run() of one step: also write every message time, as float, into times[dir·C·M +
  // chunk·M + mb] (chunk-major, the layout of DataflowEngine's split slots), those of the
  // repetitions jumped over included. The array must hold 2·C·M floats.
  // fill_jumped: also those of the repetitions jumped over (else only of what ran).
  void write_times(float* times, bool fill_jumped = true) {
    dense_ = times;
    fill_jumped_ = fill_jumped;
  }

  // After run(): the jump taken in a step, if any. Every rank r skipped repetitions
  // [first_rep[r], first_rep[r] + reps) of its periodic part (segment periodic_part(r)); each
  // ran as the one before it, lambda later and mb_step() micro-batches on. So for every rank,
  // repetitions first_rep[r] - 1 ... first_rep[r] + reps of its part repeat one another, and so
  // do the messages they consume.
  struct Jump {
    bool taken = false;
    std::vector<std::uint32_t> first_rep;  // per rank
    std::uint32_t reps = 0;
    double lambda = 0;
  };
  Jump jump_in(int step) const {
    return step < static_cast<int>(jumps_.size()) ? jumps_[step] : Jump{};
  }
  std::uint32_t periodic_part(int r) const { return part_[r]; }
  // After run(): the latest time any rank reached.
  double max_clock() const {
    double t = 0;
    for (const RankState& st : st_) t = std::max(t, st.clock);
    return t;
  }
  std::int32_t mb_step() const { return mb_step_; }

 private:
  static constexpr int kMaxSteps = 1 << 14;
  static constexpr std::size_t kNone = ~std::size_t{0};

  struct Phase {
    std::vector<std::uint32_t> part;   // per rank: its periodic segment
    std::vector<std::uint32_t> units;  // per rank: compute units in one repetition of it
    std::int32_t mb_step = 0;          // every part's
  };

  struct RankState {
    std::uint32_t seg = 0, rep = 0, k = 0;  // next action: segment, repetition, index
    int step = 0;
    double clock = 0;
    std::size_t waiting = kNone;
    bool parked = false;
    double first = -1;    // step 0: its first action's start
    bool source = false;  // step 0: its first action read no message
  };

  // The slot of a message in direction dir (0 activation, 1 gradient), named by the chunk that
  // sends the activation / receives the gradient, and micro-batch mb: its channel (chunk, dir)
  // and micro-batch (ChannelSlots). Steps share slots: a message of the next step cannot be
  // produced before this step's has been used (the producer's rank has finished this step,
  // which needs its consumer's backward first).
  std::size_t key(int, int dir, std::uint32_t chunk, std::uint32_t mb) const {
    return ChannelSlots::key(chunk * 2 + static_cast<std::uint32_t>(dir), mb);
  }
  std::uint32_t key_mb(std::size_t k) const { return ChannelSlots::mb_of(k); }
  // The slot of the same message dmb micro-batches on.
  std::size_t moved(std::size_t k, std::int64_t dmb) const {
    return static_cast<std::size_t>(static_cast<std::int64_t>(k) + dmb * (std::int64_t{1} << 32));
  }

  // Every chunk's route (route_of_), where each chunk lies on one route only: one route for
  // all micro-batches, or (allow_routes_by_chunk()) routes that share no chunk.
  bool routes_by_chunk() {
    if (s_.routes.empty()) return false;
    route_of_.assign(static_cast<std::size_t>(s_.num_chunks()), s_.routes.front());
    if (s_.uniform_routes()) return true;
    if (!by_chunk_) return false;
    std::vector<char> seen(route_of_.size(), 0);
    const Route* last = nullptr;
    for (const Route& rt : s_.routes) {
      if (last != nullptr && rt == *last) continue;
      last = &rt;
      for (const int c : route_chunks(rt)) {
        const auto i = static_cast<std::size_t>(c);
        if (c < 0 || i >= route_of_.size() || (seen[i] && !(route_of_[i] == rt))) return false;
        seen[i] = 1;
        route_of_[i] = rt;
      }
    }
    return true;
  }
  const Route& route_of(const Action& a) const { return route_of_[a.chunk]; }

  // Compute units (FB pairs once) in one repetition of segment g.
  std::uint32_t units_of(const Segment& g) const {
    std::uint32_t units = 0;
    for (std::uint32_t k = 0; k < g.length;) {
      const Action& a = L_.pool[g.begin + k];
      units += is_compute(a.op);
      k += is_compute(a.op) ? static_cast<std::uint32_t>(unit_length(a, g.length - k)) : 1;
    }
    return units;
  }

  // Every rank's periodic part: its segment covering the most actions (length x repetitions). A
  // fence needs them all to have at least three repetitions and one micro-batch step. With
  // allow_phases(), where every rank has K >= 2 segments that could be fenced and the k-th ones
  // share a micro-batch step, those are the parts of K phases instead.
  bool choose_periodic_parts() {
    const int P = s_.P;
    const auto fenceable = [](const Segment& g) { return g.reps >= 3 && g.mb_step != 0; };
    phases_.clear();
    if (many_phases_) {
      std::vector<std::vector<std::uint32_t>> by_rank(P);
      bool same = true;
      for (int r = 0; r < P && same; ++r) {
        const auto& segs = L_.ranks[r];
        for (std::uint32_t g = 0; g < segs.size(); ++g)
          if (fenceable(segs[g])) by_rank[r].push_back(g);
        same = by_rank[r].size() == by_rank[0].size();
      }
      const std::size_t K = same ? by_rank[0].size() : 0;
      for (std::size_t k = 0; K >= 2 && k < K; ++k) {
        Phase ph;
        for (int r = 0; r < P; ++r) ph.part.push_back(by_rank[r][k]);
        if (!fill_phase(ph)) {
          phases_.clear();
          break;
        }
        phases_.push_back(std::move(ph));
      }
    }
    if (phases_.empty()) {
      Phase ph;
      for (int r = 0; r < P; ++r) {
        const auto& segs = L_.ranks[r];
        if (segs.empty()) return false;
        std::uint32_t best = 0;
        const auto cover = [&](std::uint32_t g) {
          return static_cast<std::uint64_t>(segs[g].length) * segs[g].reps;
        };
        for (std::uint32_t g = 1; g < segs.size(); ++g)
          if (cover(g) > cover(best)) best = g;
        ph.part.push_back(best);
      }
      if (!fill_phase(ph)) return false;
      phases_.push_back(std::move(ph));
    }
    return true;
  }

  // A phase's micro-batch step and units; false where it cannot be fenced.
  bool fill_phase(Phase& ph) const {
    ph.mb_step = L_.ranks[0][ph.part[0]].mb_step;
    std::uint32_t min_reps = ~std::uint32_t{0};
    for (int r = 0; r < s_.P; ++r) {
      const Segment& g = L_.ranks[r][ph.part[r]];
      if (g.mb_step != ph.mb_step || g.mb_step == 0) return false;
      min_reps = std::min(min_reps, g.reps);
      ph.units.push_back(units_of(g));
    }
    return min_reps >= 3;
  }

  void start_phase(int step, std::size_t phase) {
    fence_on_ = step < steps_;
    fence_step_ = step;
    phase_ = phase;
    part_ = phases_[phase].part;
    part_units_ = phases_[phase].units;
    mb_step_ = phases_[phase].mb_step;
    fence_rep_ = 1;
    offset_.assign(s_.P, 0);
    tries_ = 0;
    have_prev_ = false;
  }

  // Rank r's fence: the start of repetition fence_rep_ + offset_[r] of its part.
  std::uint32_t fence_of(int r) const { return fence_rep_ + offset_[r]; }
  bool at_fence_position(int r, const RankState& st) const {
    return fence_on_ && st.step == fence_step_ && st.seg == part_[r] && st.rep == fence_of(r) &&
           st.k == 0;
  }
  // Whether every rank's fence is a repetition its part has (and one more after it).
  bool fences_fit() const {
    for (int r = 0; r < s_.P; ++r)
      if (fence_of(r) + 1 >= L_.ranks[r][part_[r]].reps) return false;
    return true;
  }
  // Every rank at the start of step s (finished with s-1, nothing in flight): where the steps
  // s-1 and s start λ apart on every rank, the steps from s on are s-1 moved by λ each (the
  // rules depend neither on when nor on the step): their ends are recorded, none is run.
  void at_step_boundary() {
    const int P = s_.P;
    const int s = st_[0].step;
    at_boundary_ = 0;
    if (msgs_.size() == 0) {
      double lambda = 0;
      bool same = false;
      if (have_start_) {
        lambda = st_[0].clock - step_start_[0];
        same = true;
        for (int r = 0; r < P && same; ++r) same = st_[r].clock - step_start_[r] == lambda;
      } else if (s == 1) {
        same = later_steps_shifted(&lambda);
      }
      if (same) {
        skip_steps(s, lambda);
        return;
      }
    }
    for (int r = 0; r < P; ++r) step_start_[r] = st_[r].clock;
    have_start_ = true;
    for (int r = P - 1; r >= 0; --r) ready_.push_back(r);
  }

  // Steps s, s+1, ... are step s-1 moved by λ each: their ends are recorded, none is run.
  void skip_steps(int s, double lambda) {
    for (int r = 0; r < s_.P; ++r) {
      if constexpr (requires { pol_.step_done(r, s, 0.0); })
        for (int t = s; t < steps_; ++t)
          pol_.step_done(r, t, step_end_[r] + static_cast<double>(t - s + 1) * lambda);
      std::size_t units = 0;
      for (const Segment& g : L_.ranks[r]) units += static_cast<std::size_t>(units_of(g)) * g.reps;
      jumped_ += units * static_cast<std::size_t>(steps_ - s);
      st_[r].step = steps_;
    }
    fence_on_ = false;
    finished_ = s_.P;
  }

  // A rank's first action in step 0 (its clock then 0): a source where it read no message
  // (a route's first chunk's F). One that read a message arriving before 0 (a negative delay)
  // would start at its clock: later_steps_shifted() then says no.
  void first_action(RankState& st, double start, double arrival) {
    st.first = start;
    st.source = arrival == -std::numeric_limits<double>::infinity();
    if (!st.source && arrival < 0) first_waits_ = false;
  }

  // At the start of step 1 (every rank finished step 0): whether every later step is step 0
  // moved by λ (*lambda), so that step 1 need not run either. The engine's rules are max and +,
  // so every time in a step is t(a) = max_q (c_q + D_q(a)) over the ranks' clocks c_q at the
  // step's start, D_q(a) the longest path from rank q's first action to a (-inf: none). In step
  // 0 (c_q = 0) every non-source's first action waited for its input (first_action()), so
  // every time there is reached on a path from a source's start: t(a) = D_q(a) for some source
  // q. And t(a) >= s_q + D_q(a) for every q, s_q the start of q's first action in step 0. Step
  // 1 starts at c'_q (step 0's end on q plus the gap). Where every source has the same c' = λ
  // and every rank c'_q <= λ + s_q, each time t'(a) of step 1 is at least λ + t(a) (through the
  // source) and at most that (every term): step 1 is step 0 moved by λ, so it ends λ later on
  // every rank, step 2 starts λ after step 1 on every rank, and so on. (Where a rank starts
  // step 1 later than that, step 1 runs, and the steps after it are compared as before.)
  bool later_steps_shifted(double* lambda) const {
    if (!first_waits_) return false;
    bool have = false;
    for (int r = 0; r < s_.P; ++r) {
      if (!st_[r].source) continue;
      if (have && st_[r].clock != *lambda) return false;
      *lambda = st_[r].clock;
      have = true;
    }
    if (!have) return false;
    for (int r = 0; r < s_.P; ++r)
      if (st_[r].first < 0 || !(st_[r].clock <= *lambda + st_[r].first)) return false;
    return true;
  }

  // The next phase: of this step, else the first of the next.
  void next_phase() {
    if (phase_ + 1 < phases_.size())
      start_phase(fence_step_, phase_ + 1);
    else
      start_phase(fence_step_ + 1, 0);
  }
  // A later phase whose fence cannot be held is run through (the fences only hold ranks back, they
  // change no time). False: the first phase, give up.
  bool skip_phase() {
    if (phases_.size() < 2) return false;
    next_phase();
    unpark_all();
    return true;
  }

  // Every held rank's fence one repetition on (the snapshot before, taken with other fences,
  // no longer compares). False: give up.
  bool move_held_fences() {
    if (++tries_ > kMaxFenceTries) return false;
    have_prev_ = false;
    for (int r = 0; r < s_.P; ++r)
      if (st_[r].parked) ++offset_[r];
    if (!fences_fit()) return false;
    unpark_all();
    return true;
  }

  void unpark_all() {
    for (int r = s_.P - 1; r >= 0; --r)
      if (st_[r].parked) {
        st_[r].parked = false;
        ready_.push_back(r);
      }
    parked_ = 0;
  }

  // Every rank is held at the fence: compare, jump or move the fence on. False: give up.
  bool at_fence() {
    const int P = s_.P;
    cur_clock_.resize(P);
    for (int r = 0; r < P; ++r) cur_clock_[r] = st_[r].clock;
    cur_msgs_.clear();
    msgs_.for_each([&](std::size_t k, double t) { cur_msgs_.push_back({k, t}); });
    if (have_prev_ && repeats()) {
      jump();
      next_phase();
      unpark_all();
      return true;
    }
    prev_clock_.swap(cur_clock_);
    prev_msgs_.swap(cur_msgs_);
    have_prev_ = true;
    ++fence_rep_;
    if (++tries_ > kMaxFenceTries || !fences_fit()) return false;
    unpark_all();
    return true;
  }

  // Whether the state now is the previous one moved by λ and one micro-batch step.
  bool repeats() {
    const double lambda = cur_clock_[0] - prev_clock_[0];
    for (int r = 0; r < s_.P; ++r)
      if (cur_clock_[r] - prev_clock_[r] != lambda) return false;
    if (cur_msgs_.size() != prev_msgs_.size()) return false;
    for (const auto& [k, t] : prev_msgs_) {
      const std::int64_t mb = static_cast<std::int64_t>(key_mb(k)) + mb_step_;
      if (mb < 0 || mb >= s_.M) return false;
      const double* now = msgs_.find(moved(k, mb_step_));
      if (!now || *now - t != lambda) return false;
    }
    lambda_ = lambda;
    return true;
  }

  // Every rank J repetitions on (J: the fewest any rank has left), times J·λ later, messages
  // in flight J micro-batch steps on.
  void jump() {
    std::uint32_t J = ~std::uint32_t{0};
    for (int r = 0; r < s_.P; ++r) J = std::min(J, L_.ranks[r][part_[r]].reps - fence_of(r));
    const double dt = static_cast<double>(J) * lambda_;
    for (int r = 0; r < s_.P; ++r) {
      RankState& st = st_[r];
      st.rep += J;
      st.clock += dt;
      normalize(r, st);
      jumped_ += static_cast<std::size_t>(J) * part_units_[r];
    }
    msgs_.clear();
    const std::int64_t dmb = static_cast<std::int64_t>(J) * mb_step_;
    for (const auto& [k, t] : cur_msgs_) {
      // The state J repetitions on is a true state of the schedule: its messages exist.
      if (static_cast<std::int64_t>(key_mb(k)) + dmb >= s_.M)
        throw std::logic_error(
            "periodic engine: a jump moved a message past "
            "the last micro-batch");
      msgs_.put(moved(k, dmb), t + dt);
      if (dense_) dense_[dense_index(moved(k, dmb))] = static_cast<float>(t + dt);
    }
    if (dense_ && fill_jumped_ && steps_ == 1 && phases_.size() == 1) fill_dense(J);
    if (phase_ != 0) return;
    if (jumps_.size() <= static_cast<std::size_t>(fence_step_)) jumps_.resize(fence_step_ + 1);
    Jump& jp = jumps_[fence_step_];
    jp = {true, {}, J, lambda_};
    for (int r = 0; r < s_.P; ++r) jp.first_rep.push_back(fence_of(r));
  }

  // A slot's place in the dense array.
  std::size_t dense_index(std::size_t k) const {
    const std::size_t C = static_cast<std::size_t>(s_.num_chunks());
    const std::size_t ch = ChannelSlots::channel_of(k), mb = ChannelSlots::mb_of(k);
    return ((ch & 1) * C + (ch >> 1)) * static_cast<std::size_t>(s_.M) + mb;
  }

  // The times of the messages the jump's J repetitions produce: each the time of the same
  // message one repetition before the fence (run), plus (j+1)·λ.
  void fill_dense(std::uint32_t J) {
    const std::size_t C = static_cast<std::size_t>(s_.num_chunks()), M = s_.M;
    for (int r = 0; r < s_.P; ++r) {
      const Segment& g = L_.ranks[r][part_[r]];
      for (std::uint32_t k = 0; k < g.length; ++k) {
        const Action a = L_.at(g, fence_of(r), k);
        const MessageName out = message_out(a, route_of(a));
        if (out.dir < 0) continue;
        const std::size_t row = (static_cast<std::size_t>(out.dir) * C + out.chunk) * M;
        const std::int64_t first = a.mb, step = g.mb_step;
        const double anchor = dense_[row + static_cast<std::size_t>(first - step)];
        for (std::uint32_t j = 0; j < J; ++j)
          dense_[row + static_cast<std::size_t>(first + j * step)] =
              static_cast<float>(anchor + static_cast<double>(j + 1) * lambda_);
      }
    }
  }

  // Past the end of a segment: the next one.
  void normalize(int r, RankState& st) const {
    const auto& segs = L_.ranks[r];
    while (st.seg < segs.size() && st.rep >= segs[st.seg].reps) {
      st.rep = 0;
      ++st.seg;
    }
  }

  // Raises *t to a's input's arrival; false (and the key in *wait) if it has not arrived.
  // *used: the input's key (kNone: none); *where: its place in the table.
  bool input(const Action& a, int step, double* t, std::size_t* wait, std::size_t* used,
             ChannelSlots::Where* where) {
    *used = kNone;
    const MessageName in = message_in(a, route_of(a));
    if (in.dir < 0) return true;
    const std::size_t k = key(step, in.dir, in.chunk, a.mb);
    *where = msgs_.locate(k);
    if (!msgs_.found(*where)) {
      *wait = k;
      return false;
    }
    *t = std::max(*t, msgs_.time_at(k, *where));
    *used = k;
    return true;
  }

  void output(int r, int step, const Action& a, double f_end, double grad_at) {
    const MessageName out = message_out(a, route_of(a));
    if (out.dir < 0) return;
    const std::size_t k = key(step, out.dir, out.chunk, a.mb);
    const int dst = consumer_rank(s_, out);
    double t = out.dir == 0 ? f_end : grad_at;
    if (dst != r) t += pol_.delay(r, dst, a);
    msgs_.put(k, t);
    if (dense_) dense_[dense_index(k)] = static_cast<float>(t);
    if (st_[dst].waiting == k) {
      st_[dst].waiting = kNone;
      ready_.push_back(dst);
    }
  }

  // Runs rank r until it must wait for an input, reaches a fence or finishes. The actions of
  // one repetition run on locals; fences and segment ends are looked at between repetitions
  // (a fence is the start of a repetition).
  void advance(int r) {
    RankState& st = st_[r];
    const auto& segs = L_.ranks[r];
    while (st.step < steps_) {
      if (st.seg == segs.size()) {
        if constexpr (requires { pol_.step_done(r, st.step, st.clock); })
          pol_.step_done(r, st.step, st.clock);
        const double end = st.clock;
        st.seg = st.rep = st.k = 0;
        if (++st.step < steps_) {
          st.clock += pol_.step_gap(r);
          if (step_fences_) {  // held at the start of the step
            step_end_[r] = end;
            ++at_boundary_;
            return;
          }
        }
        continue;
      }
      if (at_fence_position(r, st)) {
        st.parked = true;
        ++parked_;
        return;
      }
      const Segment& g = segs[st.seg];
      const int step = st.step;
      const std::uint32_t rep = st.rep;
      std::uint32_t k = st.k;
      double clock = st.clock;
      while (k < g.length) {
        Action u[2];
        u[0] = L_.at(g, rep, k);
        if (is_comm(u[0].op)) [[unlikely]] {  // a lowered list's SEND/RECV: messages are modelled
          ++k;
          continue;
        }
        const auto n = static_cast<std::uint32_t>(unit_length(u[0], g.length - k));
        if (n == 2) u[1] = L_.at(g, rep, k + 1);
        double arrival = -std::numeric_limits<double>::infinity();  // of the inputs, if any
        std::size_t used[2] = {kNone, kNone};
        ChannelSlots::Where where[2];
        for (std::uint32_t i = 0; i < n; ++i)
          if (!input(u[i], step, &arrival, &st.waiting, &used[i], &where[i])) {
            st.k = k;
            st.clock = clock;
            return;
          }
        const double start = std::max(clock, arrival);
        if (step == 0 && st.first < 0) first_action(st, start, arrival);
        // The first input where it was found; a second by its key (the first's removal may
        // have moved it).
        if (used[0] != kNone) msgs_.erase_at(used[0], where[0]);
        if (used[1] != kNone) {
          if (used[0] == kNone)
            msgs_.erase_at(used[1], where[1]);
          else
            msgs_.erase(used[1]);
        }
        const double stop = start + pol_.cost(r, u, n);
        const double grad_at = n == 2 ? start + pol_.grad_offset(r, u, n) : stop;
        pol_.record(r, step, 0, n, clock, start, stop);
        clock = stop;
        for (std::uint32_t i = 0; i < n; ++i) output(r, step, u[i], stop, grad_at);
        k += n;
      }
      st.clock = clock;
      st.k = 0;
      ++st.rep;
      normalize(r, st);
    }
    ++finished_;
  }

  const Schedule& s_;
  const PeriodicLists& L_;
  Policy& pol_;
  int steps_;
  std::vector<Route> route_of_;  // per chunk
  std::size_t chunks_ = static_cast<std::size_t>(s_.num_chunks());
  bool by_chunk_ = false;
  std::vector<Phase> phases_;  // of every step, in order
  std::size_t phase_ = 0;      // the one fenced now
  bool many_phases_ = false;
  std::vector<std::uint32_t> part_;        // the current phase's parts
  std::vector<std::uint32_t> part_units_;  // and units
  std::int32_t mb_step_ = 0;
  std::vector<RankState> st_;
  std::vector<int> ready_;
  ChannelSlots msgs_;
  int finished_ = 0, parked_ = 0;
  bool fence_on_ = false, have_prev_ = false;
  int fence_step_ = 0, tries_ = 0;
  std::uint32_t fence_rep_ = 1;
  std::vector<std::uint32_t> offset_;  // per rank, added to fence_rep_
  double lambda_ = 0;
  std::vector<double> prev_clock_, cur_clock_;
  std::vector<std::pair<std::size_t, double>> prev_msgs_, cur_msgs_;
  std::size_t jumped_ = 0;
  bool first_waits_ = true;  // every non-source's first action waited for its input
  bool step_fences_ = false, have_start_ = false;
  int at_boundary_ = 0;                        // ranks held at the start of their next step
  std::vector<double> step_end_, step_start_;  // per rank: its last step's end, this one's start
  float* dense_ = nullptr;
  bool fill_jumped_ = true;
  std::vector<Jump> jumps_;
};

}  // namespace bb
