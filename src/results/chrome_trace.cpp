#include "results/chrome_trace.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>

#include "common/error.hpp"

namespace bb {
namespace {

// One value as JSON text. Names from files may hold bytes that are not UTF-8: they print as
// U+FFFD rather than throw.
std::string text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

constexpr int kLanes = 4;
constexpr const char* kLaneNames[kLanes] = {"compute", "wait", "send", "recv"};

// The category Perfetto colours and filters by: the compute kind, or the lane.
std::string_view category(const TraceSlice& s) {
  return s.lane == TraceLane::compute ? std::string_view{s.kind}
                                      : kLaneNames[static_cast<int>(s.lane)];
}

// One event's JSON object appended to a string, member by member, without a json value: a
// trace holds millions of events, and each value's map cost some thirty allocations (1F1B at
// P=64, M=2048 with its 1.3 million events: 8 s to write, 280 s under AddressSanitizer). The
// bytes are those of a json value's dump: members must come in its (sorted) key order, strings
// that are not plain printable ASCII go through nlohmann (escapes, U+FFFD), and doubles through
// its own shortest round-trip formatting.
class EventText {
 public:
  explicit EventText(std::string& out) : out_(out) { out_ += '{'; }
  EventText& str(std::string_view k, std::string_view v) {
    key(k);
    const bool plain = std::all_of(
        v.begin(), v.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
    if (plain) {
      out_ += '"';
      out_ += v;
      out_ += '"';
    } else {
      out_ += text(nlohmann::json(std::string(v)));
    }
    return *this;
  }
  EventText& integer(std::string_view k, std::int64_t v) {
    key(k);
    char buf[24];
    out_.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
    return *this;
  }
  EventText& number(std::string_view k, double v) {
    key(k);
    if (!std::isfinite(v)) {
      out_ += "null";
      return *this;
    }
    char buf[64];
    out_.append(buf, nlohmann::detail::to_chars(buf, buf + sizeof buf, v));
    return *this;
  }
  // A nested object: f(EventText&) appends its members.
  template <class F>
  EventText& object(std::string_view k, F&& f) {
    key(k);
    EventText inner(out_);
    f(inner);
    inner.close();
    return *this;
  }
  void close() { out_ += '}'; }

 private:
  void key(std::string_view k) {
    if (!first_) out_ += ',';
    first_ = false;
    out_ += '"';
    out_ += k;
    out_ += "\":";
  }
  std::string& out_;
  bool first_ = true;
};

}  // namespace

std::int64_t message_flow_id(int producer, int mb, bool forward, int num_chunks) {
  return (static_cast<std::int64_t>(mb) * num_chunks + producer) * 2 + (forward ? 0 : 1);
}

ChromeTraceWriter::ChromeTraceWriter(const std::string& path, int num_processes,
                                     const std::string& title, const std::string& time_unit)
    : path_(path), num_processes_(num_processes) {
  // Whether this call creates PATH: a failed write removes only a file it made itself, never
  // what was there (a device node, a symlink's target, a user's file).
  if (std::FILE* probe = std::fopen(path.c_str(), "wx")) {  // O_CREAT | O_EXCL
    created_ = true;
    std::fclose(probe);
  }
  f_.open(path);
  if (!f_) {
    if (created_) std::remove(path.c_str());
    throw IoError("cannot write trace '" + path + "'");
  }
  // The keys in the order a dump of the whole document would give (nlohmann sorts them).
  f_ << "{\"displayTimeUnit\":\"ms\",\"otherData\":"
     << text({{"title", title}, {"time_unit", "1 us = " + time_unit}}) << ",\"traceEvents\":[";
}

ChromeTraceWriter::~ChromeTraceWriter() {
  if (closed_) return;
  f_.close();
  if (created_) std::remove(path_.c_str());
}

void ChromeTraceWriter::put(const std::string& event_json) {
  f_ << (first_ ? "" : ",") << event_json;
  first_ = false;
}

int ChromeTraceWriter::thread_of(const TraceSlice& s) {
  // First fit: the first thread of this rank and lane whose last slice ended by S's start.
  // With slices in order of their start this never overlaps two on one thread.
  Lane& lane = lanes_[{s.pid, s.lane}];
  if (s.start_us < lane.last_start)
    throw std::logic_error("trace: slice '" + s.name + "' added out of order");
  lane.last_start = s.start_us;
  std::vector<double>& ends = lane.ends;
  std::size_t k = 0;
  while (k < ends.size() && ends[k] > s.start_us) ++k;
  if (k == ends.size()) ends.push_back(s.end_us);
  ends[k] = s.end_us;
  return static_cast<int>(k) * kLanes + static_cast<int>(s.lane);
}

void ChromeTraceWriter::add(const TraceSlice& s) {
  if (!(s.end_us >= s.start_us)) throw std::logic_error("trace slice '" + s.name + "' ends early");
  const int tid = thread_of(s);
  // Keys in sorted order (EventText).
  std::string& e = event_;
  e.clear();
  EventText x(e);
  x.object("args", [&](EventText& a) {
    if (s.bytes >= 0 && s.bytes == std::floor(s.bytes) && s.bytes < 0x1p53)
      a.integer("bytes", static_cast<std::int64_t>(s.bytes));  // a whole number prints as one
    else if (s.bytes >= 0)
      a.number("bytes", s.bytes);
    a.integer("chunk", s.chunk).str("kind", s.kind).integer("micro_batch", s.mb);
    a.integer("stage", s.stage);
  });
  x.str("cat", category(s)).number("dur", s.end_us - s.start_us).str("name", s.name);
  x.str("ph", "X").integer("pid", s.pid).integer("tid", tid).number("ts", s.start_us);
  x.close();
  put(e);
  if (s.flow < 0) return;
  // The arrow leaves the send where it starts and points at the middle of the receive (a
  // point inside it, which the "f" event binds to with bp "e").
  const bool start = s.lane == TraceLane::send;
  e.clear();
  EventText f(e);
  if (!start) f.str("bp", "e");
  f.str("cat", "message").integer("id", s.flow).str("name", "message").str("ph", start ? "s" : "f");
  f.integer("pid", s.pid).integer("tid", tid);
  f.number("ts", start ? s.start_us : s.start_us + (s.end_us - s.start_us) / 2);
  f.close();
  put(e);
}

std::vector<TraceCounter> memory_counters(const std::vector<RankMemory>& ranks, double us_per_unit,
                                          double shift_us) {
  std::vector<TraceCounter> out;
  for (std::size_t r = 0; r < ranks.size(); ++r)
    for (const MemorySample& m : ranks[r].samples) {
      TraceCounter c{
          .pid = static_cast<int>(r), .t_us = shift_us + m.t * us_per_unit, .values = {}};
      for (int k = 0; k < kMemoryKinds; ++k)
        c.values.emplace_back(memory_kind_name(static_cast<MemoryKind>(k)), m.bytes[k]);
      out.push_back(std::move(c));
    }
  return out;
}

void ChromeTraceWriter::add_counter(const TraceCounter& c, const std::string& name) {
  std::string& e = event_;
  e.clear();
  EventText x(e);
  std::vector<std::pair<std::string, double>> values = c.values;  // keys sorted, as a dump's
  std::sort(values.begin(), values.end());
  x.object("args", [&](EventText& a) {
    for (const auto& [k, v] : values) {
      if (v >= 0 && v == std::floor(v) && v < 0x1p53)
        a.integer(k, static_cast<std::int64_t>(v));
      else
        a.number(k, v);
    }
  });
  x.str("cat", "memory").str("name", name).str("ph", "C").integer("pid", c.pid);
  x.number("ts", c.t_us);
  x.close();
  put(e);
}

void ChromeTraceWriter::close() {
  for (int p = 0; p < num_processes_; ++p) {
    put(text({{"name", "process_name"},
              {"ph", "M"},
              {"pid", p},
              {"args", {{"name", "rank " + std::to_string(p)}}}}));
    put(text(
        {{"name", "process_sort_index"}, {"ph", "M"}, {"pid", p}, {"args", {{"sort_index", p}}}}));
    // Compute and wait always; each lane's threads as many as it used.
    for (int lane = 0; lane < kLanes; ++lane) {
      const auto it = lanes_.find({p, static_cast<TraceLane>(lane)});
      const std::size_t n = it == lanes_.end() ? (lane < 2 ? 1 : 0) : it->second.ends.size();
      for (std::size_t k = 0; k < n; ++k) {
        const int tid = static_cast<int>(k) * kLanes + lane;
        std::string name = kLaneNames[lane];
        if (lane >= 2 || k > 0) {  // appended piecewise: GCC 12 warns falsely (-Wrestrict)
          name += ' ';
          name += std::to_string(k);
        }
        put(text({{"name", "thread_name"},
                  {"ph", "M"},
                  {"pid", p},
                  {"tid", tid},
                  {"args", {{"name", name}}}}));
        put(text({{"name", "thread_sort_index"},
                  {"ph", "M"},
                  {"pid", p},
                  {"tid", tid},
                  {"args", {{"sort_index", lane * 100000 + static_cast<int>(k)}}}}));
      }
    }
  }
  f_ << "]}\n";
  f_.close();
  if (!f_) throw IoError("error writing trace '" + path_ + "'");
  closed_ = true;
}

void write_chrome_trace(const std::string& path, std::vector<TraceSlice> slices, int num_processes,
                        const std::string& title, const std::string& time_unit,
                        const std::vector<TraceCounter>& counters,
                        const std::string& counter_name) {
  std::stable_sort(slices.begin(), slices.end(), [](const TraceSlice& a, const TraceSlice& b) {
    return a.start_us < b.start_us;
  });
  ChromeTraceWriter w(path, num_processes, title, time_unit);
  for (const TraceSlice& s : slices) w.add(s);
  for (const TraceCounter& c : counters) w.add_counter(c, counter_name);
  w.close();
}

}  // namespace bb
