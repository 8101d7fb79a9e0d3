#include "model/closed_form.hpp"

#include "schedule/schedule_info.hpp"

namespace bb {

ModelResult closed_form(const ModelInput& in) {
  ModelResult r;
  r.t_ideal = in.M * form::pass_sum(in);
  const ScheduleInfo* info = find_schedule(in.schedule);
  if (info == nullptr || info->form.bubble == nullptr) {
    form::refuse(r, "no closed form for schedule '" + in.schedule + "'");
    return r;
  }
  const PublishedForm& f = info->form;
  r.formula = f.formula;
  r.conditions = f.conditions;
  r.source = f.source;
  r.peak_formula = f.peak_formula;
  if (f.peak != nullptr) f.peak(in, r);
  f.bubble(in, r);
  if (r.applies && !in.uniform_stages) {
    r.applies = false;
    r.reason = "per-chunk costs are not all equal; the closed forms assume uniform stages";
  } else if (r.applies && in.message_time != 0) {
    r.applies = false;
    r.reason = "each message takes " + std::to_string(in.message_time) +
               " (--latency/--bandwidth); the closed forms assume zero communication cost";
  }
  return r;
}

}  // namespace bb
