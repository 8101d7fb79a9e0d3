// The CLI's shared pieces (bench/cli): number formats, cost lists, sweeps one configuration at
// a time, and what the closed forms and the message count give beside the simulator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "cli/list.hpp"
#include "cli/table.hpp"
#include "common/error.hpp"
#include "model/closed_form.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/text.hpp"
#include "sim/sim.hpp"

namespace bb {
namespace {

TEST(CliFormat, IntegersExactlyEverywhere) {
  EXPECT_EQ(fmt(524160), "524160");
  EXPECT_EQ(fmt(12345), "12345");
  EXPECT_EQ(fmt(0), "0");
  EXPECT_EQ(fmt(-37044), "-37044");
  EXPECT_EQ(fmt(0.27272727), "0.2727");  // the table rounds what is not an integer
  EXPECT_EQ(fmt_exact(524160), "524160");
  EXPECT_EQ(fmt_exact(1e15), "1000000000000000");
}

TEST(CliFormat, CsvValuesReadBackExactly) {
  for (double x : {0.2727272727272727, 1.0 / 3, 2.5e-300, 1e300, 192.17578125, 0.1 + 0.2})
    EXPECT_EQ(std::stod(fmt_exact(x)), x) << fmt_exact(x);
}

TEST(CliLists, NumberListsRejectEmptyItemsAndNonFinite) {
  EXPECT_EQ(parse_number_list("1,2.5,0", "--t-f"), (std::vector<double>{1, 2.5, 0}));
  for (const char* bad : {"", "1,", ",1", "1,,2", "nan", "inf", "-1", "1e400", "2ms"}) {
    try {
      parse_number_list(bad, "--t-f");
      ADD_FAILURE() << "'" << bad << "' parsed";
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--t-f: '", 0), 0u) << e.what();
    }
  }
}

TEST(CliSweep, OneConfigurationAtATimeWithNotesAndDistinctSkips) {
  std::vector<std::string> seen, lines;
  for_each_schedule(
      "1f1b,interleaved", 3, {7, 6}, {2, 3}, true,
      [&](const std::string& name, Schedule s) {
        seen.push_back(name + " M=" + std::to_string(s.M) + " v=" + std::to_string(s.v));
      },
      [&](std::string_view kind, const std::string& line) {
        lines.push_back(std::string(kind) + ": " + line);
      });
  EXPECT_EQ(seen, (std::vector<std::string>{"1f1b M=7 v=1", "1f1b M=6 v=1", "interleaved M=6 v=2",
                                            "interleaved M=6 v=3"}));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "note: 1f1b: -v does not apply to it (it runs with v=1)");
  EXPECT_EQ(lines[1],
            "skip: interleaved: M must split into max(1, M/P) equal rounds, as in PyTorch (got "
            "M=7, P=3, v=2)");
  EXPECT_EQ(lines[2],
            "skip: interleaved: M must split into max(1, M/P) equal rounds, as in PyTorch (got "
            "M=7, P=3, v=3)");
}

TEST(CliSweep, NothingAcceptedIsOneErrorAndNoLines) {
  std::vector<std::string> lines;
  try {
    for_each_schedule(
        "dualpipe", 3, {4, 6}, {1}, true, [](const std::string&, Schedule) {},
        [&](std::string_view, const std::string& line) { lines.push_back(line); });
    ADD_FAILURE() << "nothing to run, yet no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("dualpipe: P must be even"), std::string::npos);
  }
  EXPECT_TRUE(lines.empty());
}

TEST(CliSweep, AbsurdSweepsAreRefusedBeforeBuildingAnything) {
  int used = 0;
  std::vector<int> Ms;
  for (int M = 1; M <= 100000; ++M) Ms.push_back(M);
  try {
    for_each_schedule(
        "1f1b", 4, Ms, {1}, true, [&](const std::string&, Schedule) { ++used; },
        [](std::string_view, const std::string&) {});
    ADD_FAILURE() << "refused nothing";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("40000400000 compute actions (at most 8589934592)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(used, 0);
  const std::size_t takes_v =
      std::count_if(schedule_names().begin(), schedule_names().end(),
                    [](const std::string& n) { return schedule_takes_v(n); });
  EXPECT_EQ(sweep_combinations("all", {8, 16}, {1, 2, 4}),
            2 * (schedule_names().size() - takes_v) + 2 * 3 * takes_v);
}

TEST(CliSweep, LoweredCsvThatDeadlocksIsRefused) {
  Schedule s = lower(generate("1f1b", {4, 8, 1}));
  auto& r0 = s.ranks[0];
  const auto it = std::find_if(r0.begin(), r0.end(), [](const Action& a) {
    return a.op == Op::RECV_B && a.chunk == 0 && a.mb == 0;
  });
  ASSERT_NE(it, r0.end());
  std::rotate(r0.begin(), it, it + 1);  // receive a gradient before sending anything
  const std::string path = ::testing::TempDir() + "bb_dead.csv";
  {
    std::ofstream f(path);
    dump_csv(s, f);
  }
  const auto say = [](std::string_view, const std::string&) {};
  int used = 0;
  try {
    for_each_schedule(
        "csv:" + path, 4, {8}, {1}, true, [&](const std::string&, Schedule) { ++used; }, say);
    ADD_FAILURE() << "a deadlocking lowered CSV was accepted";
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("fails its dry run"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("deadlock"), std::string::npos) << e.what();
  }
  EXPECT_EQ(used, 0);
  // show and validate take it as it is (they report on it themselves).
  for_each_schedule(
      "csv:" + path, 4, {8}, {1}, false, [&](const std::string&, Schedule) { ++used; }, say);
  EXPECT_EQ(used, 1);
  std::remove(path.c_str());
}

TEST(CliModel, UnevenStagesHaveNoClosedForm) {
  ModelInput in;
  in.schedule = "gpipe";
  in.P = 4;
  in.M = 8;
  EXPECT_TRUE(closed_form(in).applies);
  in.uniform_stages = false;
  const ModelResult m = closed_form(in);
  EXPECT_FALSE(m.applies);
  EXPECT_NE(m.reason.find("per-chunk"), std::string::npos);
}

TEST(CliModel, MessageCountMatchesTheSimulator) {
  for (const auto& name : schedule_names())
    for (int M : {8, 16}) {
      const Schedule s = generate(name, {4, M, 2});
      EXPECT_EQ(p2p_messages(s), simulate(s, {}).p2p_messages) << name << " M=" << M;
      EXPECT_GT(p2p_messages(s), 0u) << name;
    }
}

}  // namespace
}  // namespace bb
