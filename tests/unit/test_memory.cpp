// The up-front memory estimate of `run` (harness/memory.hpp) and the trace file names of long
// run keys (harness/output.hpp).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "harness/memory.hpp"
#include "harness/output.hpp"
#include "schedule/generators.hpp"

namespace bb::harness {
namespace {

RunConfig one_config(const RunSettings& o, const char* schedule, int P, int M, int hidden) {
  std::vector<NamedSchedule> named{{schedule, generate(schedule, ScheduleParams{P, M, 1})}};
  ModelLists lists;
  lists.hidden = {hidden};
  return make_configs(std::move(named), lists, o, P).at(0);
}

TEST(HarnessMemory, WeightsGradientsAndActivationsOfTheRanksChunks) {
  const RunSettings o;
  const RunConfig c = one_config(o, "1f1b", 2, 8, 64);
  const MemoryNeed n = memory_need(c, o, 0);
  EXPECT_EQ(n.weights, 8.0 * 64 * 64 * 4);  // W1 and W2 of one block, fp32
  EXPECT_EQ(n.gradients, n.weights);
  EXPECT_EQ(n.optimizer, 0);  // SGD
  // 1F1B's rank 0 holds P = 2 micro-batches between F and W: each its input copy (b·h floats)
  // and its saved tensors ((10·L − 1)·b·h, stage.hpp).
  EXPECT_EQ(n.activations, 2.0 * 10 * 8 * 64 * 4);
  // Its messages: during an F the made input and the output (sends complete when posted).
  EXPECT_EQ(n.buffers, 2.0 * 8 * 64 * 4);
  EXPECT_EQ(n.reference, 0);
  // One chunk's scratch (b·h) and dA (4·b·h), fp32, and its loss (one float); no bf16 weight
  // copies on CPU.
  EXPECT_EQ(n.workspace, 5.0 * 8 * 64 * 4 + 4);
  EXPECT_EQ(n.bf16_copies, 0);
  EXPECT_EQ(n.total(), n.weights + n.gradients + n.activations + n.buffers + n.workspace);
}

TEST(HarnessMemory, Bf16HalvesActivationsBuffersAndWorkspaces) {
  RunSettings o;
  const RunConfig c = one_config(o, "1f1b", 2, 8, 64);
  const MemoryNeed f = memory_need(c, o, 0);
  o.dtype = Dtype::kBF16;
  const MemoryNeed b = memory_need(c, o, 0);
  EXPECT_EQ(b.weights, f.weights);  // fp32 master weights
  EXPECT_EQ(b.activations, f.activations / 2);
  EXPECT_EQ(b.buffers, f.buffers / 2);
  EXPECT_EQ(b.workspace - 4, (f.workspace - 4) / 2);  // the loss stays one fp32 float
  EXPECT_EQ(b.bf16_copies, 0);                        // the CPU keeps no bf16 weight copies
  o.backend = BackendKind::kCuda;
  EXPECT_EQ(memory_need(c, o, 0).bf16_copies, f.weights / 2);
}

TEST(HarnessMemory, AdamCheckAndSyntheticCompute) {
  RunSettings o;
  o.optimizer = OptimizerConfig::Kind::kAdam;
  o.check = true;
  const RunConfig c = one_config(o, "gpipe", 2, 4, 64);
  const MemoryNeed r0 = memory_need(c, o, 0), r1 = memory_need(c, o, 1);
  EXPECT_EQ(r0.optimizer, 2 * r0.weights);
  EXPECT_GE(r0.reference, 2 * 2 * r0.weights);  // the whole model and its gradients
  EXPECT_EQ(r1.reference, 0);                   // rank 0 only
  o.compute = Compute::kSynthetic;
  o.check = false;
  const MemoryNeed s = memory_need(one_config(o, "gpipe", 2, 4, 65536), o, 0);
  EXPECT_EQ(s.weights + s.gradients + s.optimizer + s.activations, 0);
  EXPECT_GT(s.buffers, 0);
  EXPECT_LT(s.total(), 1e9);  // messages only: --hidden 65536 fits in synthetic mode
}

TEST(HarnessMemory, TheHugeModelOfIssue23NeedsHundredsOfGiB) {
  const RunSettings o;
  const MemoryNeed n = memory_need(one_config(o, "1f1b", 2, 8, 65536), o, 0);
  EXPECT_EQ(n.weights, 8.0 * 65536 * 65536 * 4);  // 128 GiB
  EXPECT_EQ(bytes_text(n.weights), "128.0 GiB");
}

TEST(HarnessMemory, AvailableMemoryIsKnownOnLinux) {
  const auto a = memory_available();
  ASSERT_TRUE(a.has_value());
  EXPECT_GT(a->bytes, 0);
  EXPECT_FALSE(a->source.empty());
}

TEST(HarnessMemory, BytesText) {
  EXPECT_EQ(bytes_text(0), "0 B");
  EXPECT_EQ(bytes_text(1023), "1023 B");
  EXPECT_EQ(bytes_text(1536), "1.5 KiB");
  EXPECT_EQ(bytes_text(3.0 * (1 << 20)), "3.0 MiB");
}

TEST(HarnessTraceName, ShortKeysKeepTheirNameLongOnesFitWithAHash) {
  EXPECT_EQ(trace_file_name("1f1b_P=2"), "1f1b_P=2.json");
  const std::string a(300, 'a'), b = std::string(299, 'a') + "b";
  const std::string na = trace_file_name(a), nb = trace_file_name(b);
  EXPECT_LE(na.size(), 255u);
  EXPECT_NE(na, nb);
  EXPECT_EQ(na.substr(0, 220), a.substr(0, 220));
  EXPECT_EQ(na.substr(na.size() - 5), ".json");
  EXPECT_EQ(trace_file_name(std::string(250, 'k')), std::string(250, 'k') + ".json");
  EXPECT_EQ(trace_file_name(std::string(251, 'k')).size(), 220u + 1 + 16 + 5);
}

}  // namespace
}  // namespace bb::harness
