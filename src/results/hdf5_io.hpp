// The HDF5 C API pieces that the results file (hdf5_file.cpp) and the link tables
// (links_io.cpp) share: owned identifiers, scalar attributes, tables (1-D compound datasets,
// written column by column, with each column's unit and meaning as attributes), and the commit
// of a change to a file (a copy changed, synced and renamed over the file).
//
// Tables are written with fixed-length strings (NUL-padded, UTF-8; width: the longest value),
// which PyTables, pandas and h5py read directly; they read back both those and the
// variable-length strings of schema_version 1 files.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "results/run_record.hpp"

namespace bb::h5 {

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

// No HDF5 error stack on stderr: failures become exceptions naming the file.
void quiet();
[[noreturn]] void fail(const std::string& path, const std::string& what);  // IoError
void check(herr_t rc, const std::string& path, const char* what);

// Scalar attributes: int64, float64 or a variable-length UTF-8 string. write_attr replaces
// an attribute of the same name.
void write_attr(hid_t obj, const std::string& name, const AttrValue& value,
                const std::string& path);
bool read_attr(hid_t obj, const char* name, AttrValue* out);
Attrs read_all_attrs(hid_t obj);

// A column of a table: its HDF5 type, values (ints for the integer types, reals, texts) and
// the unit and meaning written as the dataset's attributes `<name>_unit`, `<name>_meaning`.
using ColType = ColumnType;  // in native_type()'s order (run_record.hpp)
struct Column {
  std::string name;
  ColType type = ColType::kF64;
  std::string unit{}, meaning{};
  std::vector<std::int64_t> ints{};
  std::vector<double> reals{};
  std::vector<std::string> texts{};
  std::size_t size() const;
};

// Writes the table NAME under GROUP (chunked, deflate-compressed; all columns of one length),
// with the attribute `row` (what one row is), each column's unit and meaning, and ATTRS.
void write_table(hid_t group, const char* name, const std::vector<Column>& cols,
                 const std::string& row, const Attrs& attrs, const std::string& path);

// A 1-D dataset of N elements of TYPE (chunked, deflate-compressed) with attributes ATTRS.
void write_dataset(hid_t group, const char* name, hid_t type, const void* data, std::size_t n,
                   const Attrs& attrs, const std::string& path);
// Rows of a 1-D dataset.
std::size_t dataset_length(hid_t ds);
// The member names of a table, in order, with their type classes.
std::vector<std::pair<std::string, H5T_class_t>> table_members(hid_t ds);
// One column of the table DS as TYPE (HDF5 converts numbers; strings fixed or variable).
// A member the table lacks: an empty column.
Column read_column(hid_t ds, const std::string& name, ColType type, const std::string& path);

// File access without HDF5's own file locks (see hdf5_file.hpp: one writer by WriterLock).
hid_t fapl_no_locking();
// Opens an existing HDF5 file (FLAGS: H5F_ACC_RDONLY or RDWR), refusing what is not HDF5.
hid_t open_existing(const std::string& path, unsigned flags);

// The commit of a change to a file, as a database commits a transaction: the new version is
// written whole under a temporary name beside the file (PATH.bb-tmp: a copy of the current
// file that HDF5 then changes, or a new file), flushed to the disk, and renamed over the
// file's name (rename(2) replaces the name atomically; the folder is synced after it). So PATH
// is at every moment either the previous complete version or the next one, whatever kills the
// writer and when; a reader that holds PATH open keeps reading the version it opened. Until
// commit() the temporary file is removed on every way out (a SIGKILL leaves it behind: the
// next writer, holding the writer lock, replaces it).
class Staged {
 public:
  // copy_current: start from a copy of PATH; else from nothing (the caller creates the file).
  Staged(std::string path, bool copy_current);
  Staged(const Staged&) = delete;
  Staged& operator=(const Staged&) = delete;
  ~Staged();
  const std::string& tmp() const { return tmp_; }
  // The temporary file becomes PATH. no_replace: fail (ConfigError) if PATH exists by now.
  void commit(bool no_replace = false);

 private:
  std::string path_, tmp_;
  bool committed_ = false;
};

// One change of the file PATH as a commit: CHANGE gets the open new version (a copy of PATH,
// or an empty new file when PATH does not exist) and the file then replaces PATH whole
// (synced, renamed). Nothing of a failed CHANGE reaches PATH. The caller holds the writer lock.
void commit_change(const std::string& path, const std::function<void(hid_t file)>& change);

}  // namespace bb::h5
