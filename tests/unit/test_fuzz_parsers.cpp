// Property tests of the text parsers on random input: the action language / CSV schedule
// loader and the LIST syntax never crash or hang; every input either parses into something
// that survives validation as a value, or fails with a clear, one-line-headed error.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <sstream>

#include "cli/list.hpp"
#include "common/error.hpp"
#include "model/layout.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/text.hpp"
#include "schedule/validate.hpp"

namespace bb {
namespace {

std::string random_text(std::mt19937& rng, std::string_view alphabet, std::size_t max_len) {
  std::uniform_int_distribution<std::size_t> len(0, max_len);
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  std::string s(len(rng), ' ');
  for (char& c : s) c = alphabet[pick(rng)];
  return s;
}

// Mutates a valid text: flips, deletes, duplicates and inserts characters.
std::string mutate(std::mt19937& rng, std::string s, std::string_view alphabet) {
  std::uniform_int_distribution<int> ops(1, 6);
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  const int n = ops(rng);
  for (int i = 0; i < n && !s.empty(); ++i) {
    std::uniform_int_distribution<std::size_t> at(0, s.size() - 1);
    switch (rng() % 4) {
      case 0:
        s[at(rng)] = alphabet[pick(rng)];
        break;
      case 1:
        s.erase(at(rng), 1);
        break;
      case 2:
        s.insert(at(rng), 1, alphabet[pick(rng)]);
        break;
      default: {
        const std::size_t a = at(rng);
        s.insert(a, s.substr(a, rng() % 8));
      }
    }
  }
  return s;
}

TEST(Fuzz, ListSyntaxParsesOrFailsClearly) {
  std::mt19937 rng(12345);
  const std::string_view alpha = "0123456789,:x*-+. abk";
  int parsed = 0, rejected = 0;
  for (int i = 0; i < 20000; ++i) {
    const std::string in =
        i % 2 ? random_text(rng, alpha, 24) : mutate(rng, "4,8:64:x2,2:8:2", alpha);
    try {
      const auto v = parse_int_list(in, "-M");
      ASSERT_FALSE(v.empty()) << in;
      for (int x : v) ASSERT_GT(x, 0) << in;
      ++parsed;
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      ASSERT_EQ(msg.rfind("-M: '", 0), 0u) << msg;
      ASSERT_EQ(msg.find('\n'), std::string::npos) << msg;
      ++rejected;
    }
  }
  EXPECT_GT(parsed, 100);
  EXPECT_GT(rejected, 100);
}

// Megatron-LM layout strings (model/layout.hpp): blocks >= 1 per stage that read back the same
// from their own text, or one line starting with the layout.
TEST(Fuzz, LayoutStringsParseOrFailClearly) {
  std::mt19937 rng(2024);
  const std::string_view alpha = "EtLm|()*,0123 x";
  int parsed = 0, rejected = 0;
  for (int i = 0; i < 20000; ++i) {
    const std::string in =
        i % 2 ? random_text(rng, alpha, 24) : mutate(rng, "Et*3|(tt|)*2,t*2,L", alpha);
    try {
      const std::vector<int> blocks = parse_layout(in);
      ASSERT_FALSE(blocks.empty()) << in;
      for (int b : blocks) ASSERT_GT(b, 0) << in;
      ASSERT_EQ(parse_layout(layout_text(blocks)), blocks) << in;
      ++parsed;
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      ASSERT_EQ(msg.rfind("layout '" + in + "': ", 0), 0u) << msg;
      ASSERT_EQ(msg.find('\n'), std::string::npos) << msg;
      ++rejected;
    }
  }
  EXPECT_GT(parsed, 100);
  EXPECT_GT(rejected, 100);
}

TEST(Fuzz, ScheduleCsvLoadsOrFailsClearly) {
  std::mt19937 rng(777);
  // Both dialects (PyTorch's: I, OVERLAP_F_B, UNSHARD, CRLF), a byte-order mark, NUL, ESC.
  const std::string alpha =
      std::string("0123456789FBWSENDRCV_(),;# =\nPMvplacementIOLAPUH\r\xef\xbb\xbf\x1b") + '\0';
  std::vector<std::string> seeds;
  for (const char* n : {"1f1b", "zb-v", "dualpipe", "interleaved", "dualpipev"}) {
    const Schedule s = generate(n, {2, 4, 2});
    seeds.push_back(dump_csv(s));
    seeds.push_back(dump_csv(lower(s)));
    if (n != std::string_view("dualpipe")) seeds.push_back(dump_pytorch_csv(s));
  }
  int loaded = 0, valid = 0, rejected = 0;
  for (int i = 0; i < 6000; ++i) {
    const std::string text =
        i % 3 == 0 ? random_text(rng, alpha, 80) : mutate(rng, seeds[rng() % seeds.size()], alpha);
    std::istringstream in(text);
    Schedule s;
    try {
      s = load_csv(in);
      ++loaded;
    } catch (const ScheduleError& e) {
      // One line, no raw control byte (issue 23).
      const std::string msg = e.what();
      ASSERT_FALSE(msg.empty());
      ASSERT_TRUE(std::none_of(msg.begin(), msg.end(), [](char c) {
        return (c >= 0 && c < 0x20) || c == 0x7f;
      })) << msg;
      ++rejected;
      continue;
    }
    // Whatever loaded must validate (or be rejected with a report) and, when valid, either
    // lower or report a deadlock: never crash.
    const ValidationReport rep = validate(s);
    if (!rep.ok()) {
      ASSERT_FALSE(rep.describe(s).empty());
      continue;
    }
    ++valid;
    if (s.lowered) {
      (void)dry_run(s);
    } else {
      try {
        (void)lower(s);
      } catch (const ScheduleError&) {
      }
    }
  }
  EXPECT_GT(loaded, 100);
  EXPECT_GT(rejected, 100);
  EXPECT_GT(valid, 10);
}

}  // namespace
}  // namespace bb
