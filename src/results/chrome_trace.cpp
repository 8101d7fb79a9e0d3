#include "results/chrome_trace.hpp"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace bb {

void write_chrome_trace(const std::string& path, const std::vector<TraceSlice>& slices,
                        int num_processes, const std::string& title) {
  nlohmann::json events = nlohmann::json::array();
  static const char* kThreads[] = {"compute", "comm", "wait"};
  for (int p = 0; p < num_processes; ++p) {
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", p},
                      {"args", {{"name", "rank " + std::to_string(p)}}}});
    events.push_back(
        {{"name", "process_sort_index"}, {"ph", "M"}, {"pid", p}, {"args", {{"sort_index", p}}}});
    for (int t = 0; t < 3; ++t)
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", p},
                        {"tid", t},
                        {"args", {{"name", kThreads[t]}}}});
  }
  for (const auto& s : slices)
    events.push_back({{"name", s.name},
                      {"cat", s.cat},
                      {"ph", "X"},
                      {"pid", s.pid},
                      {"tid", s.tid},
                      {"ts", s.start_us},
                      {"dur", s.dur_us}});
  nlohmann::json doc = {
      {"traceEvents", events}, {"displayTimeUnit", "ms"}, {"otherData", {{"title", title}}}};
  // The text first (names from files may hold bytes that are not UTF-8: they print as U+FFFD),
  // so that a failure leaves no file behind; a failed write removes what it left.
  const std::string text =
      doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::ofstream f(path);
  if (!f) throw IoError("cannot write trace '" + path + "'");
  f << text;
  f.close();
  if (!f) {
    std::remove(path.c_str());
    throw IoError("error writing trace '" + path + "'");
  }
}

}  // namespace bb
