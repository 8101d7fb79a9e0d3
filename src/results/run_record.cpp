#include "results/run_record.hpp"

#include <cmath>
#include <stdexcept>

namespace bb {
namespace {

double number(const std::string& name, const AttrValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  throw std::invalid_argument("ranks column " + name + " takes a number");
}

template <typename T>
T whole(const std::string& name, const AttrValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<T>(*i);
  return static_cast<T>(std::llround(number(name, v)));
}

}  // namespace

void set_rank_column(RankRecord& r, const std::string& name, const AttrValue& value) {
  if (name == "rank") {
    r.rank = whole<std::uint32_t>(name, value);
  } else if (name == "host") {
    if (!std::holds_alternative<std::string>(value))
      throw std::invalid_argument("ranks column host takes a string");
    r.host = std::get<std::string>(value);
  } else if (name == "device") {
    r.device = whole<std::int32_t>(name, value);
  } else if (name == "busy_s") {
    r.busy_s = number(name, value);
  } else if (name == "wait_s") {
    r.wait_s = number(name, value);
  } else if (name == "comm_s") {
    r.comm_s = number(name, value);
  } else if (name == "peak_activation_bytes") {
    r.peak_activation_bytes = whole<std::uint64_t>(name, value);
  } else if (name == "peak_device_bytes") {
    r.peak_device_bytes = whole<std::uint64_t>(name, value);
  } else if (name == "param_bytes") {
    r.param_bytes = whole<std::uint64_t>(name, value);
  } else if (name == "peak_activation_bytes_model") {
    r.peak_activation_bytes_model = whole<std::uint64_t>(name, value);
  } else {
    for (auto& [k, v] : r.extra)
      if (k == name) {
        v = value;
        return;
      }
    r.extra.emplace_back(name, value);
  }
}

AttrValue rank_column(const RankRecord& r, const std::string& name) {
  auto u = [](auto x) { return AttrValue{static_cast<std::int64_t>(x)}; };
  if (name == "rank") return u(r.rank);
  if (name == "host") return r.host;
  if (name == "device") return u(r.device);
  if (name == "busy_s") return r.busy_s;
  if (name == "wait_s") return r.wait_s;
  if (name == "comm_s") return r.comm_s;
  if (name == "peak_activation_bytes") return u(r.peak_activation_bytes);
  if (name == "peak_device_bytes") return u(r.peak_device_bytes);
  if (name == "param_bytes") return u(r.param_bytes);
  if (name == "peak_activation_bytes_model") return u(r.peak_activation_bytes_model);
  if (const AttrValue* v = find_attr(r.extra, name)) return *v;
  return std::nan("");
}

}  // namespace bb
