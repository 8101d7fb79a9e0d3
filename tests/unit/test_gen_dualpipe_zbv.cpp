// Tests of the DualPipe, DualPipeV and ZB-V generators: structure (one F, B, W per chunk and
// micro-batch of each route, on the chunk's rank, in order), an untimed all-rank dry run, and a
// unit-time ASAP simulation (local to this file) for bubbles and live activations.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "schedule/generators.hpp"

namespace bb {
namespace {

// ---------------------------------------------------------------------------------------------
// Helpers.

std::string action_text(const Action& a) {
  const char* kind = a.op == Op::F ? "F" : a.op == Op::B ? "B" : a.op == Op::W ? "W" : "BW";
  return std::to_string(a.chunk) + kind + std::to_string(a.mb);
}

// Rank list as text; an FB pair prints as `(0F4;3BW1)FB`.
std::string rank_text(const std::vector<Action>& list) {
  std::ostringstream os;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (i) os << ',';
    if (list[i].overlap_next() && i + 1 < list.size()) {
      os << '(' << action_text(list[i]) << ';' << action_text(list[i + 1]) << ")FB";
      ++i;
    } else {
      os << action_text(list[i]);
    }
  }
  return os.str();
}

// Executable units of one rank: a single action or an overlapped (F, backward) pair.
struct Unit {
  std::size_t begin = 0;
  std::size_t count = 1;
};

std::vector<Unit> units_of(const std::vector<Action>& list) {
  std::vector<Unit> u;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (list[i].overlap_next()) {
      u.push_back({i, 2});
      ++i;
    } else {
      u.push_back({i, 1});
    }
  }
  return u;
}

// Completion times of F, B (input grad) and W per (chunk, mb); negative = not done.
class Done {
 public:
  explicit Done(const Schedule& s) : C_(s.num_chunks()), M_(s.M) {
    for (auto& t : t_) t.assign(static_cast<std::size_t>(C_) * M_, -1.0);
  }
  double get(int kind, int c, int m) const { return t_[kind][idx(c, m)]; }
  void set(const Action& a, double t) {
    if (a.op == Op::F) t_[0][idx(a.chunk, a.mb)] = t;
    if (a.op == Op::B || a.op == Op::BW) t_[1][idx(a.chunk, a.mb)] = t;
    if (a.op == Op::W || a.op == Op::BW) t_[2][idx(a.chunk, a.mb)] = t;
  }

 private:
  std::size_t idx(int c, int m) const { return static_cast<std::size_t>(c) * M_ + m; }
  int C_, M_;
  std::vector<double> t_[3];
};

// Latest completion time of the inputs of `a`, or -1 when one is not done yet.
double inputs_ready(const Schedule& s, const Done& d, const Action& a) {
  const Route& rt = s.routes[a.mb];
  double t = 0;
  auto need = [&](int kind, int c) {
    const double x = d.get(kind, c, a.mb);
    if (x < 0 || t < 0) {
      t = -1;
    } else {
      t = std::max(t, x);
    }
  };
  switch (a.op) {
    case Op::F:
      if (a.chunk > rt.first) need(0, a.chunk - 1);
      break;
    case Op::B:
    case Op::BW:
      need(0, a.chunk);
      if (a.chunk < rt.last) need(1, a.chunk + 1);
      break;
    case Op::W:
      need(1, a.chunk);
      break;
    default:
      t = -1;
  }
  return t;
}

struct Costs {
  double f = 1, b = 1, w = 1;
  double fb_gain = 0;  // FB pair time = F + backward - fb_gain
  double of(Op op) const { return op == Op::F ? f : op == Op::B ? b : op == Op::W ? w : b + w; }
};

struct SimResult {
  bool finished = false;
  double makespan = 0;
  std::vector<double> busy;
  std::vector<double> first_start, last_end;  // per rank
  std::vector<int> peak_live;                 // F done minus W done, in chunk-micro-batches
};

// ASAP list scheduling: every rank runs its units in order, each as soon as the rank is free and
// its inputs are done. Units are processed in a dry-run order (sweeps over the ranks), which
// yields exact ASAP times since each unit's start depends only on already-processed units.
// With `costs` absent this is the untimed dry run.
SimResult simulate(const Schedule& s, const Costs& costs = {}) {
  SimResult res;
  Done done(s);
  std::vector<std::vector<Unit>> units(s.P);
  for (int r = 0; r < s.P; ++r) units[r] = units_of(s.ranks[r]);
  std::vector<std::size_t> next(s.P, 0);
  std::vector<double> free_at(s.P, 0);
  res.busy.assign(s.P, 0);
  res.first_start.assign(s.P, -1);
  res.last_end.assign(s.P, 0);
  res.peak_live.assign(s.P, 0);
  std::vector<int> live(s.P, 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < s.P; ++r) {
      while (next[r] < units[r].size()) {
        const Unit u = units[r][next[r]];
        double start = free_at[r];
        double cost = 0;
        bool ready = true;
        for (std::size_t i = 0; i < u.count; ++i) {
          const Action& a = s.ranks[r][u.begin + i];
          const double t = inputs_ready(s, done, a);
          if (t < 0) ready = false;
          start = std::max(start, t);
          cost += costs.of(a.op);
        }
        if (!ready) break;
        if (u.count == 2) cost -= costs.fb_gain;
        const double end = start + cost;
        for (std::size_t i = 0; i < u.count; ++i) {
          const Action& a = s.ranks[r][u.begin + i];
          done.set(a, end);
          if (a.op == Op::F) live[r] += 1;
          res.peak_live[r] = std::max(res.peak_live[r], live[r]);
          if (a.op == Op::W || a.op == Op::BW) live[r] -= 1;
        }
        free_at[r] = end;
        if (res.first_start[r] < 0) res.first_start[r] = start;
        res.last_end[r] = end;
        res.busy[r] += cost;
        res.makespan = std::max(res.makespan, end);
        ++next[r];
        progress = true;
      }
    }
  }
  res.finished = true;
  for (int r = 0; r < s.P; ++r) res.finished = res.finished && next[r] == units[r].size();
  return res;
}

// Every (chunk, mb) of each route gets exactly one F, one B and one W (BW counts as both), on
// the chunk's rank, in F -> B -> W order within that rank's list; FB pairs are well formed.
void check_structure(const Schedule& s, bool allow_fb) {
  const int C = s.num_chunks();
  ASSERT_EQ(static_cast<int>(s.ranks.size()), s.P);
  ASSERT_EQ(static_cast<int>(s.routes.size()), s.M);
  std::vector<int> pos[3];
  std::vector<int> count[3];
  for (int k = 0; k < 3; ++k) {
    pos[k].assign(static_cast<std::size_t>(C) * s.M, -1);
    count[k].assign(static_cast<std::size_t>(C) * s.M, 0);
  }
  for (int r = 0; r < s.P; ++r) {
    const auto& list = s.ranks[r];
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      ASSERT_TRUE(is_compute(a.op)) << "rank " << r << " action " << i;
      ASSERT_LT(static_cast<int>(a.mb), s.M);
      ASSERT_LT(static_cast<int>(a.chunk), C);
      const Route& rt = s.routes[a.mb];
      ASSERT_TRUE(a.chunk >= rt.first && a.chunk <= rt.last)
          << "chunk off route: rank " << r << " " << action_text(a);
      ASSERT_EQ(s.chunk_rank[a.chunk], r) << "wrong rank for " << action_text(a);
      if (a.overlap_next()) {
        ASSERT_TRUE(allow_fb) << "unexpected FB in " << s.name;
        ASSERT_EQ(a.op, Op::F);
        ASSERT_LT(i + 1, list.size());
        const Action& b = list[i + 1];
        ASSERT_TRUE(b.op == Op::B || b.op == Op::BW);
        ASSERT_FALSE(b.overlap_next());
        ASSERT_NE(b.chunk, a.chunk);
      }
      const std::size_t k = static_cast<std::size_t>(a.chunk) * s.M + a.mb;
      const int at = static_cast<int>(i);
      if (a.op == Op::F) pos[0][k] = at, ++count[0][k];
      if (a.op == Op::B || a.op == Op::BW) pos[1][k] = at, ++count[1][k];
      if (a.op == Op::W || a.op == Op::BW) pos[2][k] = at, ++count[2][k];
    }
  }
  for (int m = 0; m < s.M; ++m) {
    for (int c = 0; c < C; ++c) {
      const std::size_t k = static_cast<std::size_t>(c) * s.M + m;
      const bool on_route = c >= s.routes[m].first && c <= s.routes[m].last;
      const int want = on_route ? 1 : 0;
      ASSERT_EQ(count[0][k], want) << "F count of chunk " << c << " mb " << m;
      ASSERT_EQ(count[1][k], want) << "B count of chunk " << c << " mb " << m;
      ASSERT_EQ(count[2][k], want) << "W count of chunk " << c << " mb " << m;
      if (on_route) {
        ASSERT_LT(pos[0][k], pos[1][k]) << "B before F: chunk " << c << " mb " << m;
        ASSERT_LE(pos[1][k], pos[2][k]) << "W before B: chunk " << c << " mb " << m;
      }
    }
  }
}

void check_rejected(const std::string& name, int P, int M, const std::string& prefix) {
  try {
    generate(name, ScheduleParams{P, M, 2});
    ADD_FAILURE() << prefix << " accepted P=" << P << " M=" << M;
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(prefix + ":", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

// ---------------------------------------------------------------------------------------------
// Rejected configurations.

TEST(GenDualPipe, RejectsUnsupported) {
  check_rejected("dualpipe", 0, 8, "dualpipe");
  check_rejected("dualpipe", 1, 8, "dualpipe");
  check_rejected("dualpipe", 3, 12, "dualpipe");
  check_rejected("dualpipe", 4, 7, "dualpipe");   // M odd
  check_rejected("dualpipe", 4, 9, "dualpipe");   // M odd
  check_rejected("dualpipe", 4, 6, "dualpipe");   // M < 2P
  check_rejected("dualpipe", 8, 14, "dualpipe");  // M < 2P
  EXPECT_NO_THROW(generate("dualpipe", ScheduleParams{2, 4, 1}));
  EXPECT_NO_THROW(generate("dualpipe", ScheduleParams{4, 8, 1}));
}

TEST(GenDualPipeV, RejectsUnsupported) {
  check_rejected("dualpipev", 0, 8, "dualpipev");
  check_rejected("dualpipev", 1, 8, "dualpipev");
  check_rejected("dualpipev", 4, 7, "dualpipev");
  check_rejected("dualpipev", 3, 5, "dualpipev");
  EXPECT_NO_THROW(generate("dualpipev", ScheduleParams{3, 6, 1}));  // odd P and M accepted
  EXPECT_NO_THROW(generate("dualpipev", ScheduleParams{4, 9, 1}));
}

TEST(GenZbV, RejectsUnsupported) {
  check_rejected("zb-v", 0, 8, "zb-v");
  check_rejected("zb-v", 4, 0, "zb-v");
  check_rejected("zb-v", -2, 4, "zb-v");
  EXPECT_NO_THROW(generate("zb-v", ScheduleParams{1, 1, 1}));
  EXPECT_NO_THROW(generate("zb-v", ScheduleParams{4, 1, 1}));
}

// ---------------------------------------------------------------------------------------------
// Metadata and exact step structure on small cases (traced by hand from the reference loops).

TEST(GenDualPipe, Metadata) {
  const Schedule s = generate("dualpipe", ScheduleParams{4, 10, 7});
  EXPECT_EQ(s.name, "dualpipe");
  EXPECT_EQ(s.P, 4);
  EXPECT_EQ(s.M, 10);
  EXPECT_EQ(s.v, 2);
  EXPECT_FALSE(s.lowered);
  ASSERT_EQ(s.num_chunks(), 8);
  EXPECT_EQ(s.chunk_rank, (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0}));
  EXPECT_EQ(s.chunk_stage, (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(s.routes[4], (Route{0, 3}));
  EXPECT_EQ(s.routes[5], (Route{4, 7}));
}

TEST(GenDualPipeV, MetadataAndSteps) {
  const Schedule s = generate("dualpipev", ScheduleParams{2, 4, 1});
  EXPECT_EQ(s.name, "dualpipev");
  EXPECT_EQ(s.v, 2);
  EXPECT_EQ(s.routes[3], (Route{0, 3}));
  // Rank 0 (K=2, k=0): 2 F0 | F0 F1 | B1 W1 F1 | FB(F0,BW1) FB(F1,BW0) | BW1 FB(F1,BW0) |
  // BW1 B0 (split on between B1 and B0, k even) | W B0 | W.
  EXPECT_EQ(rank_text(s.ranks[0]),
            "0F0,0F1,0F2,3F0,3B0,3W0,3F1,(0F3;3BW1)FB,(3F2;0BW0)FB,3BW2,(3F3;0BW1)FB,3BW3,"
            "0B2,0W2,0B3,0W3");
  // Rank 1 (last rank, k=1): 2x(F0 F1) | F0 BW1 not overlapped, FB(F1,BW0), FB(F0,BW1),
  // FB(F1,BW0) | BW1 BW0, then split on before B1 (k odd): B1 B0 | W W.
  EXPECT_EQ(rank_text(s.ranks[1]),
            "1F0,2F0,1F1,2F1,1F2,2BW0,(2F2;1BW0)FB,(1F3;2BW1)FB,(2F3;1BW1)FB,2BW2,1BW2,2B3,"
            "1B3,2W3,1W3");
}

TEST(GenDualPipe, StepsOnSmallestPipeline) {
  // P=2: both ranks are middle ranks (K=1, k=0); rank 1's phase 0 is direction 1.
  const Schedule s = generate("dualpipe", ScheduleParams{2, 4, 1});
  EXPECT_EQ(rank_text(s.ranks[0]), "0F0,3F2,0F1,3BW2,(3F3;0BW0)FB,3BW3,0B1,0W1");
  EXPECT_EQ(rank_text(s.ranks[1]), "2F2,1F0,2F3,1BW0,(1F1;2BW2)FB,1BW1,2B3,2W3");
}

TEST(GenZbV, MetadataAndSteps) {
  const Schedule s = generate("zb-v", ScheduleParams{2, 4, 1});
  EXPECT_EQ(s.name, "zb-v");
  EXPECT_EQ(s.v, 2);
  EXPECT_EQ(s.chunk_rank, (std::vector<int>{0, 1, 1, 0}));
  EXPECT_EQ(rank_text(s.ranks[0]),
            "0F0,0F1,0F2,3F0,3B0,3W0,3F1,3B1,3W1,0F3,0B0,0W0,3F2,3B2,3W2,0B1,0W1,3F3,3B3,3W3,"
            "0B2,0W2,0B3,0W3");
  EXPECT_EQ(rank_text(s.ranks[1]),
            "1F0,2F0,1F1,2F1,2B0,2W0,1F2,1B0,1W0,2F2,2B1,2W1,1F3,1B1,1W1,2F3,2B2,2W2,1B2,2B3,"
            "1B3,1W2,2W3,1W3");
}

// ---------------------------------------------------------------------------------------------
// Structure, dry run and unit-time simulation over a grid.

struct GridCase {
  std::string name;
  std::vector<int> Ps;
};

std::vector<GridCase> grid() {
  return {{"dualpipe", {2, 4, 6, 8}},
          {"dualpipev", {2, 3, 4, 5, 6, 7, 8}},
          {"zb-v", {1, 2, 3, 4, 5, 6, 7, 8}}};
}

TEST(GenDualPipeZbV, StructureAndDryRun) {
  for (const auto& g : grid()) {
    for (int P : g.Ps) {
      for (int M = 1; M <= 4 * P; ++M) {
        Schedule s;
        try {
          s = generate(g.name, ScheduleParams{P, M, 2});
        } catch (const ConfigError&) {
          continue;
        }
        SCOPED_TRACE(g.name + " P=" + std::to_string(P) + " M=" + std::to_string(M));
        EXPECT_EQ(s.name, g.name);
        check_structure(s, g.name != "zb-v");
        EXPECT_TRUE(simulate(s).finished) << "dry run stuck";
      }
    }
  }
}

// The dry run itself must notice a stuck order.
TEST(GenDualPipeZbV, DryRunDetectsDeadlock) {
  Schedule s = generate("zb-v", ScheduleParams{2, 4, 1});
  ASSERT_TRUE(simulate(s).finished);
  auto& r1 = s.ranks[1];
  std::rotate(r1.begin(), r1.begin() + 1, r1.end());  // rank 1's first forward moved last
  EXPECT_FALSE(simulate(s).finished);
}

// ZB-V with F = B = W = 1 per chunk action: every rank runs without a gap from its first
// action (rank r starts at time r, the forward ramp), so the single-step makespan is
// 6M + (P-1) and the steady-state bubble (per-rank span minus busy) is 0. Peak live
// activations: 2P chunk-micro-batches (= P stage-micro-batches, as 1F1B) on every rank.
TEST(GenZbV, UnitTimeBubbleAndMemory) {
  for (int P = 1; P <= 8; ++P) {
    for (int M = 2 * P - 1; M <= 4 * P + 1; ++M) {
      SCOPED_TRACE("P=" + std::to_string(P) + " M=" + std::to_string(M));
      const Schedule s = generate("zb-v", ScheduleParams{P, M, 2});
      const SimResult r = simulate(s);
      ASSERT_TRUE(r.finished);
      EXPECT_DOUBLE_EQ(r.makespan, 6.0 * M + (P - 1));
      for (int rank = 0; rank < P; ++rank) {
        EXPECT_DOUBLE_EQ(r.first_start[rank], rank);
        EXPECT_DOUBLE_EQ(r.busy[rank], 6.0 * M);
        EXPECT_DOUBLE_EQ(r.last_end[rank] - r.first_start[rank], r.busy[rank]);
        EXPECT_EQ(r.peak_live[rank], 2 * P);
      }
    }
  }
}

// Fewer micro-batches than 2P-1: phantom slots lengthen the ramp but never raise memory.
TEST(GenZbV, SmallMStaysWithinMemory) {
  for (int P = 2; P <= 8; ++P) {
    for (int M = 1; M < 2 * P - 1; ++M) {
      SCOPED_TRACE("P=" + std::to_string(P) + " M=" + std::to_string(M));
      const SimResult r = simulate(generate("zb-v", ScheduleParams{P, M, 2}));
      ASSERT_TRUE(r.finished);
      EXPECT_GE(r.makespan, 6.0 * M + (P - 1));
      for (int x : r.peak_live) EXPECT_LE(x, std::min(2 * P, 2 * M));
    }
  }
}

// DualPipe / DualPipeV against the DeepSeek form (K-1)(FB + B + W - 3W), K = P/2 for
// DualPipe (stage units) and K = P for DualPipeV (chunk units), B the input-gradient time.
// Observed (single step, unit F = B = W = 1): makespan minus the least-busy rank's work equals
// the formula, both with FB = F+B+W = 3 (no overlap gain) and FB = 2. The edge ranks (0 and
// P-1) span the whole step, so the same idle is their steady-state bubble.
// Peak live activations: P+1 stage-micro-batches (DualPipe), 2P+1 chunk-micro-batches
// (DualPipeV) on every rank.
TEST(GenDualPipe, UnitTimeBubbleAndMemory) {
  for (const bool v : {false, true}) {
    for (int P = 2; P <= 8; P += v ? 1 : 2) {
      for (int M = 2 * P; M <= 4 * P + 2; M += v ? 1 : 2) {
        for (const double gain : {0.0, 1.0}) {
          SCOPED_TRACE(std::string(v ? "dualpipev" : "dualpipe") + " P=" + std::to_string(P) +
                       " M=" + std::to_string(M) + " gain=" + std::to_string(gain));
          const Schedule s = v ? generate("dualpipev", ScheduleParams{P, M, 2})
                               : generate("dualpipe", ScheduleParams{P, M, 2});
          Costs c;
          c.fb_gain = gain;
          const SimResult r = simulate(s, c);
          ASSERT_TRUE(r.finished);
          const double fb = c.f + c.b + c.w - gain;
          const double K = v ? P : P / 2;
          const double formula = (K - 1) * (fb + c.b + c.w - 3 * c.w);
          const double min_busy = *std::min_element(r.busy.begin(), r.busy.end());
          EXPECT_DOUBLE_EQ(r.makespan - min_busy, formula);
          EXPECT_DOUBLE_EQ(r.first_start[0], 0);
          EXPECT_DOUBLE_EQ(r.last_end[0], r.makespan);
          for (int x : r.peak_live) EXPECT_EQ(x, v ? 2 * P + 1 : P + 1);
        }
      }
    }
  }
}

}  // namespace
}  // namespace bb
