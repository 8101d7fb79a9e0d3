// Files generated from a table of the code (the run fields, the schedule registry): each test
// compares the file in the source tree with what the code gives now; BB_REGENERATE=1 rewrites
// it instead (then commit it).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace bb::test {

inline bool regenerating() {
  const char* r = std::getenv("BB_REGENERATE");
  return r != nullptr && std::string(r) == "1";
}

inline std::string read_source_file(const std::string& rel) {
  std::ifstream in(std::filesystem::path(BB_SOURCE_DIR) / rel, std::ios::binary);
  std::stringstream have;
  have << in.rdbuf();
  return have.str();
}

inline void write_source_file(const std::string& rel, const std::string& text) {
  std::ofstream(std::filesystem::path(BB_SOURCE_DIR) / rel, std::ios::binary) << text;
}

inline std::string stale(const std::string& rel) {
  return rel + " is stale: run BB_REGENERATE=1 build/unit_tests --gtest_filter='" +
         ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name() +
         ".*' and commit it";
}

// The whole file `rel` (relative to the source tree) is `text`.
inline void expect_generated(const std::string& rel, const std::string& text) {
  if (regenerating()) return write_source_file(rel, text);
  EXPECT_EQ(read_source_file(rel), text) << stale(rel);
}

// The lines of `rel` between the line `begin` and the next line `end` are `text`.
inline void expect_generated_section(const std::string& rel, const std::string& begin,
                                     const std::string& end, const std::string& text) {
  const std::string have = read_source_file(rel);
  const std::size_t b = have.find(begin + "\n");
  const std::size_t e = b == std::string::npos ? b : have.find(end + "\n", b);
  ASSERT_NE(e, std::string::npos) << rel << " has no lines " << begin << " ... " << end;
  const std::size_t from = b + begin.size() + 1;
  if (regenerating()) return write_source_file(rel, have.substr(0, from) + text + have.substr(e));
  EXPECT_EQ(have.substr(from, e - from), text) << stale(rel);
}

}  // namespace bb::test
