// MPI_Finalize under a deadline (src/runtime/mpi_finalize.hpp), without MPI: the finalize is a
// callable that returns, or one that does not return for 30 s (as good as never against a
// 0.3 s bound; finite so that the test fails rather than hangs when the bound is gone).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "runtime/mpi_finalize.hpp"

namespace bb::mpi {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

TEST(Finalize, ReturnsTheRunsCodeWhenFinalizeReturns) {
  int calls = 0;
  const auto t0 = Clock::now();
  EXPECT_EQ(finalize_within([&] { ++calls; }, 30, 5, "never printed"), 5);
  EXPECT_EQ(calls, 1);
  EXPECT_LT(seconds_since(t0), 5);  // the watchdog does not hold the return until its deadline
  // A finalize that takes a while, within the bound, is waited for.
  EXPECT_EQ(finalize_within([] { std::this_thread::sleep_for(std::chrono::milliseconds(200)); }, 30,
                            0, "never printed"),
            0);
}

TEST(Finalize, UnboundedWhenTheTimeoutIsZero) {
  int calls = 0;
  EXPECT_EQ(finalize_within([&] { ++calls; }, 0, 1, "never printed"), 1);
  EXPECT_EQ(calls, 1);
}

// The child process (death test) calls a finalize that hangs: it must end within the bound,
// with the run's own code and the line, instead of waiting 30 s.
TEST(Finalize, AFinalizeThatHangsEndsTheProcessWithTheRunsCodeAndOneLine) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto hang = [] { std::this_thread::sleep_for(std::chrono::seconds(30)); };
  for (const int code : {0, 1, 5}) {
    const auto t0 = Clock::now();
    EXPECT_EXIT(finalize_within(hang, 0.3, code, "finalize deadlock: outputs complete"),
                testing::ExitedWithCode(code), "^finalize deadlock: outputs complete\n$");
    EXPECT_LT(seconds_since(t0), 15) << "exit " << code;
  }
}

TEST(Finalize, TimeoutFromTheEnvironment) {
  EXPECT_EQ(finalize_timeout(nullptr), kDefaultFinalizeTimeout);
  EXPECT_EQ(finalize_timeout(""), kDefaultFinalizeTimeout);
  EXPECT_EQ(finalize_timeout("5"), 5);
  EXPECT_EQ(finalize_timeout("0.5"), 0.5);
  EXPECT_EQ(finalize_timeout("0"), 0);
  for (const char* bad : {"-1", "5s", "x", " ", "nan", "inf"})
    EXPECT_EQ(finalize_timeout(bad), kDefaultFinalizeTimeout) << bad;
}

}  // namespace
}  // namespace bb::mpi
