#include "results/hdf5_file.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/error.hpp"
#include "results/links_io.hpp"

namespace bb {
namespace {

// Owns an HDF5 identifier.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }
  // Closes now and says whether HDF5 managed to (a file's close writes what is still dirty).
  bool close() {
    const hid_t id = id_;
    id_ = -1;
    return id < 0 || close_(id) >= 0;
  }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

void quiet_hdf5() {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

[[noreturn]] void io_fail(const std::string& path, const std::string& what) {
  throw IoError(path + ": " + what);
}

void check(herr_t rc, const std::string& path, const char* what) {
  if (rc < 0) io_fail(path, std::string("HDF5 failed to ") + what);
}

hid_t vlen_string_type() {
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return t;
}

void write_attr(hid_t obj, const std::string& name, const AttrValue& value,
                const std::string& path) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  if (const auto* i = std::get_if<std::int64_t>(&value)) {
    Handle a(H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
             H5Aclose);
    check(a.ok() ? H5Awrite(a.get(), H5T_NATIVE_INT64, i) : -1, path, "write an attribute");
  } else if (const auto* d = std::get_if<double>(&value)) {
    Handle a(H5Acreate2(obj, name.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
             H5Aclose);
    check(a.ok() ? H5Awrite(a.get(), H5T_NATIVE_DOUBLE, d) : -1, path, "write an attribute");
  } else {
    Handle t(vlen_string_type(), H5Tclose);
    Handle a(H5Acreate2(obj, name.c_str(), t.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
             H5Aclose);
    const char* s = std::get<std::string>(value).c_str();
    check(a.ok() ? H5Awrite(a.get(), t.get(), &s) : -1, path, "write an attribute");
  }
}

bool read_attr(hid_t obj, const char* name, AttrValue* out) {
  if (H5Aexists(obj, name) <= 0) return false;
  Handle a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  Handle t(H5Aget_type(a.get()), H5Tclose);
  switch (H5Tget_class(t.get())) {
    case H5T_INTEGER: {
      std::int64_t v = 0;
      if (H5Aread(a.get(), H5T_NATIVE_INT64, &v) < 0) return false;
      *out = v;
      return true;
    }
    case H5T_FLOAT: {
      double v = 0;
      if (H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v) < 0) return false;
      *out = v;
      return true;
    }
    case H5T_STRING: {
      Handle mt(vlen_string_type(), H5Tclose);
      char* s = nullptr;
      if (H5Aread(a.get(), mt.get(), &s) < 0) return false;
      *out = std::string(s ? s : "");
      H5free_memory(s);
      return true;
    }
    default:
      return false;
  }
}

Attrs read_all_attrs(hid_t obj) {
  Attrs out;
  H5O_info_t info;
  if (H5Oget_info2(obj, &info, H5O_INFO_NUM_ATTRS) < 0) return out;
  for (hsize_t i = 0; i < info.num_attrs; ++i) {
    char name[256] = {0};
    if (H5Aget_name_by_idx(obj, ".", H5_INDEX_CRT_ORDER, H5_ITER_INC, i, name, sizeof name,
                           H5P_DEFAULT) < 0 &&
        H5Aget_name_by_idx(obj, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name,
                           H5P_DEFAULT) < 0)
      continue;
    AttrValue v;
    if (read_attr(obj, name, &v)) out.emplace_back(name, std::move(v));
  }
  return out;
}

// In-memory layouts of the compound datasets.
struct EventMem {
  std::uint32_t iter, rank, chunk, microbatch;
  const char* kind;
  double t_start_s, t_end_s;
};
struct RankMem {
  std::uint32_t rank;
  const char* host;
  std::int32_t device;
  double busy_s, wait_s, comm_s;
  std::uint64_t peak_activation_bytes, peak_device_bytes, param_bytes, peak_activation_bytes_model;
};

hid_t event_type(hid_t str) {
  const hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(EventMem));
  H5Tinsert(t, "iter", HOFFSET(EventMem, iter), H5T_NATIVE_UINT32);
  H5Tinsert(t, "rank", HOFFSET(EventMem, rank), H5T_NATIVE_UINT32);
  H5Tinsert(t, "chunk", HOFFSET(EventMem, chunk), H5T_NATIVE_UINT32);
  H5Tinsert(t, "microbatch", HOFFSET(EventMem, microbatch), H5T_NATIVE_UINT32);
  H5Tinsert(t, "kind", HOFFSET(EventMem, kind), str);
  H5Tinsert(t, "t_start_s", HOFFSET(EventMem, t_start_s), H5T_NATIVE_DOUBLE);
  H5Tinsert(t, "t_end_s", HOFFSET(EventMem, t_end_s), H5T_NATIVE_DOUBLE);
  return t;
}

// The ranks table's row: RankMem, then one 8-byte cell per column of EXTRA (int64, double,
// or a vlen string's char*), in its order.
constexpr std::size_t kExtraCell = 8;
static_assert(sizeof(RankMem) % kExtraCell == 0);

hid_t rank_type(hid_t str, const Attrs& extra = {}) {
  const hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(RankMem) + kExtraCell * extra.size());
  H5Tinsert(t, "rank", HOFFSET(RankMem, rank), H5T_NATIVE_UINT32);
  H5Tinsert(t, "host", HOFFSET(RankMem, host), str);
  H5Tinsert(t, "device", HOFFSET(RankMem, device), H5T_NATIVE_INT32);
  H5Tinsert(t, "busy_s", HOFFSET(RankMem, busy_s), H5T_NATIVE_DOUBLE);
  H5Tinsert(t, "wait_s", HOFFSET(RankMem, wait_s), H5T_NATIVE_DOUBLE);
  H5Tinsert(t, "comm_s", HOFFSET(RankMem, comm_s), H5T_NATIVE_DOUBLE);
  H5Tinsert(t, "peak_activation_bytes", HOFFSET(RankMem, peak_activation_bytes), H5T_NATIVE_UINT64);
  H5Tinsert(t, "peak_device_bytes", HOFFSET(RankMem, peak_device_bytes), H5T_NATIVE_UINT64);
  H5Tinsert(t, "param_bytes", HOFFSET(RankMem, param_bytes), H5T_NATIVE_UINT64);
  H5Tinsert(t, "peak_activation_bytes_model", HOFFSET(RankMem, peak_activation_bytes_model),
            H5T_NATIVE_UINT64);
  for (std::size_t i = 0; i < extra.size(); ++i) {
    const AttrValue& v = extra[i].second;
    const hid_t type = std::holds_alternative<std::int64_t>(v) ? H5T_NATIVE_INT64
                       : std::holds_alternative<double>(v)     ? H5T_NATIVE_DOUBLE
                                                               : str;
    H5Tinsert(t, extra[i].first.c_str(), sizeof(RankMem) + kExtraCell * i, type);
  }
  return t;
}

// The ranks table's rows (RankMem and the extra cells), pointing into RANKS' strings.
std::vector<unsigned char> rank_rows(const std::vector<RankRecord>& ranks,
                                     const std::string& path) {
  const Attrs none;
  const Attrs& cols = ranks.empty() ? none : ranks[0].extra;
  const std::size_t stride = sizeof(RankMem) + kExtraCell * cols.size();
  std::vector<unsigned char> rows(stride * ranks.size());
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const RankRecord& r = ranks[i];
    const RankMem m = {r.rank,
                       r.host.c_str(),
                       r.device,
                       r.busy_s,
                       r.wait_s,
                       r.comm_s,
                       r.peak_activation_bytes,
                       r.peak_device_bytes,
                       r.param_bytes,
                       r.peak_activation_bytes_model};
    unsigned char* row = rows.data() + i * stride;
    std::memcpy(row, &m, sizeof m);
    for (std::size_t c = 0; c < cols.size(); ++c) {
      const AttrValue* v = find_attr(r.extra, cols[c].first);
      if (v == nullptr || v->index() != cols[c].second.index())
        io_fail(path, "rank " + std::to_string(i) + " has no column " + cols[c].first +
                          " of rank 0's type");
      unsigned char* cell = row + sizeof(RankMem) + kExtraCell * c;
      if (const auto* x = std::get_if<std::int64_t>(v)) std::memcpy(cell, x, kExtraCell);
      if (const auto* x = std::get_if<double>(v)) std::memcpy(cell, x, kExtraCell);
      if (const auto* x = std::get_if<std::string>(v)) {
        const char* p = x->c_str();
        std::memcpy(cell, &p, sizeof p);
      }
    }
  }
  return rows;
}

// The ranks table's columns beyond RankMem's into each rank's `extra`.
void read_extra_columns(hid_t ds, hid_t str, std::vector<RankRecord>& ranks,
                        const std::string& path) {
  static const std::set<std::string> fixed = {"rank",
                                              "host",
                                              "device",
                                              "busy_s",
                                              "wait_s",
                                              "comm_s",
                                              "peak_activation_bytes",
                                              "peak_device_bytes",
                                              "param_bytes",
                                              "peak_activation_bytes_model"};
  Handle ft(H5Dget_type(ds), H5Tclose);
  const int members = H5Tget_nmembers(ft.get());
  for (int m = 0; m < members; ++m) {
    char* raw = H5Tget_member_name(ft.get(), static_cast<unsigned>(m));
    const std::string name = raw != nullptr ? raw : "";
    H5free_memory(raw);
    if (name.empty() || fixed.count(name) != 0) continue;
    const H5T_class_t cls = H5Tget_member_class(ft.get(), static_cast<unsigned>(m));
    const hid_t mem = cls == H5T_INTEGER  ? H5T_NATIVE_INT64
                      : cls == H5T_FLOAT  ? H5T_NATIVE_DOUBLE
                      : cls == H5T_STRING ? str
                                          : -1;
    if (mem < 0) continue;  // a column of another kind: not ours
    Handle t(H5Tcreate(H5T_COMPOUND, kExtraCell), H5Tclose);
    H5Tinsert(t.get(), name.c_str(), 0, mem);
    std::vector<unsigned char> cells(kExtraCell * ranks.size());
    check(H5Dread(ds, t.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, cells.data()), path,
          "read a ranks column");
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const unsigned char* cell = cells.data() + kExtraCell * i;
      AttrValue v;
      if (cls == H5T_INTEGER) {
        std::int64_t x;
        std::memcpy(&x, cell, sizeof x);
        v = x;
      } else if (cls == H5T_FLOAT) {
        double x;
        std::memcpy(&x, cell, sizeof x);
        v = x;
      } else {
        const char* p;
        std::memcpy(&p, cell, sizeof p);
        v = std::string(p != nullptr ? p : "");
      }
      ranks[i].extra.emplace_back(name, std::move(v));
    }
    if (cls == H5T_STRING) {
      Handle space(H5Dget_space(ds), H5Sclose);
      H5Dvlen_reclaim(t.get(), space.get(), H5P_DEFAULT, cells.data());
    }
  }
}

// A 1-D dataset, chunked and compressed.
void write_dataset(hid_t group, const char* name, hid_t type, const void* data, std::size_t n,
                   const std::string& path) {
  const hsize_t dims[1] = {n};
  const hsize_t maxdims[1] = {H5S_UNLIMITED};
  Handle space(H5Screate_simple(1, dims, maxdims), H5Sclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  const hsize_t chunk[1] = {std::clamp<hsize_t>(n, 1, 4096)};
  H5Pset_chunk(dcpl.get(), 1, chunk);
  H5Pset_shuffle(dcpl.get());
  H5Pset_deflate(dcpl.get(), 4);
  Handle ds(H5Dcreate2(group, name, type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
            H5Dclose);
  if (!ds.ok()) io_fail(path, std::string("cannot create dataset ") + name);
  if (n > 0)
    check(H5Dwrite(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), path, "write a dataset");
}

std::size_t dataset_length(hid_t ds) {
  Handle space(H5Dget_space(ds), H5Sclose);
  hsize_t dims[1] = {0};
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  return static_cast<std::size_t>(dims[0]);
}

// File access without HDF5's own file locks. A results file is never modified in place (see
// Staged below), and one writer at a time is ensured by WriterLock; HDF5's locks would only make
// a reader that holds the file open (h5py in a notebook) stop the writer, or fail on file
// systems without flock.
hid_t fapl_no_locking() {
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_file_locking(fapl, false, true);
  return fapl;
}

// Opens an existing results file, refusing what is not one of ours.
hid_t open_existing(const std::string& path, unsigned flags) {
  quiet_hdf5();
  Handle fapl(fapl_no_locking(), H5Pclose);
  if (H5Fis_hdf5(path.c_str()) <= 0)
    io_fail(path, "not a readable HDF5 file (truncated or corrupt?); refusing to touch it");
  const hid_t f = H5Fopen(path.c_str(), flags, fapl.get());
  if (f < 0) io_fail(path, "cannot open the HDF5 file (truncated, corrupt or read-only?)");
  return f;
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
  for (const LinkFit& l : run.links) b += 512 + 48 * (l.samples.size() + l.regimes.size());
  for (const RankRecord& r : run.ranks) {
    b += 160 + r.host.size();
    for (const auto& [k, v] : r.extra)
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
  write_dataset(g, "step_time_s", H5T_NATIVE_DOUBLE, run.step_time_s.data(), run.step_time_s.size(),
                path);
  Handle str(vlen_string_type(), H5Tclose);
  {
    std::vector<EventMem> ev(run.events.size());
    for (std::size_t i = 0; i < ev.size(); ++i) {
      const EventRecord& e = run.events[i];
      ev[i] = {e.iter, e.rank, e.chunk, e.microbatch, e.kind.c_str(), e.t_start_s, e.t_end_s};
    }
    Handle t(event_type(str.get()), H5Tclose);
    write_dataset(g, "events", t.get(), ev.data(), ev.size(), path);
  }
  const std::vector<unsigned char> rows = rank_rows(run.ranks, path);
  Handle t(rank_type(str.get(), run.ranks.empty() ? Attrs{} : run.ranks[0].extra), H5Tclose);
  write_dataset(g, "ranks", t.get(), rows.data(), run.ranks.size(), path);
  if (!run.links.empty()) write_links(g, run.links, run.links_attrs, path);
}

// The commit of a change to a results file, as a database commits a transaction: the new
// version is written whole under a temporary name beside the file (a copy of the current file
// that HDF5 then changes, or a new file), flushed to the disk, and renamed over the file's name
// (rename(2) replaces the name atomically; the folder is synced after it). So PATH is at every
// moment either the previous complete version or the next one, whatever kills the writer and
// when; a reader that holds PATH open keeps reading the version it opened. Until commit() the
// temporary file is removed on every way out (a SIGKILL leaves it behind: the next writer,
// holding the writer lock, replaces it).
class Staged {
 public:
  // copy_current: start from a copy of PATH; else from nothing (the caller creates the file).
  Staged(std::string path, bool copy_current) : path_(std::move(path)), tmp_(path_ + ".bb-tmp") {
    ::unlink(tmp_.c_str());  // a leftover of a writer that was killed
    if (copy_current) copy_file(path_, tmp_);
  }
  Staged(const Staged&) = delete;
  Staged& operator=(const Staged&) = delete;
  ~Staged() {
    if (!committed_) ::unlink(tmp_.c_str());
  }
  const std::string& tmp() const { return tmp_; }

  // The temporary file becomes PATH. no_replace: fail (ConfigError) if PATH exists by now.
  void commit(bool no_replace = false) {
    sync_file(tmp_);
    int rc = -1;
    if (no_replace) {
      rc = ::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE);
      if (rc != 0 && errno == EEXIST)
        throw ConfigError("output file " + path_ +
                          " appeared while it was being created: pass --resume to continue it or "
                          "--force to replace it");
      if (rc != 0 && errno != EINVAL && errno != ENOSYS)
        io_fail(path_,
                std::string("cannot rename the new file into place: ") + std::strerror(errno));
    }
    if (rc != 0 && ::rename(tmp_.c_str(), path_.c_str()) != 0)
      io_fail(path_,
              std::string("cannot rename the new version into place: ") + std::strerror(errno));
    committed_ = true;
    sync_folder(path_);
  }

 private:
  static void sync_file(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0) {
      const int err = errno;
      if (fd >= 0) ::close(fd);
      io_fail(path, std::string("cannot sync to disk: ") + std::strerror(err));
    }
    ::close(fd);
  }
  // After the rename: the folder's entry reaches the disk (a power cut keeps the new version).
  // Where folders cannot be synced, the rename is still atomic for every other failure.
  static void sync_folder(const std::string& path) {
    const std::filesystem::path p(path);
    const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    if (::fsync(fd) != 0) {
      // EINVAL on file systems that do not sync folders; nothing more to do.
    }
    ::close(fd);
  }
  static void copy_file(const std::string& from, const std::string& to) {
    const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) io_fail(from, std::string("cannot open for copying: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(in, &st) != 0) {
      ::close(in);
      io_fail(from, std::string("cannot stat: ") + std::strerror(errno));
    }
    const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, st.st_mode & 0777);
    if (out < 0) {
      const int err = errno;
      ::close(in);
      io_fail(to, std::string("cannot create the new version: ") + std::strerror(err));
    }
    if (::fchmod(out, st.st_mode & 07777) != 0) {
      // Keeps the creation mode (umask applied); the copy is still correct.
    }
    off_t left = st.st_size;
    bool plain = false;  // copy_file_range unsupported here: read and write
    std::vector<char> buf;
    int err = 0;
    while (left > 0 && err == 0) {
      ssize_t n = -1;
      if (!plain) {
        n = ::copy_file_range(in, nullptr, out, nullptr, static_cast<std::size_t>(left), 0);
        if (n < 0 &&
            (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
          plain = true;
          continue;
        }
      } else {
        buf.resize(1 << 20);
        n = ::read(in, buf.data(), buf.size());
        for (ssize_t done = 0; n > 0 && done < n;) {
          const ssize_t w = ::write(out, buf.data() + done, static_cast<std::size_t>(n - done));
          if (w < 0) {
            if (errno == EINTR) continue;
            n = -1;
            break;
          }
          done += w;
        }
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        err = errno;
      else if (n == 0)
        err = EIO;  // the file shrank under us: it is not ours to copy
      else
        left -= n;
    }
    ::close(in);
    if (::close(out) != 0 && err == 0) err = errno;
    if (err != 0)
      io_fail(from,
              (err == ENOSPC || err == EFBIG || err == EDQUOT ? "no room for a copy of the file: "
                                                              : "cannot copy the file: ") +
                  std::string(std::strerror(err)) + "; the file holds the runs written before");
  }
  std::string path_, tmp_;
  bool committed_ = false;
};

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
  Handle str(vlen_string_type(), H5Tclose);
  {
    Handle ds(H5Dopen2(g.get(), "events", H5P_DEFAULT), H5Dclose);
    if (!ds.ok()) io_fail(path, "run '" + key + "' has no events");
    std::vector<EventMem> ev(dataset_length(ds.get()));
    Handle t(event_type(str.get()), H5Tclose);
    if (!ev.empty()) {
      check(H5Dread(ds.get(), t.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ev.data()), path,
            "read events");
      for (const EventMem& e : ev)
        run.events.push_back(
            {e.iter, e.rank, e.chunk, e.microbatch, e.kind ? e.kind : "", e.t_start_s, e.t_end_s});
      Handle space(H5Dget_space(ds.get()), H5Sclose);
      H5Dvlen_reclaim(t.get(), space.get(), H5P_DEFAULT, ev.data());
    }
  }
  {
    Handle ds(H5Dopen2(g.get(), "ranks", H5P_DEFAULT), H5Dclose);
    if (!ds.ok()) io_fail(path, "run '" + key + "' has no ranks");
    std::vector<RankMem> rk(dataset_length(ds.get()));
    Handle t(rank_type(str.get()), H5Tclose);
    if (!rk.empty()) {
      check(H5Dread(ds.get(), t.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, rk.data()), path,
            "read ranks");
      for (const RankMem& r : rk)
        run.ranks.push_back({r.rank, r.host ? r.host : "", r.device, r.busy_s, r.wait_s, r.comm_s,
                             r.peak_activation_bytes, r.peak_device_bytes, r.param_bytes,
                             r.peak_activation_bytes_model});
      Handle space(H5Dget_space(ds.get()), H5Sclose);
      H5Dvlen_reclaim(t.get(), space.get(), H5P_DEFAULT, rk.data());
      read_extra_columns(ds.get(), str.get(), run.ranks, path);
    }
  }
  if (H5Lexists(g.get(), "links", H5P_DEFAULT) > 0) {
    run.links = read_links(g.get(), path);
    Handle links(H5Gopen2(g.get(), "links", H5P_DEFAULT), H5Gclose);
    run.links_attrs = read_all_attrs(links.get());
  }
  return run;
}

}  // namespace bb
