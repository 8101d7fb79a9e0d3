#include "results/run_record.hpp"

#include <cmath>

namespace bb {

void set_rank_column(RankRecord& r, const std::string& name, const AttrValue& value) {
  for (auto& [k, v] : r.columns)
    if (k == name) {
      v = value;
      return;
    }
  r.columns.emplace_back(name, value);
}

AttrValue rank_column(const RankRecord& r, const std::string& name) {
  if (const AttrValue* v = find_attr(r.columns, name)) return *v;
  return std::nan("");
}

double rank_number(const RankRecord& r, const std::string& name) {
  const AttrValue v = rank_column(r, name);
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* u = std::get_if<std::uint64_t>(&v)) return static_cast<double>(*u);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return std::nan("");
}

}  // namespace bb
