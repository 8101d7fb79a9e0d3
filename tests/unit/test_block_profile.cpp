// The partitioner's profile (harness/block_profile.hpp) on the CPU backend: one cost per block,
// the same memory for blocks of one shape (parameters, gradients and one micro-batch's
// activations), the ends' memory at least their parameters, gradients and (head) logits'
// gradient, a measurable LM head, and no profile of synthetic chunks.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "harness/block_profile.hpp"
#include "runtime/cpu_backend.hpp"

namespace bb {
namespace {

ExecutorConfig tiny_lm(int vocab) {
  ExecutorConfig c;
  c.hidden = 16;
  c.mb_size = 2;
  TransformerConfig t;
  t.seq = 8;
  t.heads = 2;
  t.vocab = vocab;
  c.transformer = t;
  return c;
}

TEST(BlockProfile, EveryBlockAndBothEnds) {
  CpuBackend be;
  const int V = 4000, h = 16, S = 8, T = 2 * S;
  const PartitionCosts c = profile_blocks(be, tiny_lm(V), 3, 2);
  ASSERT_EQ(c.blocks.size(), 3u);
  ExecutorConfig one = tiny_lm(0);
  const double params = static_cast<double>(chunk_param_count(one)) * sizeof(float);
  for (const BlockCost& b : c.blocks) {
    EXPECT_GT(b.f, 0);
    EXPECT_GT(b.b, 0);
    EXPECT_GT(b.w, 0);
    EXPECT_GT(b.memory, 2 * params);  // and one micro-batch's activations
    EXPECT_EQ(b.memory, c.blocks[0].memory);
  }
  EXPECT_GE(c.first.memory, 2.0 * sizeof(float) * (V + S) * h);
  EXPECT_GE(c.last.memory, 2.0 * sizeof(float) * (2 * h + h * V) + sizeof(float) * T * V);
  // The head's GEMMs (T x h x V, three times) dwarf a block of width 16.
  EXPECT_GT(c.last.f, 0);
  EXPECT_GT(c.last.w, 0);
  // Without a vocabulary there are no ends.
  const PartitionCosts plain = profile_blocks(be, tiny_lm(0), 2, 1);
  EXPECT_EQ(plain.blocks.size(), 2u);
  EXPECT_EQ(plain.last.time(), 0);
  EXPECT_EQ(plain.last.memory, 0);
}

TEST(BlockProfile, MlpBlocksAndRefusals) {
  CpuBackend be;
  ExecutorConfig mlp;
  mlp.hidden = 8;
  mlp.mb_size = 4;
  const PartitionCosts c = profile_blocks(be, mlp, 2, 1);
  ASSERT_EQ(c.blocks.size(), 2u);
  EXPECT_GT(c.blocks[1].memory, 2.0 * sizeof(float) * 8 * 8 * 8);  // W1, W2 and their gradients
  mlp.synthetic = true;
  EXPECT_THROW(profile_blocks(be, mlp, 2, 1), ConfigError);
  mlp.synthetic = false;
  EXPECT_THROW(profile_blocks(be, mlp, 0, 1), ConfigError);
}

}  // namespace
}  // namespace bb
