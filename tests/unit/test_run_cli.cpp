// Pure helpers of `bubblebench run` (bench/cli/run.hpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/run.hpp"

namespace bb {
namespace {

TEST(RunSharedGpu, OneGpuPerRankIsNotShared) {
  EXPECT_EQ(shared_gpu_note({"a", "a", "a"}, {0, 1, 2}), "");
  EXPECT_EQ(shared_gpu_note({"a", "b"}, {0, 0}), "");  // GPU 0 of two different nodes
  EXPECT_EQ(shared_gpu_note({}, {}), "");
  EXPECT_EQ(shared_gpu_note({"a"}, {0}), "");
}

TEST(RunSharedGpu, NamesTheRanksOfTheFirstSharedGpu) {
  EXPECT_EQ(shared_gpu_note({"vm", "vm"}, {0, 0}), "ranks 0 and 1 share GPU 0 on vm");
  EXPECT_EQ(shared_gpu_note({"n1", "n1", "n1", "n1"}, {0, 1, 0, 0}),
            "ranks 0, 2 and 3 share GPU 0 on n1");
  EXPECT_EQ(shared_gpu_note({"n1", "n1", "n2", "n2"}, {0, 1, 1, 1}),
            "ranks 2 and 3 share GPU 1 on n2");
}

TEST(RunSharedGpu, MismatchedLengthsUseTheCommonPrefix) {
  EXPECT_EQ(shared_gpu_note({"vm", "vm", "vm"}, {0, 0}), "ranks 0 and 1 share GPU 0 on vm");
  EXPECT_EQ(shared_gpu_note({"vm"}, {0, 0}), "");
}

}  // namespace
}  // namespace bb
