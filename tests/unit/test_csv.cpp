// Schedules as text from outside: PyTorch's pipelining CSV read and written (docs/csv.md),
// CSV files with a byte-order mark or control bytes, and validate's exact problem count.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "common/error.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/text.hpp"
#include "schedule/validate.hpp"
#include "sim/sim.hpp"

namespace bb {
namespace {

CsvSchedule read(const std::string& text) {
  std::istringstream in(text);
  return read_csv(in);
}

// Everything of a schedule but its name (PyTorch's format has no header to carry one).
void expect_same_but_name(Schedule a, Schedule b, const std::string& what) {
  a.name = b.name = "";
  EXPECT_TRUE(a == b) << what << "\n"
                      << format_actions(a.ranks[0]) << "\n"
                      << format_actions(b.ranks[0]);
}

// The message of the ScheduleError that reading `text` throws.
std::string read_error(const std::string& text) {
  try {
    read(text);
  } catch (const ScheduleError& e) {
    return e.what();
  }
  ADD_FAILURE() << "read: " << text;
  return {};
}

// A 2-rank schedule as PyTorch writes one: no header, CRLF, an empty cell for an idle step,
// FSDP's UNSHARD/RESHARD, I + W split backward, full backward B, and an overlapped pair.
constexpr const char* kHandWritten =
    "0UNSHARD,0F0,0F1,,0I0,0W0,(0F2;0B1)OVERLAP_F_B,0B2,0RESHARD\r\n"
    "1UNSHARD,1F0,1I0,1F1,1B1,1W0,1F2,1B2,1RESHARD\r\n";

TEST(PytorchCsv, HandWrittenFileLoadsValidatesAndSimulates) {
  const CsvSchedule csv = read(kHandWritten);
  EXPECT_EQ(csv.format, CsvFormat::pytorch);
  const Schedule& s = csv.schedule;
  EXPECT_EQ(s.P, 2);
  EXPECT_EQ(s.M, 3);
  EXPECT_EQ(s.v, 1);
  EXPECT_EQ(placement_name(s), "looped");
  EXPECT_FALSE(s.lowered);
  // I is bubblebench's B, PyTorch's B (full backward) is BW, the pair is an FB pair.
  EXPECT_EQ(format_actions(s.ranks[0]), "0F0,0F1,0B0,0W0,(0F2;0BW1)FB,0BW2");
  EXPECT_EQ(format_actions(s.ranks[1]), "1F0,1B0,1F1,1BW1,1W0,1F2,1BW2");
  EXPECT_EQ(csv.note,
            "PyTorch's CSV format: 4 actions without compute left out (2 RESHARD, 2 UNSHARD); "
            "bubblebench adds its own communication");
  EXPECT_TRUE(validate(s).ok()) << validate(s).describe(s);
  SimConfig cfg;
  cfg.t_f = {1};
  cfg.t_b = {1};
  cfg.t_w = {1};
  const SimResult r = simulate(s, cfg);
  EXPECT_GT(r.single.span, 0);
  EXPECT_DOUBLE_EQ(r.single.span, simulate(lower(s), cfg).single.span);
}

TEST(PytorchCsv, VPlacementIsInferredFromTheStageRankMap) {
  // Stages 0 and 3 on rank 0, 1 and 2 on rank 1: a V.
  const CsvSchedule csv = read("0F0,3F0,3B0,0B0\n1F0,2F0,2B0,1B0\n");
  EXPECT_EQ(placement_name(csv.schedule), "v");
  EXPECT_EQ(csv.schedule.v, 2);
  EXPECT_TRUE(csv.note.empty());
  EXPECT_TRUE(validate(csv.schedule).ok());
  // Stages 0 and 2 on rank 0, 1 and 3 on rank 1: looped, v = 2.
  const CsvSchedule looped = read("0F0,2F0,2B0,0B0\n1F0,3F0,3B0,1B0\n");
  EXPECT_EQ(placement_name(looped.schedule), "looped");
  EXPECT_EQ(looped.schedule.v, 2);
  EXPECT_TRUE(validate(looped.schedule).ok());
  // Neither: named in one line.
  const std::string msg = read_error("0F0,1F0,1B0,0B0\n2F0,2B0\n");
  EXPECT_NE(msg.find("neither looped"), std::string::npos) << msg;
  EXPECT_NE(msg.find("stage 1 is on rank 0, not 1"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_NE(read_error("0F0,0B0\n0F1,0B1\n").find("stage 0 is on rank 0 and on rank 1"),
            std::string::npos);
}

TEST(PytorchCsv, DialectIsToldApartAndBNeverMeansInputGradientOnly) {
  // No header, B without W: PyTorch's full backward.
  const CsvSchedule full = read("0F0,0B0\n1F0,1B0\n");
  EXPECT_EQ(full.format, CsvFormat::pytorch);
  EXPECT_EQ(full.schedule.ranks[1][1].op, Op::BW);
  EXPECT_TRUE(validate(full.schedule).ok());
  // B with W and no I: bubblebench's (PyTorch's W needs an I).
  const CsvSchedule split = read("0F0,0B0,0W0\n1F0,1B0,1W0\n");
  EXPECT_EQ(split.format, CsvFormat::native);
  EXPECT_EQ(split.schedule.ranks[1][1].op, Op::B);
  // A header, BW or (..)FB: bubblebench's.
  EXPECT_EQ(read("# P=2\n0F0,0BW0\n1F0,1BW0\n").format, CsvFormat::native);
  EXPECT_EQ(read("0F0,0BW0\n1F0,1BW0\n").format, CsvFormat::native);
  // Both dialects' tokens in one file: refused.
  EXPECT_NE(read_error("0F0,0I0,0W0\n1F0,1BW0\n").find("mixes"), std::string::npos);
}

TEST(PytorchCsv, BadTokensAreNamed) {
  for (const char* bad : {"0F0,0X1\n", "0F0,0I\n", "0F0,(0F1;0F2)OVERLAP_F_B\n",
                          "0F0,(0F1;0B0)FOO\n", "0F0,(0F1;0I0;0W0)OVERLAP_F_B\n", "F0,0I0\n"}) {
    const std::string msg = read_error(bad);
    EXPECT_NE(msg.find("CSV line 1: bad action"), std::string::npos) << bad << ": " << msg;
  }
  EXPECT_NE(read_error("0UNSHARD,0RESHARD\n").find("no compute action"), std::string::npos);
}

// show --format pytorch-csv, read back through csv:, gives the schedule itself, for every
// family PyTorch's format holds (DualPipe's two model copies it cannot: refused).
TEST(PytorchCsv, EveryScheduleRoundTrips) {
  int tried = 0;
  for (const auto& name : schedule_names())
    for (int P : {1, 2, 3, 4})
      for (int M : {1, 3, 4, 8, 12})
        for (int v : {1, 2, 3}) {
          Schedule s;
          try {
            s = generate(name, {P, M, v});
          } catch (const ConfigError&) {
            continue;
          }
          const std::string what = name + " P=" + std::to_string(P) + " M=" + std::to_string(M) +
                                   " v=" + std::to_string(v);
          if (placement_name(s) == "dualpipe") {
            EXPECT_THROW(dump_pytorch_csv(s), ConfigError) << what;
            continue;
          }
          const std::string text = dump_pytorch_csv(s);
          EXPECT_EQ(dump_pytorch_csv(lower(s)), text) << what;  // compute actions only
          const CsvSchedule back = read(text);
          EXPECT_EQ(back.format, CsvFormat::pytorch) << what;
          EXPECT_TRUE(back.note.empty()) << what;
          expect_same_but_name(back.schedule, s, what);
          ++tried;
        }
  EXPECT_GT(tried, 200);
}

// What PyTorch's ScheduleDualPipeV (module torch.distributed.pipelining.schedules, PyTorch
// commit 00722e6) writes with _dump_csv for 4 ranks and 8 micro-batches: its order, computed by
// its _calculate_single_rank_operations, and its CSV dialect, byte for byte.
constexpr const char* kPytorchDualPipeV =
    "0F0,0F1,0F2,0F3,0F4,0F5,0F6,7F0,7I0,7W0,7F1,7I1,7W1,7F2,7I2,7W2,7F3,(0F7;7B3)OVERLAP_F_B,(7F4;"
    "0B0)OVERLAP_F_B,7B4,(7F5;0B1)OVERLAP_F_B,7B5,(7F6;0B2)OVERLAP_F_B,7B6,(7F7;0B3)OVERLAP_F_B,"
    "7B7,0I4,0W4,0I5,0W5,0I6,0W6,0I7,0W7\r\n"
    "1F0,1F1,1F2,1F3,1F4,6F0,1F5,6F1,6I0,6W0,6F2,6I1,6W1,6F3,(1F6;6B2)OVERLAP_F_B,(6F4;1B0)OVERLAP_"
    "F_B,(1F7;6B3)OVERLAP_F_B,(6F5;1B1)OVERLAP_F_B,6B4,(6F6;1B2)OVERLAP_F_B,6B5,(6F7;1B3)OVERLAP_F_"
    "B,6B6,1B4,6I7,1I5,6W7,1I6,1W5,1I7,1W6,1W7\r\n"
    "2F0,2F1,2F2,5F0,2F3,5F1,2F4,5F2,5I0,5W0,5F3,(2F5;5B1)OVERLAP_F_B,(5F4;2B0)OVERLAP_F_B,(2F6;"
    "5B2)OVERLAP_F_B,(5F5;2B1)OVERLAP_F_B,(2F7;5B3)OVERLAP_F_B,(5F6;2B2)OVERLAP_F_B,5B4,(5F7;2B3)"
    "OVERLAP_F_B,5B5,2B4,5B6,2I5,5I7,2I6,2W5,2I7,5W7,2W6,2W7\r\n"
    "3F0,4F0,3F1,4F1,3F2,4F2,3F3,4F3,3F4,4B0,(4F4;3B0)OVERLAP_F_B,(3F5;4B1)OVERLAP_F_B,(4F5;3B1)"
    "OVERLAP_F_B,(3F6;4B2)OVERLAP_F_B,(4F6;3B2)OVERLAP_F_B,(3F7;4B3)OVERLAP_F_B,(4F7;3B3)OVERLAP_F_"
    "B,4B4,3B4,4B5,3B5,4I6,3I6,4I7,3I7,4W6,3W6,4W7,3W7\r\n";

TEST(PytorchCsv, ReadsAFileWrittenByPytorchAndWritesItBack) {
  const CsvSchedule csv = read(kPytorchDualPipeV);
  EXPECT_EQ(csv.format, CsvFormat::pytorch);
  EXPECT_TRUE(validate(csv.schedule).ok()) << validate(csv.schedule).describe(csv.schedule);
  const Schedule ours = generate("dualpipev", {4, 8, 1});
  expect_same_but_name(csv.schedule, ours, "PyTorch's DualPipeV, P=4 M=8");
  EXPECT_EQ(dump_pytorch_csv(csv.schedule), kPytorchDualPipeV);
  EXPECT_EQ(dump_pytorch_csv(ours), kPytorchDualPipeV);
}

TEST(PytorchCsv, WritesPytorchsExactForm) {
  EXPECT_EQ(dump_pytorch_csv(generate("1f1b", {2, 2, 1})),
            "0F0,0F1,0B0,0B1\r\n1F0,1B0,1F1,1B1\r\n");
  EXPECT_EQ(dump_pytorch_csv(generate("zb-h1", {2, 2, 1})),
            "0F0,0F1,0I0,0W0,0I1,0W1\r\n1F0,1I0,1F1,1I1,1W0,1W1\r\n");
  const std::string dpv = dump_pytorch_csv(generate("dualpipev", {2, 4, 1}));
  EXPECT_NE(dpv.find(",(0F3;3B1)OVERLAP_F_B,"), std::string::npos) << dpv;
}

TEST(CsvBytes, ByteOrderMarkIsSkipped) {
  const std::string bom = "\xEF\xBB\xBF";
  const Schedule native = read(bom + dump_csv(generate("1f1b", {2, 4, 1}))).schedule;
  EXPECT_EQ(native.name, "1f1b");
  EXPECT_TRUE(validate(native).ok());
  const CsvSchedule pt = read(bom + dump_pytorch_csv(generate("zb-v", {2, 4, 1})));
  EXPECT_EQ(pt.format, CsvFormat::pytorch);
  EXPECT_TRUE(validate(pt.schedule).ok());
  // Only at the very start.
  EXPECT_NE(read_error("0F0,0BW0\n" + bom + "1F0,1BW0\n").find("\\xef\\xbb\\xbf"),
            std::string::npos);
}

TEST(CsvBytes, ControlBytesAreEscapedInOneLine) {
  for (const std::string& text :
       {std::string("# P=2\n0F0,0B\0W0\n", 16), std::string("0F0\x01,0BW0\n"),
        std::string("0F0,0BW0\n\x1b[31m1F0\n"), std::string("0F0,0I0\x7f\n")}) {
    const std::string msg = read_error(text);
    EXPECT_NE(msg.find("control byte \\x"), std::string::npos) << msg;
    EXPECT_TRUE(std::all_of(msg.begin(), msg.end(), [](char c) { return c >= 0x20 && c < 0x7f; }))
        << msg;
  }
  EXPECT_NE(read_error(std::string("# P=2\n0F0,0B\0W0\n", 16))
                .find("CSV line 2: control byte "
                      "\\x00 at column 7"),
            std::string::npos);
  // A token with bytes beyond ASCII is named escaped.
  const std::string msg = read_error(
      "0F0,0\xc3\xa9"
      "1\n");
  EXPECT_NE(msg.find("bad action '0\\xc3\\xa91'"), std::string::npos) << msg;
}

TEST(ValidateCount, EveryMissingActionIsCounted) {
  Schedule s = generate("zb-h1", {4, 16, 1});
  for (auto& r : s.ranks) std::erase_if(r, [](const Action& a) { return a.op == Op::W; });
  const ValidationReport rep = validate(s);
  EXPECT_EQ(rep.total, 64u);  // 4 chunks x 16 micro-batches, each missing its W
  EXPECT_EQ(rep.issues.size(), 8u);
  const std::string msg = rep.describe(s);
  EXPECT_NE(msg.find("is invalid: 64 problems"), std::string::npos) << msg;
  EXPECT_NE(msg.find("... and 56 more"), std::string::npos) << msg;
  // A larger cap shows more and counts the same.
  EXPECT_EQ(validate(s, 100).issues.size(), 64u);
  EXPECT_EQ(validate(s, 100).total, 64u);
}

TEST(ValidateCount, ActionProblemsAndMissingOnesAddUp) {
  // Two duplicates (per-action problems) and everything of chunk 3 missing on rank 3.
  Schedule s = generate("1f1b", {4, 8, 1});
  s.ranks[0].push_back(s.ranks[0].front());
  s.ranks[1].push_back(s.ranks[1].front());
  s.ranks[3].clear();
  const ValidationReport rep = validate(s, 3);
  // Rank 3's F and BW of 8 micro-batches: F, B and W missing for each.
  EXPECT_EQ(rep.total, 2u + 8u * 3u);
  EXPECT_EQ(rep.issues.size(), 3u);
}

}  // namespace
}  // namespace bb
