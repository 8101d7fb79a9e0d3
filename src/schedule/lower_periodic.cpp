// Lowering of a schedule in periodic form (periodic.hpp) into a lowered schedule in periodic
// form, without writing out the repetitions: the same lists lower() writes (tests compare them
// action for action), proven by the same timed dry run, done on the segments.
//
// 1. Unit times: the periodic engine (periodic_engine.hpp) runs the compute lists with unit
//    costs and jumps over the repetitions of a pipeline that repeats itself. Every rank r then
//    repeated repetitions f-1 ... f+J of its periodic part, each λ after the one before (see
//    PeriodicEngine::Jump). JumpTimes gives every message's time: from the engine where it ran,
//    and for a message of a jumped repetition, from the same message of repetition f-1 plus
//    λ per repetition (a formula, so these times repeat by construction).
// 2. Lists: each rank's list is built as lower() builds it (RankLowering in lower.cpp), walking
//    the segments. At each start of a repetition of the periodic part, the walk compares its
//    state (where its two receive streams stand, the sends it has pending, its unit clock) with
//    the state one repetition earlier. When they differ only by one repetition, λ and one
//    micro-batch step, and everything the next repetitions read repeats too (they lie in the
//    jumped range), the repetitions that follow write what the last one wrote, moved on: the
//    walk writes that block once with a repetition count and moves its state on.
// 3. Proof: lower()'s timed dry run (lower.cpp), rank by rank on the segments. A segment
//    repeated n >= 4 times is checked explicitly in its first three repetitions; the others are
//    the third moved on, and pass the same checks, when every message time they read lies in
//    the jumped ranges (then they are formula values that repeat) and the third repetition
//    ended λ after the second. Messages sent and received in repetitions not walked are kept as
//    ranges per (kind, chunk), so "once" and "after its producer" are still checked everywhere.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "schedule/lower.hpp"
#include "schedule/lower_detail.hpp"
#include "schedule/periodic.hpp"
#include "schedule/periodic_engine.hpp"
#include "schedule/validate.hpp"

namespace bb {
namespace {
using namespace lower_detail;

// Message times of a periodic unit-time pass (see the top of the file).
class JumpTimes {
 public:
  explicit JumpTimes(const Schedule& s)
      : s_(s),
        C_(static_cast<std::size_t>(s.num_chunks())),
        M_(static_cast<std::size_t>(s.M)),
        dense_(static_cast<float*>(std::calloc(2 * C_ * M_, sizeof(float))), std::free),
        ranges_(2 * C_),
        by_residue_(2 * C_),
        route_(s.routes.front()) {
    if (!dense_) throw std::bad_alloc();
  }
  float* dense() { return dense_.get(); }

  // The engine's jump: the messages its repetitions produce, per (direction, chunk).
  void note_jump(const PeriodicLists& lists, const PeriodicUnitEngine& e) {
    const auto jump = e.jump_in(0);
    if (!jump.taken) return;
    lambda_ = static_cast<UnitTime>(jump.lambda);
    for (int r = 0; r < s_.P; ++r) {
      const Segment& g = lists.ranks[r][e.periodic_part(r)];
      for (std::uint32_t k = 0; k < g.length; ++k) {
        const Action a = lists.at(g, jump.first_rep[r], k);
        const MessageName out = message_out(a, route_);
        if (!out.none())
          ranges_[row(out)].push_back({static_cast<std::int64_t>(a.mb), g.mb_step, jump.reps});
      }
    }
    index_ranges();
  }

  // When message m of micro-batch mb was made.
  UnitTime message_time(const MessageName& m, std::int64_t mb) const {
    const std::size_t row = this->row(m) * M_;
    if (const Range* g = find(this->row(m), mb))
      return dense_[row + static_cast<std::size_t>(g->first_mb - g->mb_step)] +
             static_cast<UnitTime>(g->index(mb) + 1) * lambda_;
    return dense_[row + static_cast<std::size_t>(mb)];
  }
  // Whether that message is one of a jumped repetition (its time a formula).
  bool jumped(const MessageName& m, std::int64_t mb) const { return find(row(m), mb) != nullptr; }

  // Whether micro-batches a and b of message m are in one jumped range.
  bool same_range(const MessageName& m, std::int64_t a, std::int64_t b) const {
    const std::size_t row = this->row(m);
    if (!by_residue_[row].empty()) {  // ranges of distinct residues: only find(a) can hold a
      const Range* g = find(row, a);
      return g != nullptr && g->index(b) >= 0;
    }
    for (const Range& g : ranges_[row])
      if (g.index(a) >= 0 && g.index(b) >= 0) return true;
    return false;
  }

  UnitTime lambda() const { return lambda_; }

 private:
  // A message's row of times: by direction, then the chunk naming it.
  std::size_t row(const MessageName& m) const {
    return static_cast<std::size_t>(m.dir) * C_ + m.chunk;
  }
  struct Range {  // micro-batches first_mb + j·mb_step, j < count
    std::int64_t first_mb;
    std::int32_t mb_step;
    std::uint32_t count;
    std::int64_t index(std::int64_t mb) const {
      const std::int64_t d = mb - first_mb;
      if (d % mb_step != 0) return -1;
      const std::int64_t j = d / mb_step;
      return j >= 0 && j < count ? j : -1;
    }
  };
  // The range holding micro-batch mb of a message row, if any.
  const Range* find(std::size_t row, std::int64_t mb) const {
    const auto& rs = ranges_[row];
    const auto& idx = by_residue_[row];
    if (idx.empty()) {
      for (const Range& g : rs)
        if (g.index(mb) >= 0) return &g;
      return nullptr;
    }
    const std::int64_t step = static_cast<std::int64_t>(idx.size());
    const std::int32_t i = idx[static_cast<std::size_t>(((mb % step) + step) % step)];
    return i >= 0 && rs[static_cast<std::size_t>(i)].index(mb) >= 0
               ? &rs[static_cast<std::size_t>(i)]
               : nullptr;
  }
  // A long pattern (interleaved: P messages of one chunk per repetition) gives a row many ranges,
  // of one micro-batch step and distinct residues modulo it: those rows look their range up by
  // residue instead of trying each.
  void index_ranges() {
    by_residue_.assign(ranges_.size(), {});
    for (std::size_t row = 0; row < ranges_.size(); ++row) {
      const auto& rs = ranges_[row];
      if (rs.size() <= 8) continue;
      const std::int64_t step = std::abs(static_cast<std::int64_t>(rs.front().mb_step));
      std::vector<std::int32_t> idx(static_cast<std::size_t>(step), -1);
      bool distinct = true;
      for (std::size_t i = 0; i < rs.size() && distinct; ++i) {
        auto& slot = idx[static_cast<std::size_t>(((rs[i].first_mb % step) + step) % step)];
        distinct = std::abs(static_cast<std::int64_t>(rs[i].mb_step)) == step && slot < 0;
        slot = static_cast<std::int32_t>(i);
      }
      if (distinct) by_residue_[row] = std::move(idx);
    }
  }

  const Schedule& s_;
  std::size_t C_, M_;
  std::unique_ptr<float[], void (*)(void*)> dense_;
  std::vector<std::vector<Range>> ranges_;
  std::vector<std::vector<std::int32_t>> by_residue_;  // per row: range by mb mod |step|, or empty
  Route route_;
  UnitTime lambda_ = 0;
};

// A rank's receives in periodic form, in list order and key order (RankWalk's Recvs): two
// streams, one per kind (0: activations, for F with a remote previous chunk; 1: gradients, for
// B/BW with a remote next chunk), each walking the rank's list to its next receive; the head is
// the smaller of their heads. `ok` turns false when a stream is out of key order (lower() then
// sorts; the caller falls back to it).
class StreamRecvs {
 public:
  struct Stream {
    ListCursor c;
    int kind = 0;
    Msg head{};
    bool has_last = false;
    Msg last{};
  };

  StreamRecvs(const Schedule& s, const PeriodicLists& lists, const JumpTimes& times)
      : s_(s), L_(lists), T_(times) {}

  void start(int r) {
    ok = true;
    for (int kind = 0; kind < 2; ++kind) {
      streams[kind] = Stream{ListCursor(L_, r), kind};
      seek(streams[kind]);
    }
  }
  bool empty() const { return best() == nullptr; }
  const Msg& head() const { return best()->head; }
  void pop() {
    Stream& st = *best();
    if (st.has_last && !(st.last < st.head)) ok = false;  // not in key order
    st.last = st.head;
    st.has_last = true;
    st.c.next();
    seek(st);
  }
  // The stream's head after its cursor moved (by a skip).
  void reseek_head(Stream& st) { st.head = key_of(st.c.get()); }

  bool ok = true;
  Stream streams[2];

 private:
  const Stream* best() const {
    const Stream* b = nullptr;
    for (const Stream& st : streams)
      if (!st.c.end() && (!b || st.head < b->head)) b = &st;
    return b;
  }
  Stream* best() { return const_cast<Stream*>(std::as_const(*this).best()); }

  bool wants(const Stream& st, const Action& a) const {
    const RemoteMessage in = remote_in(s_, a, s_.routes.front());
    return !in.none() && in.msg.dir == st.kind;
  }
  bool segment_wants(const Stream& st, const Segment& g) const {
    for (std::uint32_t k = 0; k < g.length; ++k)
      if (wants(st, L_.pool[g.begin + k])) return true;  // (the chunk does not move with reps)
    return false;
  }
  // To the stream's next receive (or its end), and its key.
  void seek(Stream& st) {
    while (!st.c.end()) {
      if (st.c.pos().k == 0 && st.c.pos().rep == 0 && !segment_wants(st, st.c.seg())) {
        st.c.next_segment();
        continue;
      }
      const Action a = st.c.get();
      if (wants(st, a)) {
        st.head = key_of(a);
        return;
      }
      st.c.next();
    }
  }
  Msg key_of(const Action& a) const {
    Msg m{};
    recv_before(s_, T_, a, s_.routes.front(), &m);
    return m;
  }

  const Schedule& s_;
  const PeriodicLists& L_;
  const JumpTimes& T_;
};

// Builds rank r's lowered list in periodic form (see the top of the file): lower()'s walk
// (RankWalk), and where the walk repeats itself, the repetition written once.
class RankLoweringP {
 public:
  RankLoweringP(const Schedule& s, const PeriodicLists& compute, const JumpTimes& times,
                const PeriodicUnitEngine& engine)
      : s_(s),
        L_(compute),
        T_(times),
        jump_(engine.jump_in(0)),
        engine_(engine),
        streams_(s, compute, times) {}

  // False when a receive stream is out of key order (lower() then sorts; the caller falls back
  // to it).
  bool run(int r, std::vector<Action>& pool, std::vector<Segment>& segs) {
    r_ = r;
    part_ = engine_.periodic_part(r);
    step_ = engine_.mb_step();
    pool_ = &pool;
    segs_ = &segs;
    lit_.clear();
    streams_.start(r);
    RankWalk<JumpTimes, StreamRecvs, std::vector<Action>> walk(s_, T_, r, streams_, lit_);
    walk_ = &walk;
    bool have_prev = false;
    Snapshot prev;
    for (ListCursor c(L_, r); !c.end() && streams_.ok;) {
      const ListPos& at = c.pos();
      if (jump_.taken && at.seg == part_ && at.k == 0 && at.rep >= jump_.first_rep[r]) {
        Snapshot now = snapshot(at.rep);
        if (have_prev && prev.rep + 1 == now.rep && repeats(prev, now)) {
          const std::uint32_t K = skippable(at.rep);
          if (K > 0) {
            skip(c, prev, K);
            have_prev = false;
            continue;
          }
        }
        prev = now;
        have_prev = true;
      }
      walk.unit(c);
    }
    walk.finish();
    append_compressed(lit_, pool, segs);
    return streams_.ok;
  }

 private:
  struct Snapshot {
    std::uint32_t rep = 0;
    std::size_t lit = 0;  // lit_.size() then
    ListPos stream[2];
    bool stream_end[2] = {false, false};
    std::size_t ns = 0;
    Msg sends[2];
    UnitTime clock = 0;
  };
  Snapshot snapshot(std::uint32_t rep) const {
    Snapshot s;
    s.rep = rep;
    s.lit = lit_.size();
    for (int i = 0; i < 2; ++i) {
      s.stream[i] = streams_.streams[i].c.pos();
      s.stream_end[i] = streams_.streams[i].c.end();
    }
    s.ns = walk_->ns_;
    for (std::size_t i = 0; i < walk_->ns_; ++i) s.sends[i] = walk_->sends_[i];
    s.clock = walk_->clock_;
    return s;
  }
  // a moved on by one repetition: λ later, micro-batches one step on.
  bool moved_on(const Msg& a, const Msg& b) const {
    return b.act.op == a.act.op && b.act.chunk == a.act.chunk &&
           static_cast<std::int64_t>(b.act.mb) == static_cast<std::int64_t>(a.act.mb) + step_ &&
           (b.hi & 0xffffffffu) == (a.hi & 0xffffffffu) && b.time() == a.time() + T_.lambda() &&
           static_cast<std::int64_t>(b.lo) == static_cast<std::int64_t>(a.lo) + step_;
  }
  bool repeats(const Snapshot& a, const Snapshot& b) const {
    if (b.clock != a.clock + T_.lambda() || a.ns != b.ns) return false;
    for (int i = 0; i < 2; ++i) {
      if (a.stream_end[i] != b.stream_end[i]) return false;
      if (a.stream_end[i]) continue;
      const ListPos &x = a.stream[i], &y = b.stream[i];
      if (x.seg != part_ || y.seg != part_ || x.k != y.k || y.rep != x.rep + 1) return false;
    }
    for (std::size_t i = 0; i < a.ns; ++i)
      if (!moved_on(a.sends[i], b.sends[i])) return false;
    return b.lit > a.lit;
  }
  // Repetitions the walk may write without walking, from repetition `rep` of the part: all it
  // and its streams read must lie in repetitions first_rep ... first_rep + reps - 1 (times that
  // repeat), less one for the stream heads looked at after the block.
  std::uint32_t skippable(std::uint32_t rep) const {
    const std::int64_t last = static_cast<std::int64_t>(jump_.first_rep[r_]) + jump_.reps - 1;
    std::int64_t K = last - rep;
    for (const StreamRecvs::Stream& st : streams_.streams)
      if (!st.c.end()) K = std::min<std::int64_t>(K, last - st.c.pos().rep);
    return K > 1 ? static_cast<std::uint32_t>(K - 1) : 0;
  }
  // Writes the block since `prev` K more times (moved on each time) and moves the walk on.
  void skip(ListCursor& c, const Snapshot& prev, std::uint32_t K) {
    std::vector<Action> block(lit_.begin() + static_cast<std::ptrdiff_t>(prev.lit), lit_.end());
    for (Action& a : block)
      a.mb = static_cast<std::uint32_t>(static_cast<std::int64_t>(a.mb) + step_);
    append_compressed(lit_, *pool_, *segs_);
    lit_.clear();
    segs_->push_back({static_cast<std::uint32_t>(pool_->size()),
                      static_cast<std::uint32_t>(block.size()), K, step_});
    pool_->insert(pool_->end(), block.begin(), block.end());
    const std::int64_t dmb = static_cast<std::int64_t>(K) * step_;
    c.seek({c.pos().seg, c.pos().rep + K, c.pos().k});
    for (StreamRecvs::Stream& st : streams_.streams) {
      if (st.c.end()) continue;
      st.c.seek({st.c.pos().seg, st.c.pos().rep + K, st.c.pos().k});
      streams_.reseek_head(st);
      st.has_last = false;  // (the last key moved on is below the head: the block repeated)
    }
    for (std::size_t i = 0; i < walk_->ns_; ++i)
      walk_->sends_[i] = walk_->sends_[i].moved(static_cast<UnitTime>(K) * T_.lambda(), dmb);
    walk_->clock_ += static_cast<UnitTime>(K) * T_.lambda();
  }

  const Schedule& s_;
  const PeriodicLists& L_;
  const JumpTimes& T_;
  PeriodicUnitEngine::Jump jump_;
  const PeriodicUnitEngine& engine_;
  int r_ = 0;
  std::uint32_t part_ = 0;
  std::int32_t step_ = 0;
  std::vector<Action>* pool_ = nullptr;
  std::vector<Segment>* segs_ = nullptr;
  std::vector<Action> lit_;
  StreamRecvs streams_;
  RankWalk<JumpTimes, StreamRecvs, std::vector<Action>>* walk_ = nullptr;  // run()'s
};

// What happened to each (chunk, micro-batch) in the periodic proof (lower_detail's Marks): bits
// of the actions walked, and for the repetitions passed without walking, claims: per (bit,
// chunk) the micro-batches first + j·step (j < count) they cover.
class ProofMarks {
 public:
  ProofMarks(std::size_t C, std::size_t M)
      : C_(C),
        M_(M),
        flags_(static_cast<std::uint8_t*>(std::calloc(C * M, 1)), std::free),
        claims_(kMarkBits * C),
        walked_(kMarkBits * C) {
    if (!flags_) throw std::bad_alloc();
  }

  bool done(std::uint32_t chunk, std::uint32_t mb, std::uint8_t bit) const {
    return (flags_[chunk * M_ + mb] & bit) || claimed(bit, chunk, mb);
  }
  // Marks it; false if it had happened.
  bool once(std::uint32_t chunk, std::uint32_t mb, std::uint8_t bit) {
    if (done(chunk, mb, bit)) return false;
    flags_[chunk * M_ + mb] |= bit;
    Span& w = walked_[bit_index(bit) * C_ + chunk];
    w.lo = std::min<std::int64_t>(w.lo, mb);
    w.hi = std::max<std::int64_t>(w.hi, mb);
    return true;
  }

  // Claims repetitions [from, g.reps) of g (pattern actions `pattern`); false if one was already
  // done or claimed. All or nothing: a refused claim leaves none of its ranges behind.
  bool claim(const Segment& g, const Action* pattern, std::uint32_t from) {
    std::vector<std::vector<Claim>*> added;
    const auto refuse = [&] {
      for (auto it = added.rbegin(); it != added.rend(); ++it) (*it)->pop_back();
      return false;
    };
    const std::int64_t count = g.reps - from;
    for (std::uint32_t k = 0; k < g.length; ++k) {
      const Action a = pattern[k];
      const std::uint8_t bit = bit_of(a);
      if (!bit) continue;
      const std::int64_t first =
          static_cast<std::int64_t>(a.mb) + static_cast<std::int64_t>(from) * g.mb_step;
      const std::int64_t lo = std::min(first, first + (count - 1) * g.mb_step);
      const std::int64_t hi = std::max(first, first + (count - 1) * g.mb_step);
      auto& list = claims_[bit_index(bit) * C_ + a.chunk];
      for (const Claim& c : list) {
        const std::int64_t clo = std::min(c.first, c.first + (c.count - 1) * c.step);
        const std::int64_t chi = std::max(c.first, c.first + (c.count - 1) * c.step);
        if (lo <= chi && clo <= hi) return refuse();  // (both steps ±1: ranges of all)
      }
      // Done before by a walked action? Only where the walked ones reach.
      const Span& w = walked_[bit_index(bit) * C_ + a.chunk];
      for (std::int64_t mb = std::max(lo, w.lo); mb <= std::min(hi, w.hi); ++mb)
        if (flags_[a.chunk * M_ + static_cast<std::size_t>(mb)] & bit) return refuse();
      list.push_back({first, g.mb_step, count});
      added.push_back(&list);
    }
    return true;
  }

 private:
  struct Claim {
    std::int64_t first, step, count;
    bool has(std::int64_t mb) const {
      const std::int64_t d = mb - first;
      return d % step == 0 && d / step >= 0 && d / step < count;
    }
  };
  struct Span {
    std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = -1;
  };
  static std::size_t bit_index(std::uint8_t bit) {
    return static_cast<std::size_t>(std::countr_zero(bit));
  }
  // The bit an action sets, or 0.
  static std::uint8_t bit_of(const Action& a) {
    switch (a.op) {
      case Op::F:
        return kRanF;
      case Op::B:
      case Op::BW:
        return kRanB;
      case Op::SEND_F:
        return kSentF;
      case Op::RECV_F:
        return kRecvF;
      case Op::SEND_B:
        return kSentB;
      case Op::RECV_B:
        return kRecvB;
      default:
        return 0;
    }
  }
  bool claimed(std::uint8_t bit, std::uint32_t chunk, std::int64_t mb) const {
    for (const Claim& c : claims_[bit_index(bit) * C_ + chunk])
      if (c.has(mb)) return true;
    return false;
  }

  std::size_t C_, M_;
  std::unique_ptr<std::uint8_t[], void (*)(void*)> flags_;
  std::vector<std::vector<Claim>> claims_;  // per (bit, chunk)
  std::vector<Span> walked_;                // per (bit, chunk): the walked micro-batches' span
};

// lower()'s timed dry run (TimedDryRun in lower.cpp) on lowered lists in periodic form, with
// the JumpTimes as its witness (see the top of the file): the same checks of each SEND/RECV and
// compute unit (lower_detail), on the repetitions walked. Empty when the lists keep to the
// times; else what broke first (or that it could not tell, and the caller checks the flat
// lists).
class PeriodicProof {
 public:
  PeriodicProof(const Schedule& s, const PeriodicLists& lowered, const JumpTimes& times)
      : s_(s),
        L_(lowered),
        T_(times),
        routes_(s),
        marks_(static_cast<std::size_t>(s.num_chunks()), static_cast<std::size_t>(s.M)) {}

  std::string run() {
    std::size_t sends = 0, recvs = 0, remote = 0;
    for (int r = 0; r < s_.P; ++r) {
      Rank st;
      for (std::uint32_t g = 0; g < L_.ranks[r].size(); ++g) {
        std::string why = segment(r, g, st);
        if (!why.empty()) return why;
      }
      sends += st.sends;
      recvs += st.recvs;
      remote += st.remote;
    }
    if (sends == remote && recvs == remote) return {};
    return "  " + std::to_string(remote) + " messages cross ranks, but there are " +
           std::to_string(sends) + " sends and " + std::to_string(recvs) + " receives\n";
  }

 private:
  struct Rank {
    UnitTime clock = 0;
    bool any = false;
    Msg last{0, 0, {}};
    std::size_t sends = 0, recvs = 0, remote = 0;
    std::size_t step = 0;  // actions walked or passed, for messages
  };

  // Repetition rep of segment gi, action by action, as TimedDryRun::replay does.
  std::string walk(int r, std::uint32_t gi, std::uint32_t rep, Rank& st) {
    ListCursor c(L_, r);
    c.seek({gi, rep, 0});
    const std::size_t C = static_cast<std::size_t>(s_.num_chunks());
    while (!c.end() && c.pos().seg == gi && c.pos().rep == rep) {
      const Action a = c.get();
      if (is_comm(a.op)) {
        Msg key{};
        const char* bad = check_comm(s_, routes_, T_, r, a, marks_, &key);
        if (bad != nullptr) return dry_run_line(r, st.step, a, bad);
        ++(is_send(a.op) ? st.sends : st.recvs);
        if (st.any && !(st.last < key))
          return dry_run_line(r, st.step, a, "out of the order of message times");
        st.last = key;
        st.any = true;
        c.next();
        ++st.step;
        continue;
      }
      for (std::uint32_t i = 0; i < c.unit(); ++i) {
        const Action b = c.get(i);
        if (b.chunk >= C || b.mb >= static_cast<std::uint32_t>(s_.M) || s_.chunk_rank[b.chunk] != r)
          return dry_run_line(r, st.step + i, b, "not this rank's action");
      }
      Action u[2];
      const UnitSpan span = take_unit(routes_, T_, c, st.clock, u);
      std::uint32_t which = 0;
      const char* bad =
          check_unit(s_, routes_, T_, r, u, span.n, span.end, marks_, &st.remote, &which);
      if (bad != nullptr) return dry_run_line(r, st.step + which, u[which], bad);
      st.clock = span.end;
      st.step += span.n;
    }
    return {};
  }

  // Whether repetitions [from, g.reps) of g may be passed as repetition from-1 moved on (see
  // the top of the file), and their claims are free.
  bool passable(const Segment& g, std::uint32_t from) const {
    if (g.mb_step != 1 && g.mb_step != -1) return false;
    const std::uint32_t lastrep = g.reps - 1;
    const Route& rt = s_.routes.front();
    // Every message time they read is a formula: from the repetition before them on.
    const auto formula = [&](const MessageName& m, std::int64_t mb0) {
      const std::int64_t a = mb0 + static_cast<std::int64_t>(from - 1) * g.mb_step;
      const std::int64_t b = mb0 + static_cast<std::int64_t>(lastrep) * g.mb_step;
      return T_.jumped(m, a) && T_.jumped(m, b) && T_.same_range(m, a, b);
    };
    for (std::uint32_t k = 0; k < g.length; ++k) {
      const Action a = L_.pool[g.begin + k];
      if (is_comm(a.op)) {
        const MessageName m = comm_message(a, rt);
        if (m.none() || !formula(m, a.mb)) return false;
        if (is_send(a.op) && !producer_nearby(g, k)) return false;
        continue;
      }
      for (const MessageName& m : {message_in(a, rt), message_out(a, rt)})
        if (!m.none() && !formula(m, a.mb)) return false;
    }
    return true;
  }

  // Whether the data of the send at pattern place k comes from this segment, at most two
  // repetitions back.
  bool producer_nearby(const Segment& g, std::uint32_t k) const {
    const Action a = L_.pool[g.begin + k];
    const Op producer = a.op == Op::SEND_F ? Op::F : Op::B;
    for (std::uint32_t j = 0; j < g.length; ++j) {
      const Action p = L_.pool[g.begin + j];
      const bool kind = p.op == producer || (producer == Op::B && p.op == Op::BW);
      if (!kind || p.chunk != a.chunk) continue;
      // p.mb + y·step = a.mb + x·step: the producer runs x - y repetitions back.
      const std::int64_t d = static_cast<std::int64_t>(p.mb) - a.mb;
      if (d % g.mb_step != 0) continue;
      const std::int64_t reps_back = d / g.mb_step;
      if ((reps_back == 0 && j < k) || reps_back == 1 || reps_back == 2) return true;
    }
    return false;
  }

  std::string segment(int r, std::uint32_t gi, Rank& st) {
    const Segment& g = L_.ranks[r][gi];
    // Three repetitions walked, the rest passed when they repeat the third.
    const std::uint32_t walked = g.reps >= 4 && passable(g, 3) ? 3 : g.reps;
    UnitTime ends[3] = {0, 0, 0};
    for (std::uint32_t rep = 0; rep < walked; ++rep) {
      std::string why = walk(r, gi, rep, st);
      if (!why.empty()) return why;
      if (rep < 3) ends[rep] = st.clock;
    }
    if (walked == g.reps) return {};
    const UnitTime lambda = T_.lambda();
    if (ends[2] != ends[1] + lambda || !marks_.claim(g, &L_.pool[g.begin], 3)) {
      for (std::uint32_t rep = walked; rep < g.reps; ++rep) {
        std::string why = walk(r, gi, rep, st);
        if (!why.empty()) return why;
      }
      return {};
    }
    pass(g, g.reps - 3, st);
    return {};
  }

  // The `more` repetitions of g after the third, passed: counted, and the rank's clock and last
  // key moved on.
  void pass(const Segment& g, std::uint32_t more, Rank& st) {
    std::size_t sends = 0, recvs = 0, remote = 0;
    for (std::uint32_t k = 0; k < g.length; ++k) {
      const Action a = L_.pool[g.begin + k];
      sends += is_send(a.op);
      recvs += is_recv(a.op);
      remote += is_compute(a.op) && !remote_out(s_, a, s_.routes.front()).none();
    }
    st.sends += sends * more;
    st.recvs += recvs * more;
    st.remote += remote * more;
    st.step += static_cast<std::size_t>(g.length) * more;
    st.clock += static_cast<UnitTime>(more) * T_.lambda();
    if (st.any && sends + recvs > 0)
      st.last = st.last.moved(static_cast<UnitTime>(more) * T_.lambda(),
                              static_cast<std::int64_t>(more) * g.mb_step);
  }

  const Schedule& s_;
  const PeriodicLists& L_;
  const JumpTimes& T_;
  Routes routes_;
  ProofMarks marks_;
};

}  // namespace

DryRunResult timed_dry_run(const PeriodicSchedule& lowered) {
  DryRunResult res;
  res.ok = false;
  const Schedule& shape = lowered.shape;
  if (!shape.lowered) {
    res.message = "timed dry run needs a lowered schedule";
    return res;
  }
  const Schedule flat = to_flat(lowered);
  const ValidationReport rep = validate(flat);
  if (!rep.ok()) {
    res.message = "invalid schedule:\n" + rep.describe(flat);
    return res;
  }
  if (!shape.uniform_routes() || !pairs_whole(lowered.lists)) return timed_dry_run(flat);
  // The witness: the periodic engine's unit times of the lowered lists' computes.
  JumpTimes times(shape);
  PeriodicUnitPolicy policy;
  PeriodicUnitEngine engine(shape, lowered.lists, policy, 1);
  engine.write_times(times.dense(), false);
  if (engine.run() != PeriodicUnitEngine::Outcome::done) return timed_dry_run(flat);
  if (engine.max_clock() >= kMaxUnitTime) {
    res.message = "unit times reach 2^24, which floats do not hold exactly";
    return res;
  }
  times.note_jump(lowered.lists, engine);
  res.message = PeriodicProof(shape, lowered.lists, times).run();
  res.ok = res.message.empty();
  return res;
}

PeriodicSchedule lower(const PeriodicSchedule& ps, LowerPhases* phases) {
  const Schedule& shape = ps.shape;
  if (shape.lowered) throw ScheduleError("schedule '" + shape.name + "' is already lowered");
  PhaseClock phase(phases);
  const auto lap = [&](double LowerPhases::*field) { phase.lap(field); };
  // Validation on the segments; where that cannot tell, on the flat lists (which also serve
  // the fallback).
  Schedule flat;
  const bool sure = surely_valid(ps);
  if (!sure) {
    flat = to_flat(ps);
    validate_or_throw(flat);
  }
  lap(&LowerPhases::validate);
  const auto fallback = [&] {
    if (sure) flat = to_flat(ps);
    return to_periodic(lower(std::move(flat), phases));
  };
  if (!shape.uniform_routes() || !pairs_whole(ps.lists)) return fallback();
  JumpTimes times(shape);
  PeriodicUnitPolicy policy;
  PeriodicUnitEngine engine(shape, ps.lists, policy, 1);
  engine.write_times(times.dense(), false);
  if (engine.run() != PeriodicUnitEngine::Outcome::done || !engine.jump_in(0).taken)
    return fallback();
  unit_times_fit(shape, engine.max_clock());
  times.note_jump(ps.lists, engine);
  lap(&LowerPhases::unit_times);
  PeriodicSchedule out;
  out.shape = shape;
  out.shape.lowered = true;
  out.lists.ranks.resize(shape.P);
  RankLoweringP lowering(shape, ps.lists, times, engine);
  for (int r = 0; r < shape.P; ++r) {
    std::vector<Action> pool;
    std::vector<Segment> segs;
    if (!lowering.run(r, pool, segs)) return fallback();
    const auto base = static_cast<std::uint32_t>(out.lists.pool.size());
    out.lists.pool.insert(out.lists.pool.end(), pool.begin(), pool.end());
    for (Segment& g : segs) g.begin += base;
    out.lists.ranks[r] = std::move(segs);
  }
  lap(&LowerPhases::lists);
  const std::string certificate = PeriodicProof(out.shape, out.lists, times).run();
  lap(&LowerPhases::proof);
  if (!certificate.empty()) {
    // As lower(): the searching dry run decides (on the flat lists).
    const DryRunResult dr = dry_run(to_flat(out));
    if (!dr.ok)
      throw ScheduleError("lowering of '" + shape.name + "' failed its dry run:\n" + dr.message +
                          "(timed dry run: " + certificate + ")");
  }
  return out;
}

Schedule lower_by_periodic_form(Schedule s) {
  if (flat_passes_forced() || s.lowered) return lower(std::move(s));
  return to_flat(lower(to_periodic(std::move(s))));
}

}  // namespace bb
