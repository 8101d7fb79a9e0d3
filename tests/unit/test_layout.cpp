// Megatron-LM pipeline layout strings as --partition (model/layout.hpp).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "model/layout.hpp"

namespace bb {
namespace {

using Blocks = std::vector<int>;

TEST(Layout, ReadsBlocksPerStage) {
  EXPECT_EQ(parse_layout("Et*3|t*2,L"), (Blocks{3, 2}));
  EXPECT_EQ(parse_layout("Ettt|ttL"), (Blocks{3, 2}));
  EXPECT_EQ(parse_layout("E,t,t|t,L"), (Blocks{2, 1}));
  EXPECT_EQ(parse_layout("EtL"), (Blocks{1}));
  // Megatron's own example without its MTP stage, and its loss in a stage of its own replaced
  // by a last stage with one block.
  Blocks want{3};
  want.insert(want.end(), 29, 2);
  want.push_back(1);
  EXPECT_EQ(parse_layout("Et*3|(tt|)*29,t,L"), want);
  // Groups first, then characters (a group may hold x*N), counts of several digits.
  EXPECT_EQ(parse_layout("E(t*2|)*3t*12L"), (Blocks{2, 2, 2, 12}));
  EXPECT_EQ(parse_layout("Et|(t|t*3|)*2,tL"), (Blocks{1, 1, 3, 1, 3, 1}));
  // A count of 0 unrolls to nothing, as in Megatron.
  EXPECT_EQ(parse_layout("Ett*0|tL"), (Blocks{1, 1}));
}

TEST(Layout, WritesWhatItReads) {
  EXPECT_EQ(layout_text({3, 2}), "Et*3|t*2,L");
  EXPECT_EQ(layout_text({1}), "Et,L");
  EXPECT_EQ(layout_text({1, 4, 1}), "Et|t*4|t,L");
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    Blocks b(1 + rng() % 9);
    for (int& x : b) x = 1 + static_cast<int>(rng() % 12);
    EXPECT_EQ(parse_layout(layout_text(b)), b) << layout_text(b);
  }
}

TEST(Layout, TellsLayoutsFromIntegerLists) {
  EXPECT_TRUE(is_layout_string("Et*3|t*2,L"));
  EXPECT_TRUE(is_layout_string("(tt|)*2"));
  EXPECT_TRUE(is_layout_string("3|2"));
  EXPECT_FALSE(is_layout_string("3,2,2,1"));
  EXPECT_FALSE(is_layout_string("auto"));  // no layout letter: the integer list's error
}

// Each refusal is one line and says why.
TEST(Layout, RefusesBadStringsInOneLine) {
  const std::pair<const char*, const char*> bad[] = {
      {"Et*3|t*2", "no L"},
      {"t*3|t*2,L", "no E"},
      {"Et*3|m|t,L", "MTP"},
      {"Et*3|(tt|)*29,m|L", "MTP"},
      {"Et*3||t*2,L", "stage 1 holds no transformer layer"},
      {"Et*3|L", "stage 1 holds no transformer layer"},
      {"E|t*3,L", "stage 0 holds no transformer layer"},
      {"|Et*3|t,L", "first layer"},
      {"Et*3|t*2,L|t", "L (the loss) must be in the last stage"},
      {"Et*3|t*2,Lt", "L must be the last layer"},
      {"tEt|tL", "first layer"},
      {"EEt|tL", "E (the embedding) must appear once"},
      {"Et|tLL", "L (the loss) must appear once"},
      {"Et*|tL", "followed by a count"},
      {"*3Et|tL", "must follow a layer or a group"},
      {"Et*3*2|tL", "must follow a layer or a group"},
      {"Et*3|(t|t,L", "'(' without its ')'"},
      {"Et*3|t)*2,L", "')' without its '('"},
      {"Et|((t|)*2)*2,L", "nested parentheses"},
      {"Et|()*2,tL", "empty group"},
      {"Et*3|(t|)t,L", "a group must be repeated"},
      {"Et*3|tx,L", "unknown layer 'x'"},
      {"Et*3| t,L", "unknown layer ' '"},
      {"Et*9999999|tL", "count too large"},
      {"E(t*9999|)*999t,L", "too many layers"},
  };
  for (const auto& [text, why] : bad) {
    try {
      (void)parse_layout(text);
      ADD_FAILURE() << text << " was accepted";
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(why), std::string::npos) << text << ": " << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << text << ": " << msg;
      EXPECT_EQ(msg.rfind(std::string("layout '") + text + "': ", 0), 0u) << msg;
    }
  }
}

}  // namespace
}  // namespace bb
