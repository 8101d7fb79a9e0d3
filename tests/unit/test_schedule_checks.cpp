// Corrupted schedules are rejected with readable messages; CSV and the action language
// round-trip every built-in schedule exactly; the LIST syntax parses or fails clearly.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <sstream>
#include <tuple>

#include "cli/list.hpp"
#include "common/error.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/text.hpp"
#include "schedule/validate.hpp"
#include "sim/sim.hpp"

namespace bb {
namespace {

std::string describe(const Schedule& s) {
  return validate(s).describe(s);
}

std::size_t find_action(const std::vector<Action>& v, Op op, int chunk, int mb) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i].op == op && v[i].chunk == chunk && v[i].mb == static_cast<std::uint32_t>(mb)) return i;
  ADD_FAILURE() << "no " << op_name(op) << " chunk " << chunk << " mb " << mb;
  return 0;
}

TEST(Corrupt, SwappedOrderIsReportedOnTheGrid) {
  Schedule s = generate("1f1b", {4, 8, 1});
  auto& r1 = s.ranks[1];
  std::swap(r1[find_action(r1, Op::F, 1, 0)], r1[find_action(r1, Op::BW, 1, 0)]);
  const ValidationReport rep = validate(s);
  ASSERT_FALSE(rep.ok());
  const std::string msg = rep.describe(s);
  EXPECT_NE(msg.find("rank 1 step 0: 1BW0: backward before forward of chunk 1 micro-batch 0"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find(">>1BW0<<"), std::string::npos) << "marked in the grid:\n" << msg;
  EXPECT_THROW(lower(s), ScheduleError);
}

TEST(Corrupt, MissingW) {
  Schedule s = generate("zb-h1", {4, 8, 1});
  auto& r2 = s.ranks[2];
  r2.erase(r2.begin() + static_cast<std::ptrdiff_t>(find_action(r2, Op::W, 2, 5)));
  const std::string msg = describe(s);
  EXPECT_NE(msg.find("missing W of chunk 2 micro-batch 5 (rank 2)"), std::string::npos) << msg;
}

TEST(Corrupt, WrongRankAndDuplicate) {
  Schedule s = generate("gpipe", {2, 2, 1});
  s.ranks[0].push_back(make_action(Op::F, 1, 0));
  s.ranks[1].push_back(make_action(Op::BW, 1, 1));
  const std::string msg = describe(s);
  EXPECT_NE(msg.find("chunk 1 lives on rank 1, not rank 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("duplicate BW of chunk 1 micro-batch 1"), std::string::npos) << msg;
}

TEST(Corrupt, RecvWithoutSend) {
  Schedule s = lower(generate("1f1b", {3, 3, 1}));
  auto& r0 = s.ranks[0];
  r0.erase(r0.begin() + static_cast<std::ptrdiff_t>(find_action(r0, Op::SEND_F, 0, 1)));
  const std::string msg = describe(s);
  EXPECT_NE(msg.find("missing SEND_F of chunk 0 micro-batch 1 (rank 0) to rank 1"),
            std::string::npos)
      << msg;
  // In-order matching per peer pair would now pair micro-batch 2's send with 1's receive.
  const DryRunResult dr = dry_run(s);
  EXPECT_FALSE(dr.ok);
  EXPECT_NE(dr.message.find("rank 0 sends 0SEND_F2 to rank 1, whose next receive from it is "
                            "1RECV_F1: in-order matching would deliver the wrong tensor"),
            std::string::npos)
      << dr.message;
  const DryRunResult timed = timed_dry_run(s);
  EXPECT_FALSE(timed.ok);
  EXPECT_NE(timed.message.find("missing SEND_F of chunk 0 micro-batch 1"), std::string::npos)
      << timed.message;
}

TEST(Corrupt, TimedDryRunRejectsWhatTheSearchRejects) {
  const Schedule good = lower(generate("1f1b", {4, 6, 1}));
  ASSERT_TRUE(timed_dry_run(good).ok) << timed_dry_run(good).message;
  // A receive posted twice, and one never posted.
  Schedule s = good;
  auto& r2 = s.ranks[2];
  r2[find_action(r2, Op::RECV_F, 2, 3)] = make_action(Op::RECV_F, 2, 2);
  DryRunResult timed = timed_dry_run(s);
  EXPECT_FALSE(timed.ok);
  EXPECT_NE(timed.message.find("duplicate RECV_F of chunk 2 micro-batch 2"), std::string::npos)
      << timed.message;
  EXPECT_FALSE(dry_run(s).ok);
  // A send before its forward: its data does not exist yet.
  s = good;
  auto& r1 = s.ranks[1];
  const std::size_t send = find_action(r1, Op::SEND_F, 1, 0);
  const Action moved = r1[send];
  r1.erase(r1.begin() + static_cast<std::ptrdiff_t>(send));
  r1.insert(r1.begin() + static_cast<std::ptrdiff_t>(find_action(r1, Op::F, 1, 0)), moved);
  timed = timed_dry_run(s);
  EXPECT_FALSE(timed.ok);
  EXPECT_NE(timed.message.find("1SEND_F0"), std::string::npos) << timed.message;
  // A send moved before a receive of the same unit time from a lower rank: out of the global
  // order. (Harmless here, so the search accepts it: the timed dry run proves, it does not
  // search, and may reject what a search would allow.)
  s = good;
  auto& r1b = s.ranks[1];
  const std::size_t recv2 = find_action(r1b, Op::RECV_F, 1, 2);
  ASSERT_EQ(r1b[recv2 + 1], make_action(Op::SEND_F, 1, 1));
  std::swap(r1b[recv2], r1b[recv2 + 1]);
  ASSERT_TRUE(validate(s).ok()) << describe(s);
  timed = timed_dry_run(s);
  EXPECT_FALSE(timed.ok);
  EXPECT_NE(timed.message.find("rank 1 step " + std::to_string(recv2 + 1) +
                               " 1RECV_F2: out of the order of message times"),
            std::string::npos)
      << timed.message;
  EXPECT_TRUE(dry_run(s).ok);
  // Not lowered, or not valid: no proof.
  EXPECT_FALSE(timed_dry_run(generate("1f1b", {4, 6, 1})).ok);
  s = good;
  s.ranks[0].pop_back();
  EXPECT_FALSE(timed_dry_run(s).ok);
}

TEST(Corrupt, CyclicWaitInComputeOrder) {
  // Rank 0 runs micro-batch 0 to the end before starting 1; rank 1 wants 1 first.
  Schedule s = generate("naive", {2, 2, 1});
  s.ranks[1] = parse_actions("1F1,1BW1,1F0,1BW0");
  ASSERT_TRUE(validate(s).ok()) << describe(s);  // statically fine: the cycle is dynamic
  try {
    lower(s);
    FAIL() << "expected a deadlock";
  } catch (const ScheduleError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cyclic wait"), std::string::npos) << msg;
    EXPECT_NE(
        msg.find(
            "rank 0 step 1 waits at 0BW0 for the gradient of chunk 1 micro-batch 0 from rank 1"),
        std::string::npos)
        << msg;
    EXPECT_NE(
        msg.find("rank 1 step 0 waits at 1F1 for the forward output of chunk 0 micro-batch 1"),
        std::string::npos)
        << msg;
  }
  EXPECT_THROW(simulate(s, SimConfig{}), ScheduleError);
}

TEST(Corrupt, CommOrderMismatchAndCommDeadlock) {
  const Schedule good = lower(generate("gpipe", {2, 3, 1}));
  // Swap two sends to the same peer: in-order matching would deliver the wrong tensor.
  Schedule s = good;
  auto& r0 = s.ranks[0];
  const std::size_t s1 = find_action(r0, Op::SEND_F, 0, 1);
  const Action send1 = r0[s1];
  r0.erase(r0.begin() + static_cast<std::ptrdiff_t>(s1));
  r0.insert(r0.begin() + static_cast<std::ptrdiff_t>(find_action(r0, Op::SEND_F, 0, 2)) + 1, send1);
  ASSERT_TRUE(validate(s).ok()) << describe(s);
  DryRunResult dr = dry_run(s);
  EXPECT_FALSE(dr.ok);
  EXPECT_NE(dr.message.find("wrong tensor"), std::string::npos) << dr.message;
  EXPECT_NE(timed_dry_run(s).message.find("0SEND_F1: out of the order of message times"),
            std::string::npos)
      << timed_dry_run(s).message;
  // Post rank 0's first gradient receive before its forward sends: both comm streams then
  // wait to receive, each from the other.
  Schedule t = good;
  auto& r0t = t.ranks[0];
  const std::size_t rb = find_action(r0t, Op::RECV_B, 0, 0);
  const Action moved = r0t[rb];
  r0t.erase(r0t.begin() + static_cast<std::ptrdiff_t>(rb));
  r0t.insert(r0t.begin(), moved);
  ASSERT_TRUE(validate(t).ok()) << describe(t);
  dr = dry_run(t);
  EXPECT_FALSE(dr.ok);
  EXPECT_NE(dr.message.find("deadlock: no rank can make progress"), std::string::npos)
      << dr.message;
  const DryRunResult timed = timed_dry_run(t);
  EXPECT_FALSE(timed.ok);
  EXPECT_NE(timed.message.find("0SEND_F0: out of the order of message times"), std::string::npos)
      << timed.message;
  EXPECT_NE(dr.message.find("comm waits at 0RECV_B0 (step 0) from rank 1"), std::string::npos)
      << dr.message;
  EXPECT_NE(dr.message.find("comm waits at 1RECV_F0 (step 0) from rank 0"), std::string::npos)
      << dr.message;
}

// The timed dry run is a proof: whenever it accepts a lowered schedule, the searching dry run
// must too. Random moves of one SEND/RECV action (which sometimes keep the order of message
// times, sometimes not) on every built-in schedule; both outcomes must occur.
TEST(Corrupt, TimedDryRunNeverAcceptsWhatTheSearchRejects) {
  std::mt19937 rng(7);
  int accepted = 0, rejected = 0;
  for (const char* name :
       {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipe", "dualpipev"}) {
    const Schedule good = lower(generate(name, {4, 8, 2}));
    for (int trial = 0; trial < 150; ++trial) {
      Schedule s = good;
      auto& list = s.ranks[rng() % s.P];
      std::vector<std::size_t> comm;
      for (std::size_t i = 0; i < list.size(); ++i)
        if (is_comm(list[i].op)) comm.push_back(i);
      if (comm.empty()) continue;
      const std::size_t from = comm[rng() % comm.size()];
      const Action moved = list[from];
      list.erase(list.begin() + static_cast<std::ptrdiff_t>(from));
      const std::size_t lo = from >= 3 ? from - 3 : 0;
      const std::size_t to = std::min(list.size(), lo + rng() % 7);
      list.insert(list.begin() + static_cast<std::ptrdiff_t>(to), moved);
      if (!validate(s).ok()) continue;
      const DryRunResult timed = timed_dry_run(s);
      if (timed.ok) {
        ++accepted;
        EXPECT_TRUE(dry_run(s).ok) << name << ": timed dry run accepted a deadlock:\n"
                                   << format_grid(s, -1, 0, 64);
      } else {
        ++rejected;
      }
    }
  }
  EXPECT_GT(accepted, 50);
  EXPECT_GT(rejected, 50);
}

TEST(Text, ParsesEveryKindAndRejectsGarbage) {
  const auto acts = parse_actions("0F3, 5B1 5W1,2BW0,(0F4;3BW1)FB,1SEND_F3,2RECV_B0");
  ASSERT_EQ(acts.size(), 8u);
  EXPECT_EQ(format_actions(acts), "0F3,5B1,5W1,2BW0,(0F4;3BW1)FB,1SEND_F3,2RECV_B0");
  EXPECT_TRUE(acts[4].overlap_next());
  // Actions keep micro-batch numbers in 16 bits and chunk numbers in 12: the largest of each
  // parses, one more is refused rather than wrapped around.
  EXPECT_EQ(format_actions(parse_actions("4095F65535,0RECV_B65535")), "4095F65535,0RECV_B65535");
  for (const char* bad : {"F3", "0X3", "0F", "(0F1;1F2)FB", "(0F1;1B2", "99999999F1",
                          "0F99999999999", "4096F0", "0F65536"}) {
    try {
      parse_actions(bad);
      ADD_FAILURE() << bad << " parsed";
    } catch (const ScheduleError& e) {
      EXPECT_NE(std::string(e.what()).find("bad action"), std::string::npos) << e.what();
    }
  }
}

TEST(Csv, EveryBuiltInRoundTripsAndSimulatesIdentically) {
  SimConfig cfg;
  cfg.t_f = {1};
  cfg.t_b = {1.5};
  cfg.t_w = {0.5};
  for (const auto& name : schedule_names())
    for (int P : {2, 4}) {
      const int M = 4 * P;
      const Schedule s = generate(name, {P, M, 2});
      for (const Schedule& x : {s, lower(s)}) {
        std::istringstream in(dump_csv(x));
        const Schedule back = load_csv(in);
        EXPECT_TRUE(back == x) << name << " P=" << P << (x.lowered ? " lowered" : "");
        EXPECT_DOUBLE_EQ(simulate(back, cfg).single.span, simulate(x, cfg).single.span) << name;
      }
    }
}

TEST(Limits, MicroBatchesAndChunksThatActionsCannotHold) {
  for (const auto& [name, p] : {std::pair<std::string, ScheduleParams>{"1f1b", {4, 65537, 1}},
                                {"interleaved", {1024, 2048, 8}},
                                {"zb-v", {4096, 8192, 1}}}) {
    try {
      generate(name, p);
      ADD_FAILURE() << name << " accepted";
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(name + ":", 0), 0u) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
  // Called directly, every generator refuses them too (the placements check): looped and V.
  EXPECT_THROW(generate("gpipe", {2, 70000, 1}), ConfigError);
  EXPECT_THROW(generate("zb-v", {4096, 8192, 1}), ConfigError);
  EXPECT_THROW(generate("dualpipev", {8, 70000, 1}), ConfigError);
  EXPECT_EQ(generate("1f1b", {2, 65536, 1}).ranks[1].back(), make_action(Op::BW, 1, 65535));
}

// make_action() builds the word the bit-fields hold, truncating as they do.
TEST(Limits, MakeActionIsTheBitFieldsAction) {
  for (const auto& [op, chunk, mb, flags] : {std::tuple<Op, int, int, int>{Op::F, 0, 0, 0},
                                             {Op::BW, 4095, 65535, 1},
                                             {Op::RECV_B, 17, 300, 1},
                                             {Op::W, 4096 + 3, 65536 + 9, 2}}) {
    Action a;
    a.op = op;
    a.chunk = static_cast<std::uint32_t>(chunk) & 0xFFFu;
    a.mb = static_cast<std::uint32_t>(mb) & 0xFFFFu;
    a.flags = static_cast<std::uint32_t>(flags) & 1u;
    const Action b = make_action(op, chunk, mb, static_cast<std::uint8_t>(flags));
    EXPECT_EQ(b, a) << to_string(a);
    EXPECT_EQ(b.op, op);
  }
}

TEST(Csv, ErrorsNameTheLine) {
  std::istringstream bad("# P=2\n0F0,0BW0\n1F0,1QQ0\n");
  try {
    load_csv(bad);
    FAIL();
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("CSV line 3"), std::string::npos) << e.what();
  }
  std::istringstream mismatch("# P=3\n0F0,0BW0\n1F0,1BW0\n");
  EXPECT_THROW(load_csv(mismatch), ScheduleError);
  std::istringstream empty("# nothing\n");
  EXPECT_THROW(load_csv(empty), ScheduleError);
  EXPECT_THROW(load_csv_file("/nonexistent/x.csv"), IoError);
  std::istringstream huge("# M=4294967295\n0F0\n");
  EXPECT_THROW(load_csv(huge), ScheduleError);
  std::istringstream wide("# P=1\n# v=65535\n# M=65535\n0F0\n");
  EXPECT_THROW(load_csv(wide), ScheduleError);
}

TEST(List, Syntax) {
  EXPECT_EQ(parse_int_list("4,8,16", "-M"), (std::vector<int>{4, 8, 16}));
  EXPECT_EQ(parse_int_list("4:64:x2", "-M"), (std::vector<int>{4, 8, 16, 32, 64}));
  EXPECT_EQ(parse_int_list("2:8:2", "-M"), (std::vector<int>{2, 4, 6, 8}));
  EXPECT_EQ(parse_int_list("1,4:16:x2,4", "-M"), (std::vector<int>{1, 4, 8, 16}));
  for (const char* bad :
       {"", "0", "-1", "4:2:1", "4:64:x1", "a", "4,,8", "4:8", "1:2:3:4", "1.5", "99999999999"}) {
    try {
      parse_int_list(bad, "-M");
      ADD_FAILURE() << "'" << bad << "' parsed";
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("-M: '", 0), 0u) << e.what();
    }
  }
  EXPECT_DOUBLE_EQ(parse_duration("2ms", "--t-f", true), 0.002);
  EXPECT_DOUBLE_EQ(parse_duration("1.5", "--t-f", false), 1.5);
  EXPECT_THROW(parse_duration("2ms", "--t-f", false), ConfigError);
  EXPECT_THROW(parse_duration("-1", "--t-f", true), ConfigError);
}

}  // namespace
}  // namespace bb
