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
