#include "harness/wire.hpp"

#include <cstddef>

namespace bb::harness {

StepSummary step_summary(const StepRecord& rec) {
  return {rec.origin,
          rec.first_start,
          rec.last_end,
          rec.busy,
          rec.wait,
          rec.comm,
          static_cast<double>(rec.num_actions),
          rec.bookkeeping()};
}

std::vector<double> pack_step(const StepSummary& st) {
  return {st.origin, st.first_start, st.last_end, st.busy,
          st.wait,   st.comm,        st.actions,  st.bookkeeping};
}

StepSummary unpack_step(const std::vector<double>& in) {
  return {in.at(0), in.at(1), in.at(2), in.at(3), in.at(4), in.at(5), in.at(6), in.at(7)};
}

std::vector<double> pack(const RankSummary& s) {
  std::vector<double> out;
  out.reserve(8 + s.steps.size() * kStepFields + s.events.size() * kEventFields);
  out.push_back(static_cast<double>(s.steps.size()));
  for (const StepSummary& st : s.steps) {
    const auto one = pack_step(st);
    out.insert(out.end(), one.begin(), one.end());
  }
  out.insert(out.end(),
             {s.peak_units, s.peak_bytes, s.param_bytes, s.peak_device_bytes, s.runtime_bytes,
              s.comm_device_bytes, s.pinned_host_bytes, s.device_used_peak_bytes});
  for (const auto& d : s.durations) {
    out.push_back(static_cast<double>(d.size()));
    out.insert(out.end(), d.begin(), d.end());
  }
  out.push_back(static_cast<double>(s.events.size()));
  for (const EventSummary& e : s.events)
    out.insert(out.end(), {e.iter, e.index, e.kind, e.chunk, e.mb, e.ready, e.start, e.end});
  return out;
}

RankSummary unpack(const std::vector<double>& in) {
  RankSummary s;
  std::size_t i = 0;
  const auto n = static_cast<std::size_t>(in.at(i++));
  for (std::size_t k = 0; k < n; ++k, i += kStepFields)
    s.steps.push_back({in.at(i), in.at(i + 1), in.at(i + 2), in.at(i + 3), in.at(i + 4),
                       in.at(i + 5), in.at(i + 6), in.at(i + 7)});
  s.peak_units = in.at(i++);
  s.peak_bytes = in.at(i++);
  s.param_bytes = in.at(i++);
  s.peak_device_bytes = in.at(i++);
  s.runtime_bytes = in.at(i++);
  s.comm_device_bytes = in.at(i++);
  s.pinned_host_bytes = in.at(i++);
  s.device_used_peak_bytes = in.at(i++);
  for (auto& d : s.durations) {
    const auto m = static_cast<std::size_t>(in.at(i++));
    if (i + m > in.size()) (void)in.at(i + m);  // throws: truncated
    d.assign(in.begin() + static_cast<std::ptrdiff_t>(i),
             in.begin() + static_cast<std::ptrdiff_t>(i + m));
    i += m;
  }
  const auto ne = static_cast<std::size_t>(in.at(i++));
  s.events.reserve(ne);
  for (std::size_t k = 0; k < ne; ++k, i += kEventFields)
    s.events.push_back({in.at(i), in.at(i + 1), in.at(i + 2), in.at(i + 3), in.at(i + 4),
                        in.at(i + 5), in.at(i + 6), in.at(i + 7)});
  return s;
}

}  // namespace bb::harness
