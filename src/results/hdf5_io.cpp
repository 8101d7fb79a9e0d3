#include "results/hdf5_io.hpp"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/error.hpp"

namespace bb::h5 {

void quiet() {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

void fail(const std::string& path, const std::string& what) {
  throw IoError(path + ": " + what);
}

void check(herr_t rc, const std::string& path, const char* what) {
  if (rc < 0) fail(path, std::string("HDF5 failed to ") + what);
}

namespace {

hid_t vlen_string_type() {
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return t;
}

// A fixed-length string of WIDTH bytes, NUL-padded (numpy's 'S', PyTables' StringCol).
hid_t fixed_string_type(std::size_t width) {
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, std::max<std::size_t>(width, 1));
  H5Tset_strpad(t, H5T_STR_NULLPAD);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return t;
}

// The memory type of a number column (texts: -1, their type depends on the width).
hid_t native_type(ColType t) {
  const hid_t types[] = {H5T_NATIVE_INT32,  H5T_NATIVE_UINT32, H5T_NATIVE_INT64,
                         H5T_NATIVE_UINT64, H5T_NATIVE_DOUBLE, -1};
  return types[static_cast<int>(t)];
}

void sync_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    fail(path, std::string("cannot sync to disk: ") + std::strerror(err));
  }
  ::close(fd);
}
// After the rename: the folder's entry reaches the disk (a power cut keeps the new version).
// Where folders cannot be synced, the rename is still atomic for every other failure.
void sync_folder(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  if (::fsync(fd) != 0) {
    // EINVAL on file systems that do not sync folders; nothing more to do.
  }
  ::close(fd);
}
void copy_file(const std::string& from, const std::string& to) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) fail(from, std::string("cannot open for copying: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(in, &st) != 0) {
    ::close(in);
    fail(from, std::string("cannot stat: ") + std::strerror(errno));
  }
  const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, st.st_mode & 0777);
  if (out < 0) {
    const int err = errno;
    ::close(in);
    fail(to, std::string("cannot create the new version: ") + std::strerror(err));
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
      if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
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
    fail(from, (err == ENOSPC || err == EFBIG || err == EDQUOT ? "no room for a copy of the file: "
                                                               : "cannot copy the file: ") +
                   std::string(std::strerror(err)) + "; the file holds the runs written before");
}

}  // namespace

void write_attr(hid_t obj, const std::string& name, const AttrValue& value,
                const std::string& path) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  if (const auto* i = std::get_if<std::int64_t>(&value)) {
    Handle a(H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
             H5Aclose);
    check(a.ok() ? H5Awrite(a.get(), H5T_NATIVE_INT64, i) : -1, path, "write an attribute");
  } else if (const auto* u = std::get_if<std::uint64_t>(&value)) {
    Handle a(H5Acreate2(obj, name.c_str(), H5T_STD_U64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
             H5Aclose);
    check(a.ok() ? H5Awrite(a.get(), H5T_NATIVE_UINT64, u) : -1, path, "write an attribute");
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
      if (H5Tget_sign(t.get()) == H5T_SGN_NONE && H5Tget_size(t.get()) == 8) {  // a uint64
        std::uint64_t v = 0;
        if (H5Aread(a.get(), H5T_NATIVE_UINT64, &v) < 0) return false;
        *out = v;
        return true;
      }
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
      if (H5Tis_variable_str(t.get()) <= 0) {  // fixed length (h5py's numpy.bytes_, ...)
        std::string s(H5Tget_size(t.get()), '\0');
        if (s.empty() || H5Aread(a.get(), t.get(), s.data()) < 0) return false;
        *out = s.substr(0, s.find('\0'));
        return true;
      }
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

std::size_t Column::size() const {
  return type == ColType::kText ? texts.size() : type == ColType::kF64 ? reals.size() : ints.size();
}

void write_table(hid_t group, const char* name, const std::vector<Column>& cols,
                 const std::string& row, const Attrs& attrs, const std::string& path) {
  const std::size_t n = cols.empty() ? 0 : cols[0].size();
  // The packed row: each column's cell at its offset (strings: their longest value's width).
  std::vector<std::size_t> offset, width;
  std::size_t stride = 0;
  for (const Column& c : cols) {
    if (c.size() != n)
      fail(path, std::string("table ") + name + ": column " + c.name + " has " +
                     std::to_string(c.size()) + " rows, not " + std::to_string(n));
    std::size_t w = 8;
    if (c.type == ColType::kText) {
      w = 1;
      for (const std::string& s : c.texts) w = std::max(w, s.size());
    } else if (c.type == ColType::kI32 || c.type == ColType::kU32) {
      w = 4;
    }
    offset.push_back(stride);
    width.push_back(w);
    stride += w;
  }
  Handle type(H5Tcreate(H5T_COMPOUND, std::max<std::size_t>(stride, 1)), H5Tclose);
  for (std::size_t i = 0; i < cols.size(); ++i) {
    Handle str(cols[i].type == ColType::kText ? fixed_string_type(width[i]) : -1, H5Tclose);
    const hid_t t = cols[i].type == ColType::kText ? str.get() : native_type(cols[i].type);
    check(H5Tinsert(type.get(), cols[i].name.c_str(), offset[i], t), path, "make a table type");
  }
  std::vector<unsigned char> data(stride * n);
  for (std::size_t i = 0; i < cols.size(); ++i) {
    const Column& c = cols[i];
    for (std::size_t r = 0; r < n; ++r) {
      unsigned char* cell = data.data() + r * stride + offset[i];
      auto put = [cell](auto x) { std::memcpy(cell, &x, sizeof x); };
      if (c.type == ColType::kText)
        std::memcpy(cell, c.texts[r].data(), c.texts[r].size());
      else if (c.type == ColType::kF64)
        put(c.reals[r]);
      else if (c.type == ColType::kI32)
        put(static_cast<std::int32_t>(c.ints[r]));
      else if (c.type == ColType::kU32)
        put(static_cast<std::uint32_t>(c.ints[r]));
      else if (c.type == ColType::kU64)
        put(static_cast<std::uint64_t>(c.ints[r]));
      else
        put(c.ints[r]);
    }
  }
  Attrs all = {{"row", row}};
  for (const Column& c : cols) {
    if (!c.unit.empty()) all.emplace_back(c.name + "_unit", c.unit);
    if (!c.meaning.empty()) all.emplace_back(c.name + "_meaning", c.meaning);
  }
  all.insert(all.end(), attrs.begin(), attrs.end());
  write_dataset(group, name, type.get(), data.data(), n, all, path);
}

void write_dataset(hid_t group, const char* name, hid_t type, const void* data, std::size_t n,
                   const Attrs& attrs, const std::string& path) {
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
  if (!ds.ok()) fail(path, std::string("cannot create dataset ") + name);
  if (n > 0)
    check(H5Dwrite(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), path, "write a dataset");
  for (const auto& [k, v] : attrs) write_attr(ds.get(), k, v, path);
}

std::size_t dataset_length(hid_t ds) {
  Handle space(H5Dget_space(ds), H5Sclose);
  hsize_t dims[1] = {0};
  if (H5Sget_simple_extent_ndims(space.get()) != 1) return 0;
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  return static_cast<std::size_t>(dims[0]);
}

std::vector<std::pair<std::string, H5T_class_t>> table_members(hid_t ds) {
  std::vector<std::pair<std::string, H5T_class_t>> out;
  Handle ft(H5Dget_type(ds), H5Tclose);
  const int members = H5Tget_class(ft.get()) == H5T_COMPOUND ? H5Tget_nmembers(ft.get()) : 0;
  for (int m = 0; m < members; ++m) {
    char* raw = H5Tget_member_name(ft.get(), static_cast<unsigned>(m));
    out.emplace_back(raw != nullptr ? raw : "",
                     H5Tget_member_class(ft.get(), static_cast<unsigned>(m)));
    H5free_memory(raw);
  }
  return out;
}

Column read_column(hid_t ds, const std::string& name, ColType type, const std::string& path) {
  Column c;
  c.name = name;
  c.type = type;
  Handle ft(H5Dget_type(ds), H5Tclose);
  const int m = H5Tget_member_index(ft.get(), name.c_str());
  if (m < 0) return c;
  const std::size_t n = dataset_length(ds);
  if (n == 0) return c;
  Handle member(H5Tget_member_type(ft.get(), static_cast<unsigned>(m)), H5Tclose);
  const bool vlen = type == ColType::kText && H5Tis_variable_str(member.get()) > 0;
  const std::size_t width = type != ColType::kText ? 8
                            : vlen                 ? sizeof(char*)
                                                   : H5Tget_size(member.get());
  Handle str(type != ColType::kText ? -1
             : vlen                 ? vlen_string_type()
                                    : fixed_string_type(width),
             H5Tclose);
  Handle t(H5Tcreate(H5T_COMPOUND, width), H5Tclose);
  const hid_t mem = type == ColType::kText  ? str.get()
                    : type == ColType::kF64 ? H5T_NATIVE_DOUBLE
                                            : H5T_NATIVE_INT64;
  check(H5Tinsert(t.get(), name.c_str(), 0, mem), path, "make a column type");
  std::vector<unsigned char> cells(width * n);
  check(H5Dread(ds, t.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, cells.data()), path,
        ("read the column " + name).c_str());
  for (std::size_t r = 0; r < n; ++r) {
    const unsigned char* cell = cells.data() + width * r;
    if (type == ColType::kF64) {
      double x;
      std::memcpy(&x, cell, sizeof x);
      c.reals.push_back(x);
    } else if (type != ColType::kText) {
      std::int64_t x;
      std::memcpy(&x, cell, sizeof x);
      c.ints.push_back(x);
    } else if (vlen) {
      const char* p;
      std::memcpy(&p, cell, sizeof p);
      c.texts.emplace_back(p != nullptr ? p : "");
    } else {
      const char* p = reinterpret_cast<const char*>(cell);
      c.texts.emplace_back(p, strnlen(p, width));
    }
  }
  if (vlen) {
    Handle space(H5Dget_space(ds), H5Sclose);
    H5Dvlen_reclaim(t.get(), space.get(), H5P_DEFAULT, cells.data());
  }
  return c;
}

hid_t fapl_no_locking() {
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_file_locking(fapl, false, true);
  return fapl;
}

hid_t open_existing(const std::string& path, unsigned flags) {
  quiet();
  Handle fapl(fapl_no_locking(), H5Pclose);
  if (H5Fis_hdf5(path.c_str()) <= 0)
    fail(path, "not a readable HDF5 file (truncated or corrupt?); refusing to touch it");
  const hid_t f = H5Fopen(path.c_str(), flags, fapl.get());
  if (f < 0) fail(path, "cannot open the HDF5 file (truncated, corrupt or read-only?)");
  return f;
}

Staged::Staged(std::string path, bool copy_current)
    : path_(std::move(path)), tmp_(path_ + ".bb-tmp") {
  ::unlink(tmp_.c_str());  // a leftover of a writer that was killed
  if (copy_current) copy_file(path_, tmp_);
}

Staged::~Staged() {
  if (!committed_) ::unlink(tmp_.c_str());
}

void Staged::commit(bool no_replace) {
  sync_file(tmp_);
  int rc = -1;
  if (no_replace) {
    rc = ::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE);
    if (rc != 0 && errno == EEXIST)
      throw ConfigError("output file " + path_ +
                        " appeared while it was being created: pass --resume to continue it or "
                        "--force to replace it");
    if (rc != 0 && errno != EINVAL && errno != ENOSYS)
      fail(path_, std::string("cannot rename the new file into place: ") + std::strerror(errno));
  }
  if (rc != 0 && ::rename(tmp_.c_str(), path_.c_str()) != 0)
    fail(path_, std::string("cannot rename the new version into place: ") + std::strerror(errno));
  committed_ = true;
  sync_folder(path_);
}

void commit_change(const std::string& path, const std::function<void(hid_t file)>& change) {
  quiet();
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  if (exists && H5Fis_hdf5(path.c_str()) <= 0)
    fail(path, "exists and is not an HDF5 file (not replaced)");
  Staged st(path, exists);
  {
    Handle fapl(fapl_no_locking(), H5Pclose);
    Handle f(exists ? H5Fopen(st.tmp().c_str(), H5F_ACC_RDWR, fapl.get())
                    : H5Fcreate(st.tmp().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()),
             H5Fclose);
    if (!f.ok()) fail(path, exists ? "cannot open the HDF5 file" : "cannot create the file");
    change(f.get());
    if (!f.close()) fail(path, "HDF5 failed to write the file");
  }
  st.commit(/*no_replace=*/!exists);
}

}  // namespace bb::h5
