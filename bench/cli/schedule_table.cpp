#include "cli/schedule_table.hpp"

#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <vector>

#include "cli/table.hpp"
#include "schedule/schedule_info.hpp"

namespace bb {
namespace {

std::string chunks_text(const ScheduleInfo& i) {
  return i.takes_v() ? "v (-v)" : std::to_string(i.fixed_v);
}

std::string split_text(const ScheduleInfo& i) {
  return i.splits_backward ? "B, W" : "BW";
}

// A formula in code style (its `*` are not emphasis), or a dash where none is published.
std::string code(std::string_view text) {
  if (text.empty()) return "-";
  std::string out(1, '`');  // (appended: GCC 12's -Wrestrict misfires on "`" + ...)
  out.append(text).push_back('`');
  return out;
}

}  // namespace

std::string schedules_text() {
  std::vector<std::vector<std::string>> rows;
  for (const ScheduleInfo& i : schedule_infos())
    rows.push_back({std::string(i.name), std::string(placement_name(i.placement)), chunks_text(i),
                    split_text(i), std::string(i.accepts)});
  std::ostringstream out;
  print_table(out, {"schedule", "placement", "chunks/rank", "backward", "accepts"}, rows);
  return out.str();
}

std::string schedules_markdown() {
  std::string out =
      "| schedule | placement | chunks per rank | backward | accepts | bubble_time (closed form) "
      "| exact when | peak per rank (stage units) | source |\n"
      "|---|---|---|---|---|---|---|---|---|\n";
  for (const ScheduleInfo& i : schedule_infos()) {
    const PublishedForm& f = i.form;
    for (const std::string& cell :
         {std::string(i.name), std::string(placement_name(i.placement)), chunks_text(i),
          split_text(i), std::string(i.accepts), code(f.formula), std::string(f.conditions),
          code(f.peak_formula), std::string(f.source)})
      out += "| " + cell + " ";
    out += "|\n";
  }
  return out;
}

std::string schedules_json() {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const ScheduleInfo& i : schedule_infos()) {
    const PublishedForm& f = i.form;
    rows.push_back({{"name", i.name},
                    {"placement", placement_name(i.placement)},
                    {"takes_v", i.takes_v()},
                    {"fixed_v", i.fixed_v},
                    {"splits_backward", i.splits_backward},
                    {"orders_by_costs", i.orders_by_costs},
                    {"accepts", i.accepts},
                    {"formula", f.formula},
                    {"conditions", f.conditions},
                    {"peak_formula", f.peak_formula},
                    {"source", f.source}});
  }
  return rows.dump(2) + "\n";
}

}  // namespace bb
