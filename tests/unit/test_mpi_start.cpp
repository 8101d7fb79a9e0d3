// The line of an MPMD launch whose ranks were given other arguments (bench/cli/mpi_start.hpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/mpi_start.hpp"

namespace bb {
namespace {

using Args = std::vector<std::string>;

TEST(MpiStart, SameArgumentsAgree) {
  EXPECT_EQ(argument_difference({"run", "-M", "4"}, {"run", "-M", "4"}, 3), "");
  EXPECT_EQ(argument_difference({}, {}, 1), "");
}

TEST(MpiStart, NamesTheFirstDifferingArgument) {
  EXPECT_EQ(argument_difference({"run", "-M", "4"}, {"run", "-M", "8"}, 2),
            "bubblebench: error: rank 2 was given other arguments than rank 0: argument 3 is '4' "
            "on rank 0 and is '8' on rank 2 (every rank needs the same arguments)");
}

TEST(MpiStart, AMissingArgumentOnEitherSide) {
  const Args with_out{"run", "--out", "x.h5"}, without{"run"};
  EXPECT_NE(argument_difference(with_out, without, 1)
                .find("argument 2 is '--out' on rank 0 and is missing on rank 1"),
            std::string::npos);
  EXPECT_NE(argument_difference(without, Args{"run", "--check"}, 1)
                .find("argument 2 is missing on rank 0 and is '--check' on rank 1"),
            std::string::npos);
}

TEST(MpiStart, ControlBytesAndLongArgumentsStayOnOneShortLine) {
  const std::string line =
      argument_difference({"run", "a\nb\x01"}, {"run", std::string(500, 'x')}, 1);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.find('\x01'), std::string::npos);
  EXPECT_NE(line.find("'a?b?'"), std::string::npos);
  EXPECT_LT(line.size(), 300u);
}

}  // namespace
}  // namespace bb
