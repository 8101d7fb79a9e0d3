// The HDF5 results file: every attribute and dataset round-trips; runs appear only whole;
// resume skips complete runs and drops a half-written one; bad files are refused.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.hpp"
#include "results/hdf5_file.hpp"

namespace bb {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/bb-h5-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

RunRecord sample_run(const std::string& key, int iters) {
  RunRecord r;
  r.key = key;
  r.attrs = {{"schedule", std::string("1f1b")},
             {"P", std::int64_t{2}},
             {"M", std::int64_t{4}},
             {"makespan_s", 0.125},
             {"status", std::string("ignored: set by the writer")}};
  for (int i = 0; i < iters; ++i) r.step_time_s.push_back(0.1 + i * 0.01);
  r.events.push_back({0, 0, 0, 3, "F", 0.0, 0.5});
  r.events.push_back({1, 1, 1, 2, "RECV_B", 0.25, 0.75});
  r.ranks.push_back({0, "host-a", -1, 1.5, 0.25, 0.125, 4096, 0, 1024, 4000});
  r.ranks.push_back({1, "héte-b", 0, 1.0, 0.5, 0.0, 2048, 8192, 1024, 2000});
  return r;
}

TEST(ResultsFile, RoundTripsEveryField) {
  TempDir d;
  const std::string path = (d.path / "r.h5").string();
  {
    ResultsFile f(path, OpenMode::kCreate,
                  {{"tool_version", std::string("0.1.0")}, {"slurm_job_id", std::string("")}});
    f.write_run(sample_run("1f1b_P2_M4", 5));
    f.write_run(sample_run("gpipe/P2", 3));  // sanitized to gpipe_P2
  }
  EXPECT_EQ(read_complete_keys(path), (std::set<std::string>{"1f1b_P2_M4", "gpipe_P2"}));
  const Attrs root = read_root_attrs(path);
  ASSERT_NE(find_attr(root, "schema_version"), nullptr);
  EXPECT_EQ(std::get<std::int64_t>(*find_attr(root, "schema_version")), kSchemaVersion);
  EXPECT_EQ(std::get<std::string>(*find_attr(root, "tool_version")), "0.1.0");
  const RunRecord r = read_run(path, "1f1b_P2_M4");
  EXPECT_EQ(std::get<std::string>(*find_attr(r.attrs, "status")), "complete");
  EXPECT_EQ(std::get<std::string>(*find_attr(r.attrs, "schedule")), "1f1b");
  EXPECT_EQ(std::get<std::int64_t>(*find_attr(r.attrs, "M")), 4);
  EXPECT_DOUBLE_EQ(std::get<double>(*find_attr(r.attrs, "makespan_s")), 0.125);
  ASSERT_EQ(r.step_time_s.size(), 5u);
  EXPECT_DOUBLE_EQ(r.step_time_s[4], 0.14);
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[1].kind, "RECV_B");
  EXPECT_EQ(r.events[1].microbatch, 2u);
  EXPECT_DOUBLE_EQ(r.events[1].t_end_s, 0.75);
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.ranks[1].host, "héte-b");
  EXPECT_EQ(r.ranks[1].peak_device_bytes, 8192u);
  EXPECT_EQ(r.ranks[1].peak_activation_bytes_model, 2000u);
  EXPECT_EQ(r.ranks[0].device, -1);
}

TEST(ResultsFile, RefusesToOverwriteAndResumesWithoutRepeating) {
  TempDir d;
  const std::string path = (d.path / "r.h5").string();
  { ResultsFile(path, OpenMode::kCreate, {}).write_run(sample_run("a", 2)); }
  EXPECT_THROW(ResultsFile(path, OpenMode::kCreate, {}), ConfigError);
  {
    // A crash while writing leaves a partial group: simulate one.
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t g = H5Gcreate2(f, "runs/.partial-b", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(g);
    H5Fclose(f);
  }
  EXPECT_EQ(read_complete_keys(path), std::set<std::string>{"a"});
  ResultsFile f(path, OpenMode::kResume, {});
  EXPECT_TRUE(f.has_complete("a"));
  EXPECT_FALSE(f.has_complete("b"));
  f.write_run(sample_run("b", 2));
  EXPECT_EQ(read_complete_keys(path), (std::set<std::string>{"a", "b"}));
  { ResultsFile g(path, OpenMode::kForce, {}); }
  EXPECT_TRUE(read_complete_keys(path).empty());
}

TEST(ResultsFile, RefusesBadFilesAndPaths) {
  TempDir d;
  const std::string good = (d.path / "good.h5").string();
  { ResultsFile(good, OpenMode::kCreate, {}).write_run(sample_run("a", 2)); }
  // Truncated: resume is refused and the file is left as it was.
  const std::string cut = (d.path / "cut.h5").string();
  fs::copy_file(good, cut);
  fs::resize_file(cut, fs::file_size(cut) / 2);
  const auto size_before = fs::file_size(cut);
  EXPECT_THROW(ResultsFile(cut, OpenMode::kResume, {}), IoError);
  EXPECT_EQ(fs::file_size(cut), size_before);
  // Not HDF5 at all.
  const std::string junk = (d.path / "junk.h5").string();
  std::ofstream(junk) << "not hdf5\n";
  EXPECT_THROW(ResultsFile(junk, OpenMode::kResume, {}), IoError);
  // Another schema version.
  const std::string old = (d.path / "old.h5").string();
  {
    ResultsFile f(old, OpenMode::kCreate, {});
    hid_t h = H5Fopen(old.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    H5Adelete(h, "schema_version");
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(h, "schema_version", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    const std::int64_t v = 99;
    H5Awrite(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
    H5Sclose(sp);
    H5Fclose(h);
  }
  try {
    ResultsFile f(old, OpenMode::kResume, {});
    FAIL() << "resumed a file of another schema";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("schema_version 99"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ResultsFile((d.path / "no/such/dir/r.h5").string(), OpenMode::kCreate, {}), IoError);
}

TEST(ResultsFile, RefusesReadOnlyFolder) {
  if (geteuid() == 0) GTEST_SKIP() << "skipped: root ignores folder permissions";
  TempDir d;
  fs::permissions(d.path, fs::perms::owner_read | fs::perms::owner_exec);
  EXPECT_THROW(ResultsFile((d.path / "r.h5").string(), OpenMode::kCreate, {}), IoError);
  fs::permissions(d.path, fs::perms::owner_all);
}

}  // namespace
}  // namespace bb
