// Link fits in the results formats (results/links_io.hpp): HDF5 /links and JSON read back as
// written; bad input refused with one message.
#include <gtest/gtest.h>
#include <hdf5.h>  // the test makes a bare HDF5 file

#include <cmath>
#include <filesystem>
#include <fstream>

#include "cli/calibrate.hpp"
#include "common/error.hpp"
#include "harness/calibration.hpp"
#include "harness/fields.hpp"
#include "results/hdf5_file.hpp"
#include "results/links_io.hpp"
#include "schedule/generators.hpp"

namespace bb {
namespace {

namespace fs = std::filesystem;

std::vector<LinkFit> some_fits() {
  std::vector<LinkSample> a, b;
  for (double x = 8; x <= (1 << 20); x *= 2) {
    a.push_back({x, x <= 4096 ? 1e-6 + x / 2e9 : 20e-6 + x / 8e9});
    b.push_back({x, 3e-6 + x / 5e9});
  }
  std::vector<LinkFit> out{fit_link(0, 1, a), fit_link(1, 0, b)};
  out[0].wake_s = 45e-6;  // calibrate's cold round trips (1->0: not measured)
  return out;
}

void expect_same(const std::vector<LinkFit>& x, const std::vector<LinkFit>& y) {
  ASSERT_EQ(x.size(), y.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(x[i].src, y[i].src);
    EXPECT_EQ(x[i].dst, y[i].dst);
    EXPECT_EQ(x[i].line.alpha, y[i].line.alpha);
    EXPECT_EQ(x[i].line.beta, y[i].line.beta);
    ASSERT_EQ(x[i].regimes.size(), y[i].regimes.size());
    for (std::size_t r = 0; r < x[i].regimes.size(); ++r) {
      EXPECT_EQ(x[i].regimes[r].lo_bytes, y[i].regimes[r].lo_bytes);
      EXPECT_EQ(x[i].regimes[r].hi_bytes, y[i].regimes[r].hi_bytes);
      EXPECT_EQ(x[i].regimes[r].line.alpha, y[i].regimes[r].line.alpha);
      EXPECT_EQ(x[i].regimes[r].line.beta, y[i].regimes[r].line.beta);
    }
    ASSERT_EQ(x[i].samples.size(), y[i].samples.size());
    for (std::size_t k = 0; k < x[i].samples.size(); ++k) {
      EXPECT_EQ(x[i].samples[k].bytes, y[i].samples[k].bytes);
      EXPECT_EQ(x[i].samples[k].seconds, y[i].samples[k].seconds);
    }
    EXPECT_EQ(x[i].line_error.max_rel, y[i].line_error.max_rel);
    EXPECT_EQ(x[i].regimes_error.max_rel, y[i].regimes_error.max_rel);
    EXPECT_EQ(x[i].wake_s, y[i].wake_s);
    for (double bytes : {0.0, 100.0, 5000.0, 1e7}) EXPECT_EQ(x[i].cost(bytes), y[i].cost(bytes));
  }
}

class LinksIo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("bb_links_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(LinksIo, Hdf5RoundTripAndReplace) {
  const auto fits = some_fits();
  EXPECT_EQ(fits[0].regimes.size(), 2u);
  const std::string p = path("links.h5");
  write_links_file(p, fits, {{"transport", std::string("mpi")}, {"reps", std::int64_t{30}}});
  expect_same(read_links_file(p), fits);
  // Written again: /links replaced, not added to.
  const std::vector<LinkFit> one{fits[1]};
  write_links_file(p, one, {});
  expect_same(read_links_file(p), one);
  EXPECT_FALSE(fs::exists(p + ".lock"));
}

TEST_F(LinksIo, JsonRoundTripAndRunRecords) {
  const auto fits = some_fits();
  const nlohmann::json j = links_to_json(fits);
  expect_same(links_from_json(j), fits);
  // calibrate --json: an object with "links"; run --format json: records, one with "links".
  std::ofstream(path("c.json")) << nlohmann::json{{"transport", "mpi"}, {"links", j}}.dump();
  expect_same(read_links_file(path("c.json")), fits);
  std::ofstream(path("r.json"))
      << nlohmann::json::array({{{"schedule", "1f1b"}, {"links", j}}}).dump();
  expect_same(read_links_file(path("r.json")), fits);
  // Written before the wake-up was measured: none.
  nlohmann::json old = j;
  for (auto& f : old) f.erase("wake_s");
  for (const LinkFit& f : links_from_json(old)) EXPECT_EQ(f.wake_s, 0.0);
}

TEST_F(LinksIo, BadInputIsRefused) {
  EXPECT_THROW(read_links_file(path("missing.h5")), ConfigError);
  std::ofstream(path("text.h5")) << "not hdf5";
  EXPECT_THROW(read_links_file(path("text.h5")), ConfigError);
  // A file that is not HDF5 is not replaced by --out.
  EXPECT_THROW(write_links_file(path("text.h5"), some_fits(), {}), IoError);
  std::ifstream in(path("text.h5"));
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "not hdf5");
  // HDF5 without /links.
  const hid_t f = H5Fcreate(path("x.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  H5Fclose(f);
  try {
    read_links_file(path("x.h5"));
    ADD_FAILURE() << "no throw";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no /links"), std::string::npos) << e.what();
  }
  nlohmann::json j = links_to_json(some_fits());
  j[0].erase("alpha_s");
  EXPECT_THROW(links_from_json(j), ConfigError);
  j = links_to_json(some_fits());
  j[1]["src"] = 0;
  j[1]["dst"] = 1;
  EXPECT_THROW(links_from_json(j), ConfigError);  // two fits for one pair
  j = links_to_json(some_fits());
  j[0]["samples"][0]["time_s"] = 0;
  EXPECT_THROW(links_from_json(j), ConfigError);
  j = links_to_json(some_fits());
  std::swap(j[0]["regimes"][0], j[0]["regimes"][1]);
  j[0]["regimes"][0]["lo_bytes"] = 16;  // overlaps the other after sorting
  EXPECT_THROW(links_from_json(j), ConfigError);
}

// A run's links: kept with the run in the results file (its group `links`, settings as its
// attributes) and in its JSON record; a run without them has neither.
TEST_F(LinksIo, StoredWithTheRun) {
  harness::RunSummary s;
  s.run_key = "with_links";
  s.schedule = "1f1b";
  s.P = 2;
  s.links = some_fits();
  s.links_attrs = {{"transport", std::string("mpi")}, {"reps", std::int64_t{30}}};
  const std::string p = path("runs.h5");
  {
    ResultsFile f(p, OpenMode::kCreate, {});
    f.write_run(harness::to_record(s));
    harness::RunSummary plain = s;
    plain.run_key = "without";
    plain.links.clear();
    f.write_run(harness::to_record(plain));
  }
  const RunRecord back = read_run(p, "with_links");
  expect_same(back.links, s.links);
  ASSERT_NE(find_attr(back.links_attrs, "reps"), nullptr);
  EXPECT_EQ(std::get<std::int64_t>(*find_attr(back.links_attrs, "reps")), 30);
  EXPECT_TRUE(read_run(p, "without").links.empty());
  const nlohmann::json j = harness::to_json(s);
  ASSERT_TRUE(j.contains("links"));
  expect_same(links_from_json(j["links"]), s.links);
  EXPECT_EQ(harness::json_of_record(back)["links"], j["links"]);
  s.links.clear();
  EXPECT_FALSE(harness::to_json(s).contains("links"));
}

TEST(LinksUsed, ThePairsOfTheSchedule) {
  std::vector<LinkFit> all;
  for (const auto& [a, b] : all_pairs(4))
    all.push_back(fit_link(a, b, {{8, 1e-6 * (a + 1)}, {16, 2e-6}, {32, 3e-6}}));
  const auto used = harness::links_used(all, generate("1f1b", {4, 8, 1}));
  ASSERT_EQ(used.size(), 6u);
  for (const LinkFit& f : used) EXPECT_EQ(std::abs(f.src - f.dst), 1);
  EXPECT_EQ(harness::links_used(all, generate("interleaved", {4, 8, 2})).size(), 8u);
  EXPECT_TRUE(harness::links_used({}, generate("1f1b", {4, 8, 1})).empty());
}

TEST(LinksTable, PrintsEveryPairAndItsRegimes) {
  const std::string t = links_table(some_fits());
  EXPECT_NE(t.find("0->1"), std::string::npos) << t;
  EXPECT_NE(t.find("1->0"), std::string::npos) << t;
  EXPECT_NE(t.find("0->1 regimes:  [8..4096 B: alpha 1 us, beta 2 GB/s]"), std::string::npos) << t;
  EXPECT_NE(t.find("regimes_max_err"), std::string::npos) << t;
}

}  // namespace
}  // namespace bb
