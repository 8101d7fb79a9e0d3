#include "sim/memory.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "common/enum_names.hpp"
#include "common/error.hpp"
#include "schedule/edges.hpp"

namespace bb {

constexpr EnumNames<MemoryKind, kMemoryKinds> kMemoryKindNames{
    {"weights", "activations", "messages", "workspace", "runtime"}};
static_assert(kMemoryKindNames.ends_at(MemoryKind::runtime));

const char* memory_kind_name(MemoryKind k) {
  return kMemoryKindNames.name(k).data();  // literals: NUL-terminated
}

double MemorySample::total() const {
  double t = 0;
  for (double b : bytes) t += b;
  return t;
}

namespace {

constexpr std::uint64_t kStepEnd = std::numeric_limits<std::uint64_t>::max();

// A change of one pool's buffers in use: at time t, in the rank's order seq (2p for what the
// action at list position p takes when it starts or is posted, 2p + 1 for what it gives back
// when it ends or completes).
struct Event {
  double t;
  std::uint64_t seq;
  int pool;  // 0: the rank's messages; 1 + 3c + {0, 1, 2}: chunk c's inputs, saved, kept
  int delta;
};

int input_pool(int c) {
  return 1 + 3 * c;
}

// Times of every position of every list: a compute unit's start and end (an FB pair's F ends
// and its backward starts half-way), a SEND/RECV's post (its start and end: the end of the
// rank's previous compute, 0 before the first).
struct ListTimes {
  std::vector<std::vector<double>> start, end;
  std::vector<std::vector<char>> measured;  // SEND/RECV times given (MemoryTiming::comms)
};

ListTimes list_times(const Schedule& s, const MemoryTiming& timing) {
  ListTimes lt;
  for (int r = 0; r < s.P; ++r) {
    const std::size_t n = s.ranks[r].size();
    lt.start.emplace_back(n, std::nan(""));
    lt.end.emplace_back(n, std::nan(""));
    lt.measured.emplace_back(n, 0);
  }
  if (timing.comms != nullptr)
    for (const SimEvent& e : *timing.comms) {
      lt.start[e.rank][e.index] = e.start;
      lt.end[e.rank][e.index] = e.end;
      lt.measured[e.rank][e.index] = 1;
    }
  if (timing.events != nullptr)
    for (const SimEvent& e : *timing.events) {
      auto& st = lt.start[e.rank];
      auto& en = lt.end[e.rank];
      const double mid = e.n == 2 ? e.start + (e.end - e.start) / 2 : e.end;
      st[e.index] = e.start;
      en[e.index] = mid;
      if (e.n == 2) {
        st[e.index + 1] = mid;
        en[e.index + 1] = e.end;
      }
    }
  for (int r = 0; r < s.P; ++r) {
    const auto& acts = s.ranks[r];
    double last = 0, clock = 0;  // the previous compute's end; the order's own clock
    for (std::size_t p = 0; p < acts.size(); ++p) {
      auto& st = lt.start[r][p];
      auto& en = lt.end[r][p];
      if (is_comm(acts[p].op)) {
        if (!lt.measured[r][p]) st = en = last;
        continue;
      }
      if (timing.events == nullptr) {  // one time unit per compute unit
        const std::size_t n = unit_length(acts[p], acts.size() - p);
        st = clock;
        en = n == 2 ? clock + 0.5 : clock + 1;
        if (n == 2) {
          lt.start[r][p + 1] = en;
          lt.end[r][p + 1] = clock + 1;
        }
        clock += 1;
        p += n - 1;
        last = clock;
        continue;
      }
      if (std::isnan(st)) throw ConfigError("memory: the timeline misses a compute action");
      last = en;
    }
  }
  return lt;
}

// Per (direction, chunk, micro-batch) — 0: chunk's F, 1: its backward —: when the compute
// ends (time, order).
struct Lookup {
  int M = 0;
  std::vector<double> end;
  std::vector<std::uint64_t> end_seq;
  std::size_t key(int dir, int chunk, int mb) const {
    return (static_cast<std::size_t>(chunk) * static_cast<std::size_t>(M) +
            static_cast<std::size_t>(mb)) *
               2 +
           static_cast<std::size_t>(dir);
  }
};

Lookup lookup(const Schedule& s, const ListTimes& lt) {
  Lookup k;
  k.M = s.M;
  const std::size_t n =
      static_cast<std::size_t>(s.num_chunks()) * static_cast<std::size_t>(s.M) * 2;
  k.end.assign(n, std::nan(""));
  k.end_seq.assign(n, 0);
  for (int r = 0; r < s.P; ++r)
    for (std::size_t p = 0; p < s.ranks[r].size(); ++p) {
      const Action& a = s.ranks[r][p];
      const int c = a.chunk, m = static_cast<int>(a.mb);
      if (a.op == Op::F || a.op == Op::B || a.op == Op::BW) {
        const std::size_t i = k.key(a.op == Op::F ? 0 : 1, c, m);
        k.end[i] = lt.end[r][p];
        k.end_seq[i] = 2 * p + 1;
      }
    }
  return k;
}

// One rank's events, walking its list.
class RankEvents {
 public:
  RankEvents(const Schedule& s, const MemoryConfig& m, const MemoryTiming& timing,
             const ListTimes& lt, const Lookup& k, int rank)
      : s_(s), m_(m), timing_(timing), lt_(lt), k_(k), r_(rank) {}

  std::vector<Event> walk() {
    const auto& acts = s_.ranks[r_];
    ev_.reserve(4 * acts.size());
    for (std::size_t p = 0; p < acts.size(); ++p) {
      const Action& a = acts[p];
      if (is_comm(a.op))
        comm(a, p);
      else if (a.op == Op::F)
        forward(a, p);
      else if (a.op == Op::W)
        release_slot(a, p);
      else
        backward(a, p);
    }
    return std::move(ev_);
  }

 private:
  const ChunkMemory& chunk(int c) const {
    return m_.chunks.size() == 1 ? m_.chunks[0] : m_.chunks[c];
  }
  double start(std::size_t p) const { return lt_.start[r_][p]; }
  double end(std::size_t p) const { return lt_.end[r_][p]; }
  void add(double t, std::uint64_t seq, int pool, int delta) {
    ev_.push_back({t, seq, pool, delta});
  }
  bool kept(const Action& a) const {
    return chunk(a.chunk).kept > 0 && route_last(s_.routes[a.mb], a.chunk);
  }
  // A message buffer given back when the compute (dir, chunk, mb) ends.
  void until_consumed(double t, std::uint64_t seq, int dir, int c, int mb) {
    add(t, seq, 0, 1);
    const std::size_t i = k_.key(dir, c, mb);
    add(k_.end[i], k_.end_seq[i], 0, -1);
  }
  double link(int dst) const {
    return timing_.events != nullptr && timing_.sim != nullptr ? message_time(*timing_.sim, r_, dst)
                                                               : 0.0;
  }
  double step_end() {
    if (std::isnan(step_end_)) {
      step_end_ = 0;
      for (std::size_t p = 0; p < s_.ranks[r_].size(); ++p) step_end_ = std::max(step_end_, end(p));
    }
    return step_end_;
  }
  void release_sent(double t, std::uint64_t seq) {
    if (m_.hold_sends) {
      add(std::max(t, step_end()), kStepEnd, 0, -1);
    } else {
      add(t, seq, 0, -1);
    }
  }

  void comm(const Action& a, std::size_t p) {
    const MessageName msg = comm_message(a, s_.routes[a.mb]);
    if (msg.none()) return;
    const int mb = static_cast<int>(a.mb);
    if (is_recv(a.op)) {
      until_consumed(start(p), 2 * p, msg.dir, static_cast<int>(consumer_chunk(msg)), mb);
      return;
    }
    release_sent(lt_.measured[r_][p] ? end(p) : completes(start(p), msg, mb), 2 * p + 1);
  }

  // When a send posted at T completes: then if its message is eager, else once the compute
  // that consumes it on the receiver ends (MPI moves a large message and acknowledges it only
  // inside the receiver's MPI calls, which it makes between computes).
  double completes(double t, const MessageName& msg, int mb) const {
    if (m_.message <= m_.eager_bytes || timing_.events == nullptr) return t;
    const double consumed = k_.end[k_.key(msg.dir, static_cast<int>(consumer_chunk(msg)), mb)];
    return std::isnan(consumed) ? t : std::max(t, consumed);
  }

  // The output of compute a (at p), produced at its start: to the next chunk on this rank, the
  // loss gradient, or out (lowered: its SEND releases it; compute lists: it arrives).
  void output(const Action& a, std::size_t p) {
    const Route& rt = s_.routes[a.mb];
    const MessageName out = message_out(a, rt);
    const int mb = static_cast<int>(a.mb);
    if (out.none()) {  // the route's last F: the loss gradient, until its backward ends
      if (a.op == Op::F) until_consumed(start(p), 2 * p, 1, a.chunk, mb);
      return;
    }
    const int c = static_cast<int>(consumer_chunk(out));
    const int dst = consumer_rank(s_, out);
    if (dst == r_) {
      until_consumed(start(p), 2 * p, out.dir, c, mb);
      return;
    }
    add(start(p), 2 * p, 0, 1);
    if (s_.lowered) return;  // its SEND gives it back
    release_sent(completes(end(p), out, mb), 2 * p + 1);
  }

  // Compute lists: an input from another rank arrives when its producer ends plus the link.
  void input(const Action& a, std::size_t p) {
    if (s_.lowered) return;  // its RECV took it
    const RemoteMessage in = remote_in(s_, a, s_.routes[a.mb]);
    if (in.none()) return;
    const int mb = static_cast<int>(a.mb);
    const std::size_t producer = k_.key(in.msg.dir, static_cast<int>(producer_chunk(in.msg)), mb);
    const double arrives =
        timing_.events != nullptr ? std::min(k_.end[producer] + link(in.peer), start(p)) : start(p);
    until_consumed(arrives, 2 * p, in.msg.dir, a.chunk, mb);
  }

  void forward(const Action& a, std::size_t p) {
    const int c = a.chunk;
    add(start(p), 2 * p, input_pool(c), 1);
    if (!m_.recompute) add(start(p), 2 * p, input_pool(c) + 1, 1);
    if (kept(a)) add(start(p), 2 * p, input_pool(c) + 2, 1);
    if (message_in(a, s_.routes[a.mb]).none()) {  // the made input, during F
      add(start(p), 2 * p, 0, 1);
      add(end(p), 2 * p + 1, 0, -1);
    }
    input(a, p);
    output(a, p);
  }

  void backward(const Action& a, std::size_t p) {
    if (m_.recompute) add(start(p), 2 * p, input_pool(a.chunk) + 1, 1);
    input(a, p);
    output(a, p);
    if (a.op == Op::BW) release_slot(a, p);
  }

  // W or BW: the micro-batch's input, saved tensors and the loss's leave the chunk.
  void release_slot(const Action& a, std::size_t p) {
    add(end(p), 2 * p + 1, input_pool(a.chunk), -1);
    add(end(p), 2 * p + 1, input_pool(a.chunk) + 1, -1);
    if (kept(a)) add(end(p), 2 * p + 1, input_pool(a.chunk) + 2, -1);
  }

  const Schedule& s_;
  const MemoryConfig& m_;
  const MemoryTiming& timing_;
  const ListTimes& lt_;
  const Lookup& k_;
  int r_;
  std::vector<Event> ev_;
  double step_end_ = std::nan("");  // the rank's last end, once asked for
};

void check_config(const Schedule& s, const MemoryConfig& m) {
  const std::size_t C = static_cast<std::size_t>(s.num_chunks());
  if (m.chunks.size() != 1 && m.chunks.size() != C)
    throw ConfigError("memory: one chunk size or one per chunk (" + std::to_string(C) + "), got " +
                      std::to_string(m.chunks.size()));
  const auto bad = [](double x) { return !(x >= 0) || std::isinf(x); };
  for (const ChunkMemory& c : m.chunks)
    for (double x :
         {c.params, c.grads, c.optimizer, c.copies, c.workspace, c.input, c.saved, c.kept})
      if (bad(x)) throw ConfigError("memory: chunk bytes must be finite and >= 0");
  if (bad(m.message) || bad(m.rank_bytes) || !(m.eager_bytes >= 0))
    throw ConfigError("memory: message and rank bytes must be finite and >= 0");
}

// The rank's static bytes by kind: its chunks' weights and workspaces, DualPipe's partner
// gradients, the runtime's.
std::array<double, kMemoryKinds> static_bytes(const Schedule& s, const MemoryConfig& m, int r) {
  std::array<double, kMemoryKinds> b{};
  const auto at = [&](int c) -> const ChunkMemory& {
    return m.chunks.size() == 1 ? m.chunks[0] : m.chunks[static_cast<std::size_t>(c)];
  };
  for (int c = 0; c < s.num_chunks(); ++c) {
    if (s.chunk_rank[c] != r) continue;
    const ChunkMemory& x = at(c);
    b[static_cast<int>(MemoryKind::weights)] += x.params + x.grads + x.optimizer + x.copies;
    b[static_cast<int>(MemoryKind::workspace)] += x.workspace;
    for (int p = 0; p < s.num_chunks(); ++p)  // the other copy of its stage, on another rank
      if (p != c && s.chunk_stage[p] == s.chunk_stage[c] && s.chunk_rank[p] != r)
        b[static_cast<int>(MemoryKind::weights)] += x.params;
  }
  b[static_cast<int>(MemoryKind::runtime)] = m.rank_bytes;
  return b;
}

RankMemory scan(const Schedule& s, const MemoryConfig& m, int r, std::vector<Event> ev,
                bool want_samples) {
  // Events of one (t, seq) are all taken or all given back: their order among them is free.
  std::sort(ev.begin(), ev.end(),
            [](const Event& a, const Event& b) { return a.t != b.t ? a.t < b.t : a.seq < b.seq; });
  const std::size_t pools = 1 + 3 * static_cast<std::size_t>(s.num_chunks());
  std::vector<double> unit(pools, m.message);
  for (int c = 0; c < s.num_chunks(); ++c) {
    const ChunkMemory& x =
        m.chunks.size() == 1 ? m.chunks[0] : m.chunks[static_cast<std::size_t>(c)];
    unit[static_cast<std::size_t>(input_pool(c))] = x.input;
    unit[static_cast<std::size_t>(input_pool(c)) + 1] = x.saved;
    unit[static_cast<std::size_t>(input_pool(c)) + 2] = x.kept;
  }
  std::vector<long long> in_use(pools, 0), high(pools, 0);
  RankMemory out;
  // From the step's start, or from the first event where one came earlier (a measured step's
  // receive posted before the step's start on that rank's clock): samples stay in time order.
  MemorySample now{ev.empty() ? 0.0 : std::min(0.0, ev.front().t), static_bytes(s, m, r)};
  const auto kind_of = [](std::size_t pool) {
    return static_cast<int>(pool == 0 ? MemoryKind::messages : MemoryKind::activations);
  };
  const auto close = [&] {  // the state after every event at now.t
    if (now.total() > out.live_peak) {
      out.live_peak = now.total();
      out.live_peak_time = now.t;
    }
    if (want_samples && (out.samples.empty() || out.samples.back().bytes != now.bytes))
      out.samples.push_back(now);
  };
  for (const Event& e : ev) {
    if (e.t != now.t) {
      close();
      now.t = e.t;
    }
    const auto i = static_cast<std::size_t>(e.pool);
    in_use[i] += e.delta;
    high[i] = std::max(high[i], in_use[i]);
    now.bytes[kind_of(i)] += e.delta * unit[i];
  }
  close();
  out.peak_bytes = static_bytes(s, m, r);
  for (std::size_t i = 0; i < pools; ++i)
    out.peak_bytes[kind_of(i)] += static_cast<double>(high[i]) * unit[i];
  for (double b : out.peak_bytes) out.peak += b;
  return out;
}

}  // namespace

std::vector<RankMemory> rank_memory(const Schedule& s, const MemoryConfig& m,
                                    const MemoryTiming& timing, bool samples) {
  check_config(s, m);
  const ListTimes lt = list_times(s, timing);
  const Lookup k = lookup(s, lt);
  std::vector<RankMemory> out;
  for (int r = 0; r < s.P; ++r)
    out.push_back(scan(s, m, r, RankEvents(s, m, timing, lt, k, r).walk(), samples));
  return out;
}

void add_runtime_bytes(RankMemory& rank, double bytes) {
  constexpr int k = static_cast<int>(MemoryKind::runtime);
  rank.peak += bytes;
  rank.peak_bytes[k] += bytes;
  rank.live_peak += bytes;
  for (MemorySample& m : rank.samples) m.bytes[k] += bytes;
}

std::vector<RankMemory> simulate_memory(const Schedule& s, const MemoryConfig& m,
                                        const SimConfig& sim, bool samples) {
  SimConfig cfg = sim;
  cfg.record_events = true;
  const SimResult r = simulate(s, cfg);
  return rank_memory(s, m, {&r.events, &cfg}, samples);
}

MemoryConfig sim_memory_config(const Schedule& s, const SimConfig& cfg, double static_bytes) {
  const bool none = cfg.act_bytes <= 0 && cfg.msg_bytes <= 0 && static_bytes <= 0;
  MemoryConfig m;
  m.message = cfg.msg_bytes;
  for (double f : chunk_shares(s)) {
    ChunkMemory x;
    x.saved = (none ? 1.0 : cfg.act_bytes) * f;
    x.params = static_bytes * f;
    m.chunks.push_back(x);
  }
  return m;
}

}  // namespace bb
