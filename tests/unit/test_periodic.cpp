// The periodic form of action lists and the periodic simulator engine: compress() loses
// nothing, and the engine with its jumps gives bit for bit the plain engine's results.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/message_slots.hpp"
#include "schedule/periodic.hpp"
#include "schedule/validate.hpp"
#include "schedule_cases.hpp"
#include "sim/sim.hpp"

namespace bb {
namespace {

// Every built-in schedule at P in {2,3,4,8}, M in {P, 2P+1, 4P, 16P}, v in {1,2,4}.
template <class F>
void for_each_schedule(F&& f) {
  const auto ms_of = [](int P) { return std::vector<int>{P, 2 * P + 1, 4 * P, 16 * P}; };
  test::for_each_accepted({2, 3, 4, 8}, ms_of, {1, 2, 4},
                          [&](const std::string& name, int P, int M, int v) {
                            f(name, P, M, v, generate(name, {P, M, v}));
                          });
}

TEST(Periodic, CompressLosesNothing) {
  for_each_schedule([](const std::string& name, int P, int M, int v, const Schedule& s) {
    const Schedule low = lower(s);
    for (const Schedule* x : {&s, &low}) {
      const PeriodicLists lists = compress(*x);
      ASSERT_EQ(lists.ranks.size(), static_cast<std::size_t>(P));
      EXPECT_EQ(lists.size(), x->size()) << test::case_name(name, P, M, v);
      for (int r = 0; r < P; ++r) {
        EXPECT_EQ(expand(lists, r), x->ranks[r]) << test::case_name(name, P, M, v) << " rank " << r;
        for (const Segment& g : lists.ranks[r]) {
          ASSERT_GT(g.length, 0u);
          // A pattern never ends inside an FB pair (the last action of a list aside).
          EXPECT_FALSE(g.reps > 1 && lists.pool[g.begin + g.length - 1].overlap_next());
        }
      }
    }
    // Compute only: the lowered lists without SEND/RECV.
    const PeriodicLists comp = compress(low, true);
    for (int r = 0; r < P; ++r)
      EXPECT_EQ(expand(comp, r), s.ranks[r]) << test::case_name(name, P, M, v);
  });
}

TEST(Periodic, OneFOneBIsThreeSegmentsPerRank) {
  const Schedule s = generate("1f1b", {8, 1024, 1});
  const PeriodicLists lists = compress(s);
  for (int r = 0; r < 8; ++r) {
    EXPECT_LE(lists.ranks[r].size(), 3u) << "rank " << r;
    EXPECT_LE(lists.pool.size(), 8u * 4);
  }
}

TEST(Periodic, RandomListsRoundTrip) {
  std::mt19937 rng(7);
  Schedule s = make_schedule("random", 1, 64, 1);
  s.chunk_rank = {0, 0, 0};
  s.chunk_stage = {0, 1, 2};
  s.routes.assign(64, Route{0, 2});
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Action> list;
    const int n = static_cast<int>(rng() % 300);
    for (int i = 0; i < n; ++i) {
      // Runs of a few shapes with micro-batch steps, broken at random.
      const Op op = static_cast<Op>(rng() % 4);
      const int chunk = static_cast<int>(rng() % 3);
      const int reps = 1 + static_cast<int>(rng() % 8), step = static_cast<int>(rng() % 3);
      for (int k = 0; k < reps && i < n; ++k, ++i)
        list.push_back(make_action(op, chunk, (5 + k * step) % 64, rng() % 5 == 0 ? 1 : 0));
    }
    s.ranks = {list};
    const PeriodicLists lists = compress(s);
    EXPECT_EQ(expand(lists, 0), list) << "trial " << trial;
  }
}

void expect_same(const SimResult& a, const SimResult& b, const std::string& w) {
  ASSERT_EQ(a.ranks.size(), b.ranks.size()) << w;
  for (std::size_t r = 0; r < a.ranks.size(); ++r) {
    EXPECT_EQ(a.ranks[r].busy, b.ranks[r].busy) << w << " rank " << r;
    EXPECT_EQ(a.ranks[r].first_start, b.ranks[r].first_start) << w << " rank " << r;
    EXPECT_EQ(a.ranks[r].last_end, b.ranks[r].last_end) << w << " rank " << r;
    EXPECT_EQ(a.ranks[r].peak_activations, b.ranks[r].peak_activations) << w << " rank " << r;
  }
  EXPECT_EQ(a.single.span, b.single.span) << w;
  EXPECT_EQ(a.single.idle_total, b.single.idle_total) << w;
  EXPECT_EQ(a.steady.span, b.steady.span) << w;
  EXPECT_EQ(a.steady.idle_total, b.steady.idle_total) << w;
  EXPECT_EQ(a.busy_sum, b.busy_sum) << w;
  EXPECT_EQ(a.t_ideal, b.t_ideal) << w;
  EXPECT_EQ(a.p2p_messages, b.p2p_messages) << w;
}

struct CostCase {
  double f, b, w, fb, latency, optimizer;
  int steps;
};

// The periodic engine against the plain one, bit for bit, on every built-in schedule (compute
// lists and lowered ones), with costs that make pipelines uneven and link and optimizer times.
// The engine's messages in flight: the rings (grown, and past kMaxRing the overflow) hold what a
// map holds, through puts, overwrites, erases by place and by key, and clears.
TEST(Periodic, ChannelSlotsHoldWhatAMapHolds) {
  std::mt19937 rng(7);
  ChannelSlots slots;
  slots.reset(6);
  std::map<std::uint64_t, double> ref;
  const auto check_all = [&] {
    ASSERT_EQ(slots.size(), ref.size());
    std::map<std::uint64_t, double> seen;
    slots.for_each([&](std::uint64_t k, double t) { EXPECT_TRUE(seen.emplace(k, t).second); });
    EXPECT_EQ(seen, ref);
  };
  for (int round = 0; round < 4; ++round) {
    // Micro-batch windows from 2 (the rings' own) to 3000 (past kMaxRing: the overflow).
    const std::uint32_t window = round == 0 ? 2 : round == 1 ? 40 : round == 2 ? 700 : 3000;
    for (int op = 0; op < 20000; ++op) {
      const auto ch = static_cast<std::uint32_t>(rng() % 6);
      const auto mb = static_cast<std::uint32_t>(rng() % window);
      const std::uint64_t k = ChannelSlots::key(ch, mb);
      ASSERT_EQ(ChannelSlots::channel_of(k), ch);
      ASSERT_EQ(ChannelSlots::mb_of(k), mb);
      const int what = static_cast<int>(rng() % 3);
      if (what == 0) {
        const double t = static_cast<double>(op);
        slots.put(k, t);
        ref[k] = t;
      } else {
        const ChannelSlots::Where w = slots.locate(k);
        const auto it = ref.find(k);
        ASSERT_EQ(slots.found(w), it != ref.end()) << "channel " << ch << " mb " << mb;
        const double* f = slots.find(k);
        ASSERT_EQ(f != nullptr, it != ref.end());
        if (it == ref.end()) continue;
        EXPECT_EQ(slots.time_at(k, w), it->second);
        EXPECT_EQ(*f, it->second);
        if (what == 1)
          slots.erase_at(k, w);
        else
          slots.erase(k);
        ref.erase(it);
      }
    }
    check_all();
    if (round == 2) {
      slots.clear();
      ref.clear();
      check_all();
    }
  }
}

TEST(Periodic, SimulatorMatchesThePlainEngine) {
  const std::vector<CostCase> cases = {{1, 2, 0, -1, 0, 0, 2},
                                       {1, 1, 1, -1, 0, 0, 3},
                                       {0.5, 1.25, 0.75, -1, 0.25, 1.5, 2},
                                       {3, 1, 2, 4.5, 0.125, 0, 4},
                                       // an optimizer time with no binary form: no jumps
                                       {1, 2, 0, -1, 0, 1.0 / 3, 3}};
  std::map<std::string, std::size_t> jumped;
  std::size_t compared = 0;
  for_each_schedule([&](const std::string& name, int P, int M, int v, const Schedule& s) {
    const Schedule low = lower(s);
    const PeriodicSchedule plow = lower(to_periodic(s));
    for (const CostCase& c : cases)
      for (const Schedule* x : {&s, &low}) {
        SimConfig cfg;
        cfg.t_f = {c.f};
        cfg.t_b = {c.b};
        cfg.t_w = {c.w};
        cfg.t_fb = c.fb;
        cfg.latency = c.latency;
        cfg.optimizer_time = c.optimizer;
        cfg.steps = c.steps;
        cfg.engine = SimConfig::Engine::plain;
        const SimResult plain = simulate(*x, cfg);
        cfg.engine = SimConfig::Engine::periodic;
        const SimResult periodic = simulate(*x, cfg);
        EXPECT_EQ(plain.jumped_units, 0u);
        if (c.optimizer == 1.0 / 3) {
          EXPECT_EQ(periodic.jumped_units, 0u);
        }
        expect_same(plain, periodic,
                    test::case_name(name, P, M, v) + (x == &low ? " lowered" : ""));
        if (x == &low)  // the lowered lists in periodic form, simulated as such
          expect_same(plain, simulate(plow, cfg),
                      test::case_name(name, P, M, v) + " periodic form");
        jumped[name] += periodic.jumped_units;
        ++compared;
      }
  });
  EXPECT_GT(compared, 500u);
  // The jumps were taken: 1F1B repeats itself from its second F/B pair on; ZB-H1's and ZB-V's
  // ranks start their periodic parts at different places in the pattern (fences per rank).
  // GPipe jumps in both its parts (phases), interleaved over its blocks of 2·v·P actions,
  // DualPipe with each chunk's route (its two directions share no chunk).
  for (const char* name :
       {"1f1b", "zb-h1", "zb-h2", "zb-v", "dualpipev", "gpipe", "interleaved", "dualpipe"})
    EXPECT_GT(jumped[name], 0u) << name;
}

// Lowering with the periodic unit-time pass gives the plain pass's lists, action for action.
TEST(Periodic, LoweringMatchesThePlainUnitPass) {
  struct Restore {
    std::size_t old = periodic_lower_min_actions;
    ~Restore() { periodic_lower_min_actions = old; }
  } restore;
  std::size_t compared = 0, without_order = 0;
  for_each_schedule([&](const std::string& name, int P, int M, int v, const Schedule& s) {
    periodic_lower_min_actions = ~std::size_t{0};
    const Schedule plain = lower(s);
    periodic_lower_min_actions = 0;
    const Schedule periodic = lower(s);
    EXPECT_EQ(plain, periodic) << test::case_name(name, P, M, v);
    EXPECT_TRUE(timed_dry_run(periodic).ok) << test::case_name(name, P, M, v);
    without_order += !periodic.compute_order;  // the periodic pass ran
    ++compared;
  });
  EXPECT_GT(compared, 100u);
  EXPECT_GT(without_order, compared / 4);
}

// Lowering in periodic form gives lower()'s lists.
TEST(Periodic, PeriodicLoweringGivesTheSameLists) {
  std::size_t compared = 0, shorter = 0;
  for_each_schedule([&](const std::string& name, int P, int M, int v, const Schedule& s) {
    const Schedule flat = lower(s);
    const PeriodicSchedule p = lower(to_periodic(s));
    EXPECT_TRUE(p.shape.lowered);
    const Schedule back = to_flat(p);
    EXPECT_TRUE(back == flat) << test::case_name(name, P, M, v);
    const DryRunResult proof = timed_dry_run(p);
    EXPECT_TRUE(proof.ok) << test::case_name(name, P, M, v) << proof.message;
    if (!(back == flat))
      for (int r = 0; r < P; ++r)
        if (back.ranks[r] != flat.ranks[r]) {
          ADD_FAILURE() << "rank " << r << " differs";
          break;
        }
    shorter += p.lists.pool.size() * 4 < flat.size();
    ++compared;
  });
  EXPECT_GT(compared, 100u);
  EXPECT_GT(shorter, 10u);
}

// A random rank of p, its segments, one of them and its pattern: what a breakage changes.
struct Picked {
  int r;
  std::vector<Segment>& segs;
  Segment& g;
  Action* pattern;
};
Picked pick(PeriodicSchedule& p, int P, std::mt19937& rng) {
  const int r = static_cast<int>(rng() % P);
  auto& segs = p.lists.ranks[r];
  Segment& g = segs[rng() % segs.size()];
  return {r, segs, g, &p.lists.pool[g.begin]};
}

// The proof on the segments agrees with the flat one, also on lists broken at random: in a
// pattern (so in every repetition, walked or passed), in a repetition count, or by an extra
// message action anywhere (a message of a passed repetition sent or received twice).
TEST(Periodic, ProofAgreesWithTheFlatOneOnBrokenLists) {
  std::mt19937 rng(11);
  std::size_t broken = 0, tried = 0, passed_reps = 0, out_of_order = 0;
  for (const auto& [name, P, M] : {std::tuple<std::string, int, int>{"1f1b", 4, 64},
                                   {"1f1b", 8, 128},
                                   {"gpipe", 4, 64},
                                   {"zb-h1", 4, 64},
                                   {"naive", 3, 32}}) {
    const PeriodicSchedule good = lower(to_periodic(generate(name, {P, M, 1})));
    const DryRunResult ok = timed_dry_run(good);
    ASSERT_TRUE(ok.ok) << name << ok.message;
    for (const Segment& g : good.lists.ranks[P / 2]) passed_reps += g.reps >= 4 ? g.reps - 3 : 0;
    for (int trial = 0; trial < 150; ++trial) {
      PeriodicSchedule bad = good;
      auto [r, segs, g, pattern] = pick(bad, P, rng);
      switch (rng() % 5) {
        case 0:  // two neighbours in a pattern swapped
          if (g.length >= 2) {
            const std::uint32_t k = static_cast<std::uint32_t>(rng() % (g.length - 1));
            std::swap(pattern[k], pattern[k + 1]);
          }
          break;
        case 1:  // a micro-batch moved (in an action of a walked repetition, often onto one of a
                 // passed repetition: one message twice, another never)
          pattern[rng() % g.length].mb = static_cast<std::uint32_t>(rng() % M);
          break;
        case 2:  // one repetition more or less
          g.reps = rng() % 2 ? g.reps + 1 : std::max(1u, g.reps - 1);
          break;
        case 3: {  // an extra SEND/RECV of some message, as a segment of its own
          const Op ops[] = {Op::SEND_F, Op::RECV_F, Op::SEND_B, Op::RECV_B};
          const Action a = make_action(ops[rng() % 4], r, static_cast<int>(rng() % M));
          const auto at = segs.begin() + static_cast<std::ptrdiff_t>(rng() % (segs.size() + 1));
          segs.insert(at, Segment{static_cast<std::uint32_t>(bad.lists.pool.size()), 1, 1, 0});
          bad.lists.pool.push_back(a);
          break;
        }
        default:  // a pattern action dropped
          if (g.length >= 2) {
            std::rotate(pattern + rng() % g.length, pattern + g.length - 1, pattern + g.length);
            --g.length;
          }
      }
      const DryRunResult flat = timed_dry_run(to_flat(bad));
      const DryRunResult periodic = timed_dry_run(bad);
      EXPECT_EQ(flat.ok, periodic.ok) << name << " trial " << trial << "\nflat: " << flat.message
                                      << "\nperiodic: " << periodic.message;
      broken += !flat.ok;
      // Valid lists that break the order of message times: the proof's own finding.
      out_of_order += !flat.ok && flat.message.rfind("invalid schedule", 0) != 0;
      ++tried;
    }
  }
  EXPECT_GT(passed_reps, 100u);  // the proof had repetitions to pass
  EXPECT_GT(broken, tried / 2);
  EXPECT_GT(out_of_order, 10u);
}

// Validation on the segments says "valid" only where validate() does, also on lists broken at
// random, and is sure of the built-in schedules that repeat themselves.
TEST(Periodic, SegmentValidationIsNeverWrong) {
  std::size_t sure = 0, schedules = 0;
  for_each_schedule([&](const std::string&, int, int, int, const Schedule& s) {
    sure += surely_valid(to_periodic(s));
    ++schedules;
  });
  EXPECT_GT(sure, schedules / 2);
  std::mt19937 rng(5);
  std::size_t wrongly_sure = 0, tried = 0;
  for (const auto& [name, P, M] : {std::tuple<std::string, int, int>{"1f1b", 4, 64},
                                   {"1f1b", 8, 128},
                                   {"gpipe", 4, 32},
                                   {"zb-h1", 4, 64},
                                   {"zb-h2", 4, 64}}) {
    const PeriodicSchedule good = to_periodic(generate(name, {P, M, 1}));
    ASSERT_TRUE(surely_valid(good)) << name;
    for (int trial = 0; trial < 300; ++trial) {
      PeriodicSchedule bad = good;
      auto [r, segs, g, pattern] = pick(bad, P, rng);
      switch (rng() % 5) {
        case 0:
          if (g.length >= 2) std::swap(pattern[0], pattern[g.length - 1]);
          break;
        case 1:
          pattern[rng() % g.length].mb = static_cast<std::uint32_t>(rng() % M);
          break;
        case 2:
          g.reps = rng() % 2 ? g.reps + 1 : std::max(1u, g.reps - 1);
          break;
        case 3:
          g.mb_step = g.mb_step == 0 ? 1 : -g.mb_step;
          break;
        default:
          pattern[rng() % g.length].op = static_cast<Op>(rng() % 4);
      }
      const bool flat_ok = validate(to_flat(bad)).ok();
      const bool periodic_sure = surely_valid(bad);
      wrongly_sure += periodic_sure && !flat_ok;
      EXPECT_FALSE(periodic_sure && !flat_ok) << name << " trial " << trial;
      ++tried;
    }
  }
  EXPECT_EQ(wrongly_sure, 0u);
  EXPECT_GT(tried, 1000u);
}

// Lists of one rank and one chunk, M = 40, from (op, first micro-batch, step, reps) segments.
PeriodicSchedule one_rank(std::initializer_list<std::tuple<Op, int, int, int>> segs) {
  PeriodicSchedule p;
  p.shape = make_schedule("t", 1, 40, 1);
  set_looped_placement(p.shape);
  p.lists.ranks.resize(1);
  for (const auto& [op, mb, step, reps] : segs) {
    p.lists.ranks[0].push_back({static_cast<std::uint32_t>(p.lists.pool.size()), 1,
                                static_cast<std::uint32_t>(reps), step});
    p.lists.pool.push_back(make_action(op, 0, mb));
  }
  return p;
}

// Broken lists whose counts come out right, each caught only by one of the segment checks.
TEST(Periodic, SegmentValidationCatchesWhatCountsMiss) {
  const auto check = [](const PeriodicSchedule& p, const char* what) {
    EXPECT_FALSE(validate(to_flat(p)).ok()) << what;
    EXPECT_FALSE(surely_valid(p)) << what;
  };
  ASSERT_TRUE(surely_valid(one_rank({{Op::F, 0, 1, 40}, {Op::B, 0, 1, 40}, {Op::W, 0, 1, 40}})));
  ASSERT_TRUE(validate(to_flat(one_rank({{Op::F, 0, 1, 40}, {Op::BW, 0, 1, 40}}))).ok());
  // W 16..19 twice (in the passed repetitions of two segments), W 36..39 never.
  check(one_rank({{Op::F, 0, 1, 40}, {Op::B, 0, 1, 40}, {Op::W, 0, 1, 20}, {Op::W, 35, -1, 20}}),
        "passed twice");
  // B 3..39 passed before their F.
  check(one_rank({{Op::F, 0, 1, 3}, {Op::BW, 0, 1, 40}, {Op::F, 3, 1, 37}}), "B before F");
  // BW 10 walked, then passed again; BW 39 never.
  check(one_rank({{Op::F, 0, 1, 40}, {Op::BW, 10, 1, 1}, {Op::BW, 0, 1, 39}}),
        "walked, then passed");
}

// The periodic engine jumps over more than 9/10 of two steps of `name` at P=8, v=1, with the
// plain engine's results.
void expect_jumps_over_most(const std::string& name, int M) {
  const Schedule s = generate(name, {8, M, 1});
  SimConfig cfg;
  cfg.steps = 2;
  cfg.engine = SimConfig::Engine::periodic;
  const SimResult r = simulate(s, cfg);
  EXPECT_GT(r.jumped_units, s.compute_size() * 2 * 9 / 10);  // of 2 steps
  cfg.engine = SimConfig::Engine::plain;
  expect_same(simulate(s, cfg), r, test::case_name(name, 8, M, 1));
}

TEST(Periodic, JumpsOverMostOfALongOneFOneB) {
  expect_jumps_over_most("1f1b", 4096);
}

// DualPipe's two directions are two routes that share no chunk: the periodic engine takes each
// action's route from its chunk and jumps over most of both directions' F/B pairs.
TEST(Periodic, DualPipeJumpsWithRoutesByChunk) {
  const Schedule s = generate("dualpipe", {8, 1024, 1});
  ASSERT_FALSE(s.uniform_routes());
  SimConfig cfg;
  cfg.steps = 2;
  cfg.t_fb = 2.5;
  cfg.engine = SimConfig::Engine::periodic;
  const SimResult r = simulate(s, cfg);
  EXPECT_GT(r.jumped_units, s.compute_size() / 2);  // of 2 steps (a pair is one unit)
  const SimResult rp = simulate(to_periodic(s), cfg);
  EXPECT_EQ(rp.jumped_units, r.jumped_units);
  cfg.engine = SimConfig::Engine::plain;
  const SimResult plain = simulate(s, cfg);
  expect_same(plain, r, "dualpipe P=8 M=1024");
  expect_same(plain, rp, "dualpipe P=8 M=1024, periodic form");
}

// Interleaved repeats a block of 2·v·P actions on every rank, P micro-batches on each time:
// compress() finds it as one long pattern, every pass keeps the results.
TEST(Periodic, InterleavedBlocksAreOneLongPattern) {
  const int P = 8, M = 128, v = 2;
  const Schedule s = generate("interleaved", {P, M, v});
  const PeriodicSchedule ps = to_periodic(s);
  EXPECT_TRUE(to_flat(ps) == s);
  for (int r = 0; r < P; ++r) {
    const auto& segs = ps.lists.ranks[r];
    const bool block = std::any_of(segs.begin(), segs.end(), [&](const Segment& g) {
      return g.length == 2u * v * P && g.reps >= kMinReps && g.mb_step == P;
    });
    EXPECT_TRUE(block) << "rank " << r;
  }
  EXPECT_TRUE(surely_valid(ps));
  SimConfig cfg;
  cfg.steps = 3;
  const SimResult r = simulate(ps, cfg);
  EXPECT_GT(r.jumped_units, s.compute_size() * 3 / 2);  // more than half of 3 steps
  cfg.engine = SimConfig::Engine::plain;
  expect_same(simulate(s, cfg), r, "interleaved P=8 M=128 v=2");
  const PeriodicSchedule low = lower(ps);
  EXPECT_TRUE(to_flat(low) == lower(s));
  EXPECT_TRUE(timed_dry_run(low).ok);
}

// GPipe's forwards and backwards are two periodic parts of a step: both are jumped over.
TEST(Periodic, GpipeJumpsInBothParts) {
  expect_jumps_over_most("gpipe", 1024);
}

// Segments that split an FB pair (hand-made; compress() never does): the periodic passes take
// the flat lists' way, with the flat results.
TEST(Periodic, SegmentsSplittingAnFbPairGetTheFlatResults) {
  const auto split_pair = [](PeriodicSchedule& ps) {
    for (auto& segs : ps.lists.ranks)
      for (std::size_t i = 0; i < segs.size(); ++i) {
        const Segment g = segs[i];
        if (g.reps != 1) continue;
        for (std::uint32_t k = 0; k + 1 < g.length; ++k)
          if (ps.lists.pool[g.begin + k].overlap_next()) {
            Segment a = g, b = g;
            a.length = k + 1;
            b.begin = g.begin + k + 1;
            b.length = g.length - k - 1;
            segs[i] = a;
            segs.insert(segs.begin() + static_cast<std::ptrdiff_t>(i) + 1, b);
            return true;
          }
      }
    return false;
  };
  const Schedule s = generate("dualpipev", {4, 64, 1});
  PeriodicSchedule ps = to_periodic(s);
  ASSERT_TRUE(split_pair(ps));
  ASSERT_TRUE(to_flat(ps) == s);
  EXPECT_FALSE(pairs_whole(ps.lists));
  SimConfig cfg;
  cfg.t_f = {1};
  cfg.t_b = {2};
  cfg.t_w = {1};
  cfg.t_fb = 2.5;
  cfg.steps = 2;
  cfg.engine = SimConfig::Engine::periodic;
  expect_same(simulate(ps, cfg), simulate(s, cfg), "dualpipev, a pair split");
  EXPECT_TRUE(to_flat(lower(ps)) == lower(s));
  PeriodicSchedule low = lower(to_periodic(s));
  ASSERT_TRUE(split_pair(low));
  EXPECT_TRUE(timed_dry_run(low).ok) << timed_dry_run(low).message;
}

// Steps after the first are recorded from step 0 without running step 1 where they are step 0
// moved (every rank's end tight from the source's start, no rank starting step 1 too late):
// three of four steps jumped whole, the plain engine's results.
TEST(Periodic, LaterStepsComeFromTheFirst) {
  const Schedule s = generate("1f1b", {8, 256, 1});
  SimConfig cfg;
  cfg.steps = 4;
  cfg.engine = SimConfig::Engine::periodic;
  const SimResult r = simulate(s, cfg);
  EXPECT_GE(r.jumped_units, s.compute_size() * 3);
  cfg.engine = SimConfig::Engine::plain;
  expect_same(simulate(s, cfg), r, "1f1b P=8 M=256");
}

// Where the last rank ends later than the source's end plus its own start (ZB-H1 with a slow W
// on the last stage), step 1 is no shift of step 0: it is run, with the plain engine's results.
TEST(Periodic, LaterStepsRunWhereALateRankHoldsThemUp) {
  const Schedule s = generate("zb-h1", {4, 16, 1});
  SimConfig cfg;
  cfg.t_f = {1};
  cfg.t_b = {1};
  cfg.steps = 2;
  cfg.engine = SimConfig::Engine::periodic;
  for (const double last_w : {1.0, 50.0}) {
    cfg.t_w = {1, 1, 1, last_w};
    const SimResult r = simulate(s, cfg);
    // Step 1 skipped: all of it jumped; run: less (each step jumps less than half of itself).
    if (last_w == 1) {
      EXPECT_GE(r.jumped_units, s.compute_size());
    } else {
      EXPECT_LT(r.jumped_units, s.compute_size());
    }
    cfg.engine = SimConfig::Engine::plain;
    const SimResult plain = simulate(s, cfg);
    cfg.engine = SimConfig::Engine::periodic;
    expect_same(plain, r, "zb-h1 P=4 M=16, last W " + std::to_string(last_w));
    if (last_w == 50) {
      EXPECT_LT(plain.steady.span, plain.single.span);  // the steps overlap
    }
  }
}

// Per-chunk costs (each chunk its own F, B and W): the periodic engine against the plain one on
// every built-in schedule, over four steps.
TEST(Periodic, SimulatorMatchesThePlainEngineWithPerChunkCosts) {
  std::size_t compared = 0;
  for_each_schedule([&](const std::string& name, int P, int M, int v, const Schedule& s) {
    const auto C = static_cast<std::size_t>(s.num_chunks());
    SimConfig cfg;
    cfg.t_f.assign(C, 1);
    cfg.t_b.assign(C, 2);
    cfg.t_w.assign(C, 1);
    for (std::size_t c = 0; c < C; ++c) {
      cfg.t_f[c] = 1 + static_cast<double>(c % 3) * 0.5;
      cfg.t_w[c] = c + 1 == C ? 8 : static_cast<double>(c % 2);
    }
    cfg.latency = 0.25;
    cfg.steps = 4;
    cfg.engine = SimConfig::Engine::plain;
    const SimResult plain = simulate(s, cfg);
    cfg.engine = SimConfig::Engine::periodic;
    expect_same(plain, simulate(s, cfg), test::case_name(name, P, M, v) + " per-chunk costs");
    ++compared;
  });
  EXPECT_GT(compared, 100u);
}

// Costs with no exact binary form would make J·λ differ from J additions: the plain engine.
TEST(Periodic, InexactCostsUseThePlainEngine) {
  const Schedule s = generate("1f1b", {4, 256, 1});
  SimConfig cfg;
  cfg.t_f = {0.1};
  cfg.t_b = {0.3};
  cfg.engine = SimConfig::Engine::periodic;
  const SimResult r = simulate(s, cfg);
  EXPECT_EQ(r.jumped_units, 0u);
  cfg.engine = SimConfig::Engine::plain;
  expect_same(simulate(s, cfg), r, "1f1b 0.1/0.3");
}

// A cyclic wait is still reported (by the plain engine the periodic one hands over to).
TEST(Periodic, CyclicWaitIsStillReported) {
  // Rank 0 runs micro-batch 0 to the end first; rank 1 wants micro-batch 1 first.
  Schedule s = generate("naive", {2, 64, 1});
  s.ranks[1] = {make_action(Op::F, 1, 1), make_action(Op::BW, 1, 1), make_action(Op::F, 1, 0),
                make_action(Op::BW, 1, 0)};
  for (int m = 2; m < 64; ++m) {
    s.ranks[1].push_back(make_action(Op::F, 1, m));
    s.ranks[1].push_back(make_action(Op::BW, 1, m));
  }
  SimConfig cfg;
  cfg.engine = SimConfig::Engine::periodic;
  try {
    simulate(s, cfg);
    FAIL() << "expected a cyclic wait";
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("cyclic wait"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace bb
