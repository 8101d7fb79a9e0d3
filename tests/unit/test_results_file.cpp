// The HDF5 results file: every attribute and dataset round-trips; runs appear only whole;
// resume skips complete runs and drops a half-written one; bad files are refused; a reader
// holding the file does not stop the writer.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <vector>

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
  // A bare record (no docs): columns in rank 0's order, typed by their values.
  auto rank = [](std::int64_t id, const char* host, std::int64_t device, double busy,
                 std::int64_t peak_device_bytes, std::int64_t model) {
    return RankRecord{{{"rank", id},
                       {"host", std::string(host)},
                       {"device", device},
                       {"busy_s", busy},
                       {"peak_device_bytes", peak_device_bytes},
                       {"peak_activation_bytes_model", model}}};
  };
  r.ranks.push_back(rank(0, "host-a", -1, 1.5, 0, 4000));
  r.ranks.push_back(rank(1, "héte-b", 0, 1.0, 8192, 2000));
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
  EXPECT_EQ(std::get<std::string>(rank_column(r.ranks[1], "host")), "héte-b");
  EXPECT_EQ(rank_number(r.ranks[1], "peak_device_bytes"), 8192.0);
  EXPECT_EQ(rank_number(r.ranks[1], "peak_activation_bytes_model"), 2000.0);
  EXPECT_EQ(rank_number(r.ranks[0], "device"), -1.0);
  EXPECT_EQ(rank_number(r.ranks[0], "busy_s"), 1.5);
  EXPECT_TRUE(std::isnan(rank_number(r.ranks[0], "no such column")));
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
  {
    ResultsFile f(path, OpenMode::kResume, {});
    EXPECT_TRUE(f.has_complete("a"));
    EXPECT_FALSE(f.has_complete("b"));
    f.write_run(sample_run("b", 2));
    EXPECT_EQ(read_complete_keys(path), (std::set<std::string>{"a", "b"}));
  }
  { ResultsFile g(path, OpenMode::kForce, {}); }
  EXPECT_TRUE(read_complete_keys(path).empty());
}

// Two writers of one file (the same sweep started twice) would run every configuration twice
// and disturb each other's timings: the second is refused, naming the first, in any mode.
TEST(ResultsFile, OneWriterAtATime) {
  TempDir d;
  const std::string path = (d.path / "r.h5").string();
  {
    ResultsFile first(path, OpenMode::kCreate, {});
    EXPECT_TRUE(fs::exists(path + ".lock"));
    for (OpenMode mode : {OpenMode::kResume, OpenMode::kForce, OpenMode::kCreate}) {
      try {
        ResultsFile second(path, mode, {});
        ADD_FAILURE() << "a second writer was let in";
      } catch (const ConfigError& e) {
        EXPECT_NE(std::string(e.what()).find("is being written by another bubblebench (pid " +
                                             std::to_string(getpid())),
                  std::string::npos)
            << e.what();
      }
    }
    first.write_run(sample_run("a", 2));  // the refused ones changed nothing
  }
  EXPECT_FALSE(fs::exists(path + ".lock"));  // released and removed
  EXPECT_EQ(read_complete_keys(path), std::set<std::string>{"a"});
  ResultsFile again(path, OpenMode::kResume, {});
  EXPECT_TRUE(again.has_complete("a"));
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

// A run with enough events (of varied values, so compression cannot hide them) that its write
// needs tens of KiB.
RunRecord big_run(const std::string& key) {
  RunRecord r = sample_run(key, 4);
  unsigned x = 12345;
  for (std::uint32_t i = 0; i < 3000; ++i) {
    x = x * 1103515245u + 12345u;
    r.events.push_back({i % 4, i % 3, i % 7, i, (x >> 16) % 2 ? "F" : "SEND_B",
                        static_cast<double>(x % 100003) * 1e-6, static_cast<double>(i) * 1e-3});
  }
  return r;
}

// The file size limit of this process (RLIMIT_FSIZE) for a scope, with SIGXFSZ ignored, so a
// write past it fails with EFBIG as a full disk fails with ENOSPC.
struct FileSizeLimit {
  rlimit old{};
  void (*old_handler)(int);
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &old);
    old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit lim = old;
    lim.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &lim);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
  }
};

std::vector<std::string> run_links(const std::string& path) {
  std::vector<std::string> names;
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return {"<file does not open>"};
  hid_t g = H5Gopen2(f, "runs", H5P_DEFAULT);
  if (g >= 0) {
    H5Literate(
        g, H5_INDEX_NAME, H5_ITER_INC, nullptr,
        [](hid_t, const char* name, const H5L_info_t*, void* op) -> herr_t {
          static_cast<std::vector<std::string>*>(op)->emplace_back(name);
          return 0;
        },
        &names);
    H5Gclose(g);
  }
  H5Fclose(f);
  return names;
}

// A full disk while a run is written (design §6): wherever the write stops, the file is
// exactly as it was before (byte for byte: each run is committed by renaming a finished copy
// over the file), no partial group is ever visible, and --resume writes the run. Limits from
// the file's size up to what the run needs are tried, so the failure hits every step of the
// write.
std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(ResultsFile, FullDiskNeverLeavesABrokenRunAndResumes) {
  TempDir d;
  const std::string base = (d.path / "base.h5").string();
  {
    ResultsFile f(base, OpenMode::kCreate, {{"tool_version", std::string("0.1.0")}});
    f.write_run(sample_run("a", 3));
    f.write_run(sample_run("b", 2));
  }
  const auto base_size = static_cast<rlim_t>(fs::file_size(base));
  const std::set<std::string> ab{"a", "b"};
  // A large run (limits in growing steps) and a small one (1 KiB steps: the rename's room is
  // then larger than the run's, so the rename's reservation can fail after the run is written).
  for (const bool big : {true, false}) {
    SCOPED_TRACE(big ? "a large run" : "a small run");
    const RunRecord c = big ? big_run("c") : sample_run("c", 4);
    int failures = 0, partial_left = 0;
    bool written = false;
    for (rlim_t extra = 0; !written && extra < (8u << 20);
         extra = big && extra >= 4096 ? extra * 9 / 8 : extra + (big ? 512 : 1024)) {
      const std::string path = (d.path / "x.h5").string();
      fs::remove(path);
      fs::copy_file(base, path);
      SCOPED_TRACE("file size limit " + std::to_string(base_size + extra));
      const std::string before = file_bytes(path);
      {
        ResultsFile f(path, OpenMode::kResume, {});
        try {
          FileSizeLimit limit(base_size + extra);
          f.write_run(c);
          written = true;
        } catch (const IoError& e) {
          ++failures;
          EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
          EXPECT_TRUE(file_bytes(path) == before) << "a failed write changed the file";
        }
      }
      EXPECT_FALSE(fs::exists(path + ".bb-tmp")) << "the failed write left its copy behind";
      // Whatever happened, every visible run is complete and readable, a and b are intact.
      for (const std::string& name : run_links(path)) {
        if (name.rfind(".partial-", 0) == 0) {
          ++partial_left;
          continue;
        }
        EXPECT_NO_THROW(read_run(path, name)) << "run " << name << " is unreadable";
      }
      const auto keys = read_complete_keys(path);
      EXPECT_TRUE(std::includes(keys.begin(), keys.end(), ab.begin(), ab.end()));
      EXPECT_EQ(read_run(path, "a").step_time_s.size(), 3u);
      EXPECT_EQ(read_run(path, "b").step_time_s.size(), 2u);
      if (written) {
        EXPECT_EQ(read_run(path, "c").events.size(), c.events.size());
      }
      // --resume (with room again) removes what is left and writes the run.
      {
        ResultsFile f(path, OpenMode::kResume, {});
        EXPECT_TRUE(f.has_complete("a") && f.has_complete("b"));
        if (!f.has_complete("c")) f.write_run(c);
      }
      EXPECT_EQ(run_links(path), (std::vector<std::string>{"a", "b", "c"}));
      EXPECT_EQ(read_run(path, "c").events.size(), c.events.size());
      if (::testing::Test::HasFailure()) break;
    }
    EXPECT_TRUE(written) << "the run never fit";
    EXPECT_GT(failures, 5);
    EXPECT_EQ(partial_left, 0);  // never a half-written run to skip
  }
}

// A file damaged by a write that failed half-way (as bubblebench before the fix for a full
// disk left them): a run's name in /runs points to an object header that is not there. HDF5
// can neither open nor remove such a link, so --resume refuses with one line saying what to do.
TEST(ResultsFile, ResumeRefusesAnUnreadableRunWithAdvice) {
  TempDir d;
  const std::string path = (d.path / "r.h5").string();
  {
    ResultsFile f(path, OpenMode::kCreate, {});
    f.write_run(sample_run("a", 2));
    f.write_run(sample_run("b", 2));
  }
  haddr_t addr = 0;
  {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    H5O_info_t info;
    ASSERT_GE(H5Oget_info_by_name2(f, "runs/b", &info, H5O_INFO_BASIC, H5P_DEFAULT), 0);
    addr = info.addr;
    H5Fclose(f);
  }
  {
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(static_cast<std::streamoff>(addr));
    const std::string junk(64, '\xff');
    io.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  EXPECT_EQ(read_complete_keys(path), std::set<std::string>{"a"});
  try {
    ResultsFile f(path, OpenMode::kResume, {});
    FAIL() << "resumed a file with an unreadable run";
  } catch (const IoError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("run 'b' is unreadable"), std::string::npos) << what;
    EXPECT_NE(what.find("--force"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  EXPECT_NO_THROW(read_run(path, "a"));
}

// A reader holding the file open (h5py in a notebook: another process, with HDF5's default
// file locking) does not stop the writer, and keeps reading the version it opened; a new open
// sees the new runs. The reader is a child process holding the file open until told to look.
TEST(ResultsFile, AReaderHoldingTheFileDoesNotStopTheWriter) {
  TempDir d;
  const std::string path = (d.path / "r.h5").string();
  { ResultsFile(path, OpenMode::kCreate, {}).write_run(sample_run("a", 2)); }
  int opened[2], look[2];
  ASSERT_EQ(pipe(opened), 0);
  ASSERT_EQ(pipe(look), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The reader: 0 if it sees its version (a, not b) throughout, else a code saying what not.
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const char c = f >= 0 ? 'o' : 'x';
    if (write(opened[1], &c, 1) != 1) _exit(9);
    char go = 0;
    if (read(look[0], &go, 1) != 1 || f < 0) _exit(8);
    int rc = 0;
    if (H5Lexists(f, "runs/a", H5P_DEFAULT) <= 0) rc = 2;
    if (H5Lexists(f, "runs/b", H5P_DEFAULT) != 0) rc = 3;
    H5Fclose(f);
    _exit(rc);
  }
  char c = 0;
  ASSERT_EQ(read(opened[0], &c, 1), 1);
  ASSERT_EQ(c, 'o') << "the reader could not open the file";
  {
    ResultsFile f(path, OpenMode::kResume, {});
    EXPECT_TRUE(f.has_complete("a"));
    EXPECT_NO_THROW(f.write_run(sample_run("b", 2)));
    EXPECT_NO_THROW(f.write_run(sample_run("c", 3)));
  }
  EXPECT_EQ(read_complete_keys(path), (std::set<std::string>{"a", "b", "c"}));
  EXPECT_NO_THROW(ResultsFile(path, OpenMode::kForce, {}));  // replaced under the reader too
  EXPECT_TRUE(read_complete_keys(path).empty());
  ASSERT_EQ(write(look[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the reader's view changed under it (code " << WEXITSTATUS(status) << ")";
  for (int fd : {opened[0], opened[1], look[0], look[1]}) close(fd);
}

// --resume must not trust a file it cannot account for: without /runs it is refused, and the
// file is left as it was.
TEST(ResultsFile, ResumeRefusesAFileWithoutRuns) {
  TempDir d;
  const std::string path = (d.path / "r.h5").string();
  { ResultsFile(path, OpenMode::kCreate, {}); }
  {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(H5Ldelete(f, "runs", H5P_DEFAULT), 0);
    H5Fclose(f);
  }
  const std::string before = file_bytes(path);
  try {
    ResultsFile f(path, OpenMode::kResume, {});
    FAIL() << "resumed a file without /runs";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("has no /runs group"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(file_bytes(path) == before);
}

// --resume verifies what it skips: a run whose `status` says complete but that lacks a dataset,
// or whose step_time_s has fewer rows than its `iters`, is not complete (its write replaces it).
TEST(ResultsFile, ResumeVerifiesTheRunsItSkips) {
  TempDir d;
  const std::string path = (d.path / "r.h5").string();
  {
    ResultsFile f(path, OpenMode::kCreate, {});
    RunRecord a = sample_run("a", 3), b = sample_run("b", 3), c = sample_run("c", 3);
    for (RunRecord* r : {&a, &b, &c}) r->attrs.emplace_back("iters", std::int64_t{3});
    c.step_time_s.pop_back();  // 2 rows for 3 iterations
    f.write_run(a);
    f.write_run(b);
    f.write_run(c);
  }
  {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(H5Ldelete(f, "runs/b/events", H5P_DEFAULT), 0);
    H5Fclose(f);
  }
  EXPECT_EQ(read_complete_keys(path), std::set<std::string>{"a"});
  ResultsFile f(path, OpenMode::kResume, {});
  EXPECT_TRUE(f.has_complete("a"));
  EXPECT_FALSE(f.has_complete("b"));
  EXPECT_FALSE(f.has_complete("c"));
  f.write_run(sample_run("b", 2));
  EXPECT_EQ(read_run(path, "b").events.size(), 2u);
}

// A soft or external link under /runs is not a run this file holds: --resume refuses the file
// (where it used to skip the configuration the link is named after), and leaves it as it was.
TEST(ResultsFile, ResumeRefusesALinkUnderRuns) {
  TempDir d;
  const std::string path = (d.path / "r.h5").string();
  const std::string other = (d.path / "other.h5").string();
  { ResultsFile(path, OpenMode::kCreate, {}).write_run(sample_run("a", 2)); }
  { ResultsFile(other, OpenMode::kCreate, {}).write_run(sample_run("x", 2)); }
  for (const bool soft : {true, false}) {
    SCOPED_TRACE(soft ? "a soft link" : "an external link");
    const std::string p = (d.path / (soft ? "s.h5" : "e.h5")).string();
    fs::copy_file(path, p);
    {
      const hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      if (soft)
        ASSERT_GE(H5Lcreate_soft("/runs/a", f, "runs/b", H5P_DEFAULT, H5P_DEFAULT), 0);
      else
        ASSERT_GE(
            H5Lcreate_external(other.c_str(), "/runs/x", f, "runs/b", H5P_DEFAULT, H5P_DEFAULT), 0);
      H5Fclose(f);
    }
    EXPECT_EQ(read_complete_keys(p), std::set<std::string>{"a"});
    const std::string before = file_bytes(p);
    try {
      ResultsFile f(p, OpenMode::kResume, {});
      ADD_FAILURE() << "resumed a file with a link under /runs";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("/runs/b is a soft or external link"), std::string::npos)
          << e.what();
    }
    EXPECT_TRUE(file_bytes(p) == before);
  }
}

// A new file appears under its name only whole: the copy being written has another name, and
// nothing of it stays behind.
TEST(ResultsFile, NewFileAppearsWhole) {
  TempDir d;
  const std::string path = (d.path / "r.h5").string();
  {
    ResultsFile f(path, OpenMode::kCreate, {{"tool_version", std::string("0.1.0")}});
    EXPECT_EQ(std::get<std::string>(*find_attr(read_root_attrs(path), "tool_version")), "0.1.0");
    f.write_run(sample_run("a", 2));
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(d.path)) names.push_back(e.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"r.h5"});
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
