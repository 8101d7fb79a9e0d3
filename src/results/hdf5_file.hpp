// The results file of design §6 on the HDF5 C API. Only rank 0 opens it. The file is never
// changed in place: each change (a new file, each run, a clean-up on --resume) is written to a
// copy under PATH.bb-tmp, synced to disk and renamed over PATH (see h5::Staged in hdf5_io.hpp).
// So whatever kills the writer, and whenever, PATH holds exactly the runs of the last complete
// write; a reader holding PATH open (h5py) neither stops the writer nor sees a half-written
// run. Room for a run is reserved in the copy before HDF5 writes, so a full disk fails early,
// leaving the file as it was. HDF5's own file locks are not used (WriterLock is).
#pragma once

#include <set>
#include <string>

#include "results/run_record.hpp"

namespace bb {

// 2: fixed-length strings in the tables, build_cuda/build_nccl at the root and the versions a
// run used among its attributes (docs/run-record.md says why). Readers read 1 and 2.
inline constexpr std::int64_t kSchemaVersion = 2;

enum class OpenMode {
  kCreate,  // the file must not exist
  kResume,  // open an existing file (or create it) and skip its complete runs
  kForce,   // replace whatever is there
};

// One writer per results file: an exclusive lock on PATH.lock (an open-file-description
// fcntl lock, so it conflicts within a process too and dies with the process however it ends),
// holding "pid host" of its owner. Removed again when the writer is done. Where the file system
// has no locks, there is no lock (and no protection).
class WriterLock {
 public:
  // Throws ConfigError when another writer holds the lock, IoError when the lock file cannot
  // be made.
  explicit WriterLock(const std::string& path);
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;
  ~WriterLock();

 private:
  std::string lock_path_;
  int fd_ = -1;
};

class ResultsFile {
 public:
  // Root attributes (tool_version, git_sha, ...) are written when the file is created.
  // Throws ConfigError (file exists without --resume/--force; other schema version; another
  // process writes it: see WriterLock) or
  // IoError (missing or read-only folder; unreadable, truncated or corrupt file; with
  // --resume, a run group HDF5 can neither read nor remove). With --resume, a file without
  // /runs is refused (ConfigError).
  ResultsFile(std::string path, OpenMode mode, const Attrs& root_attrs);

  const std::string& path() const { return path_; }
  bool has_complete(const std::string& key) const { return complete_.count(key) != 0; }
  const std::set<std::string>& complete_keys() const { return complete_; }

  // Writes the run with status "complete" and commits it (a copy of the file renamed over it).
  // Throws IoError (e.g. no room for the run: the file is left exactly as it was).
  void write_run(const RunRecord& run);

 private:
  std::string path_;
  WriterLock lock_;  // before the file is touched; released (and removed) last
  std::set<std::string> complete_;
};

// Reading back (tests, tools). Throws IoError.
std::set<std::string> read_complete_keys(const std::string& path);
RunRecord read_run(const std::string& path, const std::string& key);
Attrs read_root_attrs(const std::string& path);

// A key usable as an HDF5 link name: [A-Za-z0-9_.=-] only.
std::string sanitize_key(const std::string& key);

}  // namespace bb
