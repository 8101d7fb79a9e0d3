#include "results/chrome_trace.hpp"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace bb {
namespace {

// One value as JSON text. Names from files may hold bytes that are not UTF-8: they print as
// U+FFFD rather than throw.
std::string text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void write_events(std::ofstream& f, const std::vector<TraceSlice>& slices, int num_processes,
                  const std::string& title) {
  // The document a single dump of it would give (nlohmann orders an object's keys), written
  // event by event: a timeline of millions of slices never exists as one JSON tree or string.
  f << "{\"displayTimeUnit\":\"ms\",\"otherData\":" << text({{"title", title}})
    << ",\"traceEvents\":[";
  bool first = true;
  const auto put = [&](const nlohmann::json& e) {
    f << (first ? "" : ",") << text(e);
    first = false;
  };
  static const char* kThreads[] = {"compute", "comm", "wait"};
  for (int p = 0; p < num_processes; ++p) {
    put({{"name", "process_name"},
         {"ph", "M"},
         {"pid", p},
         {"args", {{"name", "rank " + std::to_string(p)}}}});
    put({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", p}, {"args", {{"sort_index", p}}}});
    for (int t = 0; t < 3; ++t)
      put({{"name", "thread_name"},
           {"ph", "M"},
           {"pid", p},
           {"tid", t},
           {"args", {{"name", kThreads[t]}}}});
  }
  for (const auto& s : slices)
    put({{"name", s.name},
         {"cat", s.cat},
         {"ph", "X"},
         {"pid", s.pid},
         {"tid", s.tid},
         {"ts", s.start_us},
         {"dur", s.dur_us}});
  f << "]}\n";
}

}  // namespace

void write_chrome_trace(const std::string& path, const std::vector<TraceSlice>& slices,
                        int num_processes, const std::string& title) {
  // Whether this call creates PATH: a failed write removes only a file it made itself, never
  // what was there (a device node, a symlink's target, a user's file).
  bool created = false;
  if (std::FILE* probe = std::fopen(path.c_str(), "wx")) {  // O_CREAT | O_EXCL
    created = true;
    std::fclose(probe);
  }
  std::ofstream f(path);
  if (!f) {
    if (created) std::remove(path.c_str());
    throw IoError("cannot write trace '" + path + "'");
  }
  try {
    write_events(f, slices, num_processes, title);
    f.close();
  } catch (...) {
    f.close();
    if (created) std::remove(path.c_str());
    throw;
  }
  if (!f) {
    if (created) std::remove(path.c_str());
    throw IoError("error writing trace '" + path + "'");
  }
}

}  // namespace bb
