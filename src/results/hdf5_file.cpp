#include "results/hdf5_file.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/error.hpp"
#include "results/hdf5_io.hpp"
#include "results/links_h5.hpp"
#include "results/links_io.hpp"

namespace bb {
namespace {

using h5::check;
using h5::ColType;
using h5::Column;
using h5::dataset_length;
using h5::fapl_no_locking;
using h5::Handle;
using h5::open_existing;
using h5::read_all_attrs;
using h5::read_attr;
using h5::Staged;
using h5::write_attr;

void quiet_hdf5() {
  h5::quiet();
}

[[noreturn]] void io_fail(const std::string& path, const std::string& what) {
  h5::fail(path, what);
}

// The events table (schema_version 2): its columns, units and meanings.
constexpr const char* kEventsRow =
    "one action of one rank in one timed step: every entry of every rank's lowered list "
    "(bubblebench show --lowered) once per timed step";
constexpr const char* kTimeOrigin =
    "seconds from the step's origin: rank 0's exit from the barrier that begins the step "
    "(--sync barrier; with --sync none each step's own start), on the ranks' common clock "
    "where the run's clock is \"shared\"; with clock \"per-rank\" (several hosts) each "
    "rank's own origin";

std::vector<Column> event_columns(const std::vector<EventRecord>& events) {
  std::vector<Column> c = {
      {"iter", ColType::kU32, "steps", "the timed step, from 0"},
      {"rank", ColType::kU32, "", "the rank that ran the action"},
      {"chunk", ColType::kU32, "", "the action's chunk (as bubblebench show --lowered)"},
      {"microbatch", ColType::kU32, "", "the action's micro-batch (0 .. M-1)"},
      {"kind", ColType::kText, "",
       "F, B, W, BW (backward not split), FB (an overlapped F&B pair: the F's chunk and "
       "micro-batch) or SEND_F, RECV_F, SEND_B, RECV_B (communication)"},
      {"t_start_s", ColType::kF64, "s", "the action's start (time_origin)"},
      {"t_end_s", ColType::kF64, "s", "the action's end (time_origin)"},
  };
  for (const EventRecord& e : events) {
    c[0].ints.push_back(e.iter);
    c[1].ints.push_back(e.rank);
    c[2].ints.push_back(e.chunk);
    c[3].ints.push_back(e.microbatch);
    c[4].texts.push_back(e.kind);
    c[5].reals.push_back(e.t_start_s);
    c[6].reals.push_back(e.t_end_s);
  }
  return c;
}

// The memory table: each rank's live bytes by kind over the last timed step.
std::vector<Column> memory_columns(const std::vector<MemoryRecord>& memory) {
  std::vector<Column> c = {
      {"rank", ColType::kU32, "", "the rank"},
      {"t_s", ColType::kF64, "s", "from then on (time_origin of the last timed step)"},
      {"weights", ColType::kF64, "bytes", "parameters, gradients, optimizer state"},
      {"activations", ColType::kF64, "bytes",
       "micro-batches' inputs, saved tensors and the loss's, in use"},
      {"messages", ColType::kF64, "bytes",
       "message buffers in use (sent until complete, "
       "received until consumed)"},
      {"workspace", ColType::kF64, "bytes", "the chunks' scratch and work areas"},
      {"runtime", ColType::kF64, "bytes", "the runtime's own (CUDA context, NCCL; CPU: 0)"},
  };
  for (const MemoryRecord& m : memory) {
    c[0].ints.push_back(m.rank);
    c[1].reals.push_back(m.t_s);
    c[2].reals.push_back(m.weights);
    c[3].reals.push_back(m.activations);
    c[4].reals.push_back(m.messages);
    c[5].reals.push_back(m.workspace);
    c[6].reals.push_back(m.runtime);
  }
  return c;
}

ColType type_of(const AttrValue& v) {
  return std::holds_alternative<std::int64_t>(v)    ? ColType::kI64
         : std::holds_alternative<std::uint64_t>(v) ? ColType::kU64
         : std::holds_alternative<double>(v)        ? ColType::kF64
                                                    : ColType::kText;
}

// Integer columns take integer values, reals doubles, texts strings.
bool fits(ColType t, const AttrValue& v) {
  if (t == ColType::kText) return std::holds_alternative<std::string>(v);
  if (t == ColType::kF64) return std::holds_alternative<double>(v);
  return std::holds_alternative<std::int64_t>(v) || std::holds_alternative<std::uint64_t>(v);
}

void append(Column& c, const AttrValue& v) {
  if (c.type == ColType::kText)
    c.texts.push_back(std::get<std::string>(v));
  else if (c.type == ColType::kF64)
    c.reals.push_back(std::get<double>(v));
  else if (const auto* u = std::get_if<std::uint64_t>(&v))
    c.ints.push_back(static_cast<std::int64_t>(*u));  // the bits; written back as uint64
  else
    c.ints.push_back(std::get<std::int64_t>(v));
}

AttrValue cell(const Column& c, std::size_t r) {
  if (c.type == ColType::kText) return c.texts[r];
  if (c.type == ColType::kF64) return c.reals[r];
  return c.ints[r];
}

// The ranks table: the columns the record's docs name, in their order and of their types; a
// bare record's columns as rank 0 has them, typed by their values.
std::vector<Column> rank_columns(const RunRecord& run, const std::string& path) {
  std::vector<Column> cols;
  for (const ColumnDoc& d : run.rank_docs) cols.push_back({d.name, d.type, d.unit, d.meaning});
  if (run.rank_docs.empty() && !run.ranks.empty())
    for (const auto& [name, v] : run.ranks[0].columns) cols.push_back({name, type_of(v)});
  for (std::size_t i = 0; i < run.ranks.size(); ++i)
    for (Column& c : cols) {
      const AttrValue* v = find_attr(run.ranks[i].columns, c.name);
      if (v == nullptr || !fits(c.type, *v))
        io_fail(path, "rank " + std::to_string(i) + " has no column " + c.name + " of its type");
      append(c, *v);
    }
  return cols;
}

// The ranks table back: every integer, real or string member as a column, in the file's order.
std::vector<RankRecord> read_ranks(hid_t ds, const std::string& path) {
  std::vector<RankRecord> ranks(dataset_length(ds));
  for (const auto& [name, cls] : h5::table_members(ds)) {
    const bool known = cls == H5T_INTEGER || cls == H5T_FLOAT || cls == H5T_STRING;
    if (!known || name.empty()) continue;  // a column of another kind: not ours
    const ColType type = cls == H5T_INTEGER ? ColType::kI64
                         : cls == H5T_FLOAT ? ColType::kF64
                                            : ColType::kText;
    const Column c = h5::read_column(ds, name, type, path);
    for (std::size_t i = 0; i < ranks.size() && i < c.size(); ++i)
      set_rank_column(ranks[i], name, cell(c, i));
  }
  return ranks;
}

// A run counts as complete only when what its `status` claims is there: the three datasets
// open as 1-D datasets, and step_time_s has one row per timed iteration (`iters`).
bool group_is_complete(hid_t runs, const char* name) {
  Handle g(H5Gopen2(runs, name, H5P_DEFAULT), H5Gclose);
  AttrValue v;
  if (!g.ok() || !read_attr(g.get(), "status", &v) || !std::holds_alternative<std::string>(v) ||
      std::get<std::string>(v) != "complete")
    return false;
  for (const char* ds : {"step_time_s", "events", "ranks"}) {
    if (H5Lexists(g.get(), ds, H5P_DEFAULT) <= 0) return false;
    Handle d(H5Dopen2(g.get(), ds, H5P_DEFAULT), H5Dclose);
    if (!d.ok()) return false;
    Handle space(H5Dget_space(d.get()), H5Sclose);
    if (H5Sget_simple_extent_ndims(space.get()) != 1) return false;
    AttrValue iters;
    if (std::string(ds) == "step_time_s" && read_attr(g.get(), "iters", &iters) &&
        std::holds_alternative<std::int64_t>(iters) &&
        dataset_length(d.get()) != static_cast<std::size_t>(std::get<std::int64_t>(iters)))
      return false;
  }
  return true;
}

// What a name under /runs is: a run is a hard link to a group; a soft or external link is
// something else (a run of another file, or nothing).
bool is_hard_link(hid_t runs, const char* name) {
  H5L_info_t info;
  return H5Lget_info(runs, name, &info, H5P_DEFAULT) >= 0 && info.type == H5L_TYPE_HARD;
}

// A run group whose objects HDF5 cannot open: what a write that stopped half-way on disk
// (bubblebench before the reservation below, a full disk) could leave under a run's name.
bool group_is_readable(hid_t runs, const char* name) {
  Handle g(H5Gopen2(runs, name, H5P_DEFAULT), H5Gclose);
  if (!g.ok()) return false;
  for (const char* ds : {"step_time_s", "events", "ranks"}) {
    if (H5Lexists(g.get(), ds, H5P_DEFAULT) <= 0) continue;  // a group of another writer
    Handle d(H5Dopen2(g.get(), ds, H5P_DEFAULT), H5Dclose);
    if (!d.ok()) return false;
  }
  return true;
}

bool is_partial(const std::string& name) {
  return name.rfind(".partial-", 0) == 0;
}

// Room on the file system for what HDF5 is about to add to PATH: the file is extended by
// `bytes` (posix_fallocate), so the writes that follow land in blocks that exist already and
// cannot fail for want of space. HDF5 sees the file as longer than its data (allowed) and cuts
// it back to its end of data when it closes the file. Without room, nothing is changed and the
// error names what did not fit.
// FILE is the new version being written; errors name SHOWN, the results file.
void reserve_room(const std::string& file, const std::string& shown, std::uint64_t bytes,
                  const std::string& what) {
  const int fd = open(file.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) io_fail(shown, std::string("cannot open for writing: ") + std::strerror(errno));
  struct stat st {};
  int rc = fstat(fd, &st) == 0 ? 0 : errno;
  if (rc == 0) rc = posix_fallocate(fd, st.st_size, static_cast<off_t>(bytes));
  // EINVAL, EOPNOTSUPP: a file system that cannot reserve at all; written without.
  if (rc != 0 && rc != EINVAL && rc != EOPNOTSUPP) {
    if (ftruncate(fd, st.st_size) != 0) {
      // The file keeps a tail of zeros, which HDF5 ignores and cuts off at its next close.
    }
    ::close(fd);
    io_fail(shown, "no room for " + what + " (" + std::to_string(bytes / 1024) + " KiB more): " +
                       std::strerror(rc) + "; the file holds the runs written before");
  }
  ::close(fd);
}

// An upper bound of what HDF5 allocates for a run: twice its uncompressed size (an event takes
// 48 bytes in the file plus its kind string in the global heap: about 32 bytes per event in
// all, measured) plus 128 KiB for object headers, B-tree nodes, a new global heap collection
// and /runs' link storage (a run adds 17 KiB of these, and up to 90 KiB more when /runs'
// fractal heap doubles a block, seen at the 272nd run).
std::uint64_t room_for(const RunRecord& run) {
  std::uint64_t b = 16 * run.step_time_s.size();
  for (const auto& [k, v] : run.attrs)
    b += 160 + k.size() +
         (std::holds_alternative<std::string>(v) ? std::get<std::string>(v).size() : 0);
  for (const EventRecord& e : run.events) b += 64 + e.kind.size();
  b += 56 * run.memory.size();
  for (const LinkFit& l : run.links) b += 512 + 48 * (l.samples.size() + l.regimes.size());
  for (const RankRecord& r : run.ranks) {
    b += 160;
    for (const auto& [k, v] : r.columns)
      b += 16 + k.size() +
           (std::holds_alternative<std::string>(v) ? std::get<std::string>(v).size() : 0);
  }
  return 128 * 1024 + 2 * b;
}

std::vector<std::string> link_names(hid_t group) {
  std::vector<std::string> names;
  H5Literate(
      group, H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* name, const H5L_info_t*, void* op) -> herr_t {
        static_cast<std::vector<std::string>*>(op)->emplace_back(name);
        return 0;
      },
      &names);
  return names;
}

// The run's attributes (but `status`) and datasets into group G.
void write_run_objects(hid_t g, const RunRecord& run, const std::string& path) {
  for (const auto& [k, v] : run.attrs)
    if (k != "status") write_attr(g, k, v, path);
  h5::write_dataset(g, "step_time_s", H5T_NATIVE_DOUBLE, run.step_time_s.data(),
                    run.step_time_s.size(),
                    {{"row", std::string("one timed step")},
                     {"unit", std::string("s")},
                     {"meaning", std::string("the step's makespan T: from the first compute start "
                                             "to the last compute end over all ranks")}},
                    path);
  h5::write_table(g, "events", event_columns(run.events), kEventsRow,
                  {{"time_origin", std::string(kTimeOrigin)}}, path);
  h5::write_table(g, "ranks", rank_columns(run, path),
                  "one rank of the run; times are medians over the timed steps", {}, path);
  if (!run.links.empty()) write_links(g, run.links, run.links_attrs, path);
  if (!run.memory.empty())
    h5::write_table(g, "memory", memory_columns(run.memory),
                    "a change of one rank's live bytes in the last timed step: the memory model "
                    "(docs/memory.md) on the step's measured times",
                    {{"time_origin", std::string(kTimeOrigin)}}, path);
}

}  // namespace

const AttrValue* find_attr(const Attrs& attrs, const std::string& name) {
  for (const auto& [k, v] : attrs)
    if (k == name) return &v;
  return nullptr;
}

std::string sanitize_key(const std::string& key) {
  std::string out = key;
  for (char& c : out)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '=' ||
          c == '-'))
      c = '_';
  if (!out.empty() && out[0] == '.') out[0] = '_';
  return out;
}

namespace {

// The folder a results file goes in must exist and be writable; returns the path.
std::string checked_folder(std::string path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw IoError(path + ": folder '" + dir.string() + "' does not exist");
  if (access(dir.c_str(), W_OK) != 0)
    throw IoError(path + ": folder '" + dir.string() + "' is not writable");
  return path;
}

std::string read_owner(int fd) {
  char buf[256] = {};
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  std::string s(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s.empty() ? "" : " (" + s + ")";
}

}  // namespace

WriterLock::WriterLock(const std::string& path) : lock_path_(path + ".lock") {
  // The lock file a holder removes may be opened just before: after locking, the file must
  // still be the one under the name, or the lock is taken again.
  for (int attempt = 0; attempt < 100; ++attempt) {
    fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw IoError(lock_path_ + ": cannot create the writer's lock file: " + std::strerror(errno));
    struct flock fl = {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    if (fcntl(fd_, F_OFD_SETLK, &fl) != 0) {
      const int err = errno;
      if (err == EAGAIN || err == EACCES) {
        const std::string owner = read_owner(fd_);
        ::close(fd_);
        fd_ = -1;
        throw ConfigError(path + " is being written by another bubblebench" + owner +
                          "; wait for it to finish or choose another --out");
      }
      ::unlink(lock_path_.c_str());  // no locks on this file system: no lock, no file
      ::close(fd_);
      fd_ = -1;
      return;
    }
    struct stat held = {}, named = {};
    if (fstat(fd_, &held) == 0 && stat(lock_path_.c_str(), &named) == 0 &&
        held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
      char host[256] = {};
      gethostname(host, sizeof host - 1);
      const std::string owner = "pid " + std::to_string(getpid()) + " on " + host + "\n";
      if (ftruncate(fd_, 0) == 0 && pwrite(fd_, owner.data(), owner.size(), 0) < 0) {
        // Who holds it is a courtesy for the message above; the lock holds without it.
      }
      return;
    }
    ::close(fd_);
    fd_ = -1;
  }
  throw IoError(lock_path_ + ": the lock file keeps changing; is another writer starting?");
}

WriterLock::~WriterLock() {
  if (fd_ < 0) return;
  ::unlink(lock_path_.c_str());  // while still locked: a waiting opener then sees a new file
  ::close(fd_);
}

ResultsFile::ResultsFile(std::string path, OpenMode mode, const Attrs& root_attrs)
    : path_(checked_folder(std::move(path))), lock_(path_) {
  quiet_hdf5();
  namespace fs = std::filesystem;
  const fs::path p(path_);
  std::error_code ec;
  const bool exists = fs::exists(p, ec);
  if (exists && mode == OpenMode::kCreate)
    throw ConfigError("output file " + path_ +
                      " exists: pass --resume to continue it or --force to replace it");
  if (exists && mode == OpenMode::kResume) {
    // Read only: the file changes only through a Staged commit, and only when it must.
    std::vector<std::string> remove;  // leftovers of a crash (older versions) to remove
    {
      Handle f(open_existing(path_, H5F_ACC_RDONLY), H5Fclose);
      AttrValue v;
      if (!read_attr(f.get(), "schema_version", &v) || !std::holds_alternative<std::int64_t>(v))
        throw ConfigError(path_ +
                          " is not a bubblebench results file (no schema_version); refusing to "
                          "resume it");
      if (std::get<std::int64_t>(v) != kSchemaVersion)
        throw ConfigError(path_ + " has schema_version " +
                          std::to_string(std::get<std::int64_t>(v)) + ", this bubblebench writes " +
                          std::to_string(kSchemaVersion) + "; refusing to resume it");
      if (H5Lexists(f.get(), "runs", H5P_DEFAULT) <= 0)
        throw ConfigError(path_ +
                          " has no /runs group: not a bubblebench results file; refusing to "
                          "resume it");
      Handle runs(H5Gopen2(f.get(), "runs", H5P_DEFAULT), H5Gclose);
      if (!runs.ok()) io_fail(path_, "cannot open /runs");
      for (const auto& name : link_names(runs.get())) {
        if (!is_hard_link(runs.get(), name.c_str()))
          throw ConfigError(path_ + ": /runs/" + name +
                            " is a soft or external link, not a run written into this file; "
                            "refusing to resume it (remove the link, or choose another --out)");
        if (is_partial(name) || !group_is_readable(runs.get(), name.c_str()))
          remove.push_back(name);
        else if (group_is_complete(runs.get(), name.c_str()))
          complete_.insert(name);
        // else: not complete; write_run replaces it
      }
    }
    if (remove.empty()) return;
    // Written by an older bubblebench that changed files in place: a crash left a
    // `.partial-*` group or a run HDF5 cannot read. Removed in a new version of the file.
    Staged st(path_, true);
    {
      Handle f(open_existing(st.tmp(), H5F_ACC_RDWR), H5Fclose);
      Handle runs(H5Gopen2(f.get(), "runs", H5P_DEFAULT), H5Gclose);
      for (const auto& name : remove) {
        if (H5Ldelete(runs.get(), name.c_str(), H5P_DEFAULT) < 0 && !is_partial(name))
          io_fail(path_, "run '" + name +
                             "' is unreadable (a write that failed half-way, e.g. on a full "
                             "disk) and HDF5 cannot remove it; copy the complete runs to a new "
                             "file (docs/runtime.md, \"Salvaging a damaged file\") or start "
                             "again with --force");
        // A partial group HDF5 cannot delete stays: readers skip it by name.
      }
      runs.close();
      if (!f.close()) io_fail(path_, "HDF5 failed to close the file after cleaning it up");
    }
    st.commit();
    return;
  }
  // A new file, complete with its root attributes and /runs before it gets its name: a kill
  // or a full disk leaves no empty or half-made file behind.
  Staged st(path_, false);
  {
    Handle fapl(fapl_no_locking(), H5Pclose);
    Handle f(H5Fcreate(st.tmp().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
    if (!f.ok()) io_fail(path_, "cannot create the file");
    write_attr(f.get(), "schema_version", kSchemaVersion, path_);
    for (const auto& [k, v] : root_attrs) write_attr(f.get(), k, v, path_);
    {
      Handle runs(H5Gcreate2(f.get(), "runs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      if (!runs.ok()) io_fail(path_, "cannot create /runs");
    }
    if (!f.close()) io_fail(path_, "HDF5 failed to write the new file");
  }
  st.commit(/*no_replace=*/mode == OpenMode::kCreate);
}

// One commit per run (see Staged): a copy of the file gets the run under its final name,
// `status` last, and replaces the file. Room for the run is reserved in the copy first, so a
// full disk fails before HDF5 writes anything ("no room for run ..."); any failure leaves the
// file as it was. Cost: copying the file once per run (measured in docs/runtime.md).
void ResultsFile::write_run(const RunRecord& run) {
  quiet_hdf5();
  const std::string key = sanitize_key(run.key);
  Staged st(path_, true);
  reserve_room(st.tmp(), path_, room_for(run), "run '" + key + "'");
  {
    Handle f(open_existing(st.tmp(), H5F_ACC_RDWR), H5Fclose);
    Handle runs(H5Gopen2(f.get(), "runs", H5P_DEFAULT), H5Gclose);
    if (!runs.ok()) io_fail(path_, "no /runs group");
    // A group of this name is an earlier, incomplete one (complete runs are not written again).
    if (H5Lexists(runs.get(), key.c_str(), H5P_DEFAULT) > 0 &&
        H5Ldelete(runs.get(), key.c_str(), H5P_DEFAULT) < 0)
      io_fail(path_, "HDF5 failed to remove the incomplete run '" + key + "' it replaces");
    {
      Handle g(H5Gcreate2(runs.get(), key.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
               H5Gclose);
      if (!g.ok()) io_fail(path_, "cannot create the run group");
      write_run_objects(g.get(), run, path_);
      write_attr(g.get(), "status", std::string("complete"), path_);  // last: the run is whole
    }
    runs.close();
    if (!f.close()) io_fail(path_, "HDF5 failed to write the run '" + key + "'");
  }
  st.commit();
  complete_.insert(key);
}

std::set<std::string> read_complete_keys(const std::string& path) {
  Handle f(open_existing(path, H5F_ACC_RDONLY), H5Fclose);
  std::set<std::string> out;
  if (H5Lexists(f.get(), "runs", H5P_DEFAULT) <= 0) return out;
  Handle runs(H5Gopen2(f.get(), "runs", H5P_DEFAULT), H5Gclose);
  for (const auto& name : link_names(runs.get()))
    if (!is_partial(name) && is_hard_link(runs.get(), name.c_str()) &&
        group_is_complete(runs.get(), name.c_str()))
      out.insert(name);
  return out;
}

Attrs read_root_attrs(const std::string& path) {
  Handle f(open_existing(path, H5F_ACC_RDONLY), H5Fclose);
  return read_all_attrs(f.get());
}

RunRecord read_run(const std::string& path, const std::string& key) {
  Handle f(open_existing(path, H5F_ACC_RDONLY), H5Fclose);
  Handle g(H5Gopen2(f.get(), ("runs/" + key).c_str(), H5P_DEFAULT), H5Gclose);
  if (!g.ok()) io_fail(path, "no run '" + key + "'");
  RunRecord run;
  run.key = key;
  run.attrs = read_all_attrs(g.get());
  {
    Handle ds(H5Dopen2(g.get(), "step_time_s", H5P_DEFAULT), H5Dclose);
    if (!ds.ok()) io_fail(path, "run '" + key + "' has no step_time_s");
    run.step_time_s.resize(dataset_length(ds.get()));
    if (!run.step_time_s.empty())
      check(H5Dread(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                    run.step_time_s.data()),
            path, "read step_time_s");
  }
  {
    Handle ds(H5Dopen2(g.get(), "events", H5P_DEFAULT), H5Dclose);
    if (!ds.ok()) io_fail(path, "run '" + key + "' has no events");
    std::vector<Column> cols = event_columns({});
    for (Column& c : cols) c = h5::read_column(ds.get(), c.name, c.type, path);
    run.events.resize(dataset_length(ds.get()));
    for (std::size_t i = 0; i < run.events.size(); ++i) {
      EventRecord& e = run.events[i];
      auto u32 = [&](const Column& c) {
        return i < c.ints.size() ? static_cast<std::uint32_t>(c.ints[i]) : 0u;
      };
      auto real = [&](const Column& c) { return i < c.reals.size() ? c.reals[i] : 0.0; };
      e = {u32(cols[0]),
           u32(cols[1]),
           u32(cols[2]),
           u32(cols[3]),
           i < cols[4].texts.size() ? cols[4].texts[i] : std::string(),
           real(cols[5]),
           real(cols[6])};
    }
  }
  {
    Handle ds(H5Dopen2(g.get(), "ranks", H5P_DEFAULT), H5Dclose);
    if (!ds.ok()) io_fail(path, "run '" + key + "' has no ranks");
    run.ranks = read_ranks(ds.get(), path);
  }
  if (H5Lexists(g.get(), "links", H5P_DEFAULT) > 0) {
    run.links = read_links(g.get(), path);
    Handle links(H5Gopen2(g.get(), "links", H5P_DEFAULT), H5Gclose);
    run.links_attrs = read_all_attrs(links.get());
  }
  return run;
}

}  // namespace bb
