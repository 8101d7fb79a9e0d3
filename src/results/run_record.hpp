// What one run of `bubblebench run` leaves behind (design §6), independent of the file format.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

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
};

struct RunRecord {
  std::string key;                  // stable string from the configuration
  Attrs attrs;                      // schedule, P, M, v, ..., written as HDF5 attributes
  std::vector<double> step_time_s;  // one per timed iteration (max over ranks)
  std::vector<EventRecord> events;
  std::vector<RankRecord> ranks;
};

// A value of an attribute by name, or nullptr.
const AttrValue* find_attr(const Attrs& attrs, const std::string& name);

}  // namespace bb
