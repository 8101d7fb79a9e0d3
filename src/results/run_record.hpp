// What one run of `bubblebench run` leaves behind (design §6), independent of the file format.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "sim/links.hpp"

namespace bb {

// An attribute or table cell. uint64 holds what int64 cannot (a seed up to 2^64 - 1); it is
// written as an unsigned 64-bit HDF5 integer and read back as uint64.
using AttrValue = std::variant<std::int64_t, std::uint64_t, double, std::string>;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

// A column's type in the files (HDF5: the table member's type).
enum class ColumnType : std::uint8_t { kI32, kU32, kI64, kU64, kF64, kText };

struct EventRecord {
  std::uint32_t iter = 0, rank = 0, chunk = 0, microbatch = 0;
  std::string kind;  // F, B, W, BW, FB, wait, SEND_F, RECV_F, ...
  double t_start_s = 0, t_end_s = 0;
};

// The bytes one rank holds live from t_s on, by kind (sim/memory.hpp's MemoryKind order).
struct MemoryRecord {
  std::uint32_t rank = 0;
  double t_s = 0;
  double weights = 0, activations = 0, messages = 0, workspace = 0, runtime = 0;
};

// One rank's row of the ranks table: its columns by name, in the table's order (every rank of a
// run has the same names). Which columns there are is the run record's field table's business
// (harness/fields.cpp); results/ only stores and reads them.
struct RankRecord {
  Attrs columns{};
};

// Sets column NAME (replacing its value, or appending it).
void set_rank_column(RankRecord& r, const std::string& name, const AttrValue& value);
// The value of a column by name (NaN when there is none).
AttrValue rank_column(const RankRecord& r, const std::string& name);
// A number column as a double (NaN when there is none or it holds text).
double rank_number(const RankRecord& r, const std::string& name);

// A table column's documentation (HDF5: the dataset's `<name>_unit`, `<name>_meaning`) and its
// type in the file.
struct ColumnDoc {
  std::string name, unit, meaning;
  ColumnType type = ColumnType::kF64;
};

struct RunRecord {
  std::string key;                  // stable string from the configuration
  Attrs attrs;                      // schedule, P, M, v, ..., written as HDF5 attributes
  std::vector<double> step_time_s;  // one per timed iteration (max over ranks)
  std::vector<EventRecord> events;
  // The memory model on the last timed step's measured times (docs/memory.md): every change of
  // a rank's live bytes; empty: none (the dataset is then left out).
  std::vector<MemoryRecord> memory;
  std::vector<RankRecord> ranks;
  // The ranks columns' units, meanings and types, in order (none: a bare record, whose columns
  // are written in rank 0's order with the types their values have).
  std::vector<ColumnDoc> rank_docs;
  // The launch's link calibration of the pairs the run uses (empty: none), and its settings:
  // the run's group `links` (results/links_io.hpp).
  std::vector<LinkFit> links;
  Attrs links_attrs;
};

// A value of an attribute by name, or nullptr.
const AttrValue* find_attr(const Attrs& attrs, const std::string& name);

}  // namespace bb
