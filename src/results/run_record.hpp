// What one run of `bubblebench run` leaves behind (design §6), independent of the file format.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "sim/links.hpp"

namespace bb {

using AttrValue = std::variant<std::int64_t, double, std::string>;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

struct EventRecord {
  std::uint32_t iter = 0, rank = 0, chunk = 0, microbatch = 0;
  std::string kind;  // F, B, W, BW, FB, wait, SEND_F, RECV_F, ...
  double t_start_s = 0, t_end_s = 0;
};

struct RankRecord {
  std::uint32_t rank = 0;
  std::string host;
  std::int32_t device = -1;
  double busy_s = 0, wait_s = 0, comm_s = 0;
  std::uint64_t peak_activation_bytes = 0, peak_device_bytes = 0, param_bytes = 0;
  // Extension: the simulator's prediction of peak_activation_bytes for this rank.
  std::uint64_t peak_activation_bytes_model = 0;
  // Further columns of the ranks table, by name (every rank of a run has the same names).
  Attrs extra{};
};

// A column of the ranks table by name: a member above, else an `extra` column (added when
// missing). Integers go to integer members rounded; std::invalid_argument for a string
// given to a number member or the reverse.
void set_rank_column(RankRecord& r, const std::string& name, const AttrValue& value);
// The value of a column by name (NaN when there is none).
AttrValue rank_column(const RankRecord& r, const std::string& name);

// A table column's documentation (HDF5: the dataset's `<name>_unit`, `<name>_meaning`).
struct ColumnDoc {
  std::string name, unit, meaning;
};

struct RunRecord {
  std::string key;                  // stable string from the configuration
  Attrs attrs;                      // schedule, P, M, v, ..., written as HDF5 attributes
  std::vector<double> step_time_s;  // one per timed iteration (max over ranks)
  std::vector<EventRecord> events;
  std::vector<RankRecord> ranks;
  std::vector<ColumnDoc> rank_docs;  // units and meanings of the ranks columns (none: bare)
  // The launch's link calibration of the pairs the run uses (empty: none), and its settings:
  // the run's group `links` (results/links_io.hpp).
  std::vector<LinkFit> links;
  Attrs links_attrs;
};

// A value of an attribute by name, or nullptr.
const AttrValue* find_attr(const Attrs& attrs, const std::string& name);

}  // namespace bb
