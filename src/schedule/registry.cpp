#include "common/error.hpp"
#include "schedule/generators.hpp"
#include "schedule/schedule_info.hpp"

namespace bb {

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const ScheduleInfo& i : schedule_infos()) out.emplace_back(i.name);
    return out;
  }();
  return names;
}

bool schedule_takes_v(const std::string& name) {
  const ScheduleInfo* i = find_schedule(name);
  return i != nullptr && i->takes_v();
}

Schedule generate(const std::string& name, const ScheduleParams& p) {
  return schedule_info_or_throw(name).generate(p);
}

}  // namespace bb
