// The Chrome-trace writer (results/chrome_trace.hpp): lanes for slices in flight at once,
// args, flows, names; tests/trace/check_trace.py checks whole traces of every schedule.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "results/chrome_trace.hpp"
#include "schedule/message.hpp"

namespace bb {
namespace {

namespace fs = std::filesystem;

TraceSlice message(int pid, TraceLane lane, double start, double end, std::int64_t flow) {
  TraceSlice t{.pid = pid, .lane = lane, .name = "m", .kind = "SEND_F"};
  t.start_us = start;
  t.end_us = end;
  t.chunk = 0;
  t.mb = static_cast<int>(flow);
  t.stage = 0;
  t.bytes = 1024;
  t.flow = flow;
  return t;
}

// Each event is written member by member: the bytes are those of the same event built as a
// json value and dumped (keys sorted, strings escaped, bytes that are not UTF-8 as U+FFFD,
// doubles in nlohmann's shortest form), for plain and awkward names, whole and fractional
// bytes, and both ends of a flow.
TEST(ChromeTrace, EventsAreWhatAJsonDumpGives) {
  const auto dump = [](const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  const std::string names[] = {"0F3",     "say \"hi\"",  "back\\slash",   "tab\there",
                               "\x01ctl", "caf\xc3\xa9", "bad \xff byte", "del\x7f"};
  const double bytes[] = {-1, 0, 1024, 1000.5, 1e20};
  std::vector<std::string> expected;
  const std::string path = ::testing::TempDir() + "bb_trace_events_" + std::to_string(getpid());
  {
    ChromeTraceWriter w(path, 1, "t", "1 us");
    double t = 0;
    int k = 0;
    for (const std::string& name : names)
      for (double b : bytes) {
        const bool send = k % 2 == 0;
        TraceSlice s{
            .pid = 0, .lane = send ? TraceLane::send : TraceLane::recv, .name = name, .kind = name};
        s.start_us = t;
        s.end_us = t + 0.1 * (k + 1);
        t = s.end_us + 1.0 / 3;
        s.chunk = k;
        s.mb = 2 * k;
        s.stage = 0;
        s.bytes = b;
        s.flow = k;
        nlohmann::json args = {{"kind", name}, {"chunk", k}, {"micro_batch", 2 * k}, {"stage", 0}};
        if (b >= 0 && b == std::floor(b) && b < 0x1p53)
          args["bytes"] = static_cast<std::uint64_t>(b);
        else if (b >= 0)
          args["bytes"] = b;
        expected.push_back(dump({{"name", name},
                                 {"cat", send ? "send" : "recv"},
                                 {"ph", "X"},
                                 {"pid", 0},
                                 {"tid", send ? 2 : 3},
                                 {"ts", s.start_us},
                                 {"dur", s.end_us - s.start_us},
                                 {"args", args}}));
        nlohmann::json flow = {
            {"name", "message"},
            {"cat", "message"},
            {"ph", send ? "s" : "f"},
            {"id", k},
            {"pid", 0},
            {"tid", send ? 2 : 3},
            {"ts", send ? s.start_us : s.start_us + (s.end_us - s.start_us) / 2}};
        if (!send) flow["bp"] = "e";
        expected.push_back(dump(flow));
        w.add(s);
        ++k;
      }
    // Counter values: whole numbers as integers, others as doubles, keys sorted.
    const TraceCounter c{.pid = 0, .t_us = t, .values = {{"weights", 4096}, {"activations", 0.5}}};
    w.add_counter(c, "memory");
    expected.push_back(dump({{"name", "memory"},
                             {"cat", "memory"},
                             {"ph", "C"},
                             {"pid", 0},
                             {"ts", t},
                             {"args", {{"weights", 4096}, {"activations", 0.5}}}}));
    w.close();
  }
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove(path);
  std::size_t at = text.find("\"traceEvents\":[");
  ASSERT_NE(at, std::string::npos);
  at += 15;
  for (const std::string& e : expected) {
    ASSERT_EQ(text.compare(at, e.size(), e), 0)
        << "expected " << e << "\nat " << text.substr(at, e.size() + 20);
    at += e.size() + 1;  // and the comma
  }
}

TEST(ChromeTrace, MessagesInFlightGetThreadsOfTheirOwn) {
  const fs::path path = fs::temp_directory_path() / ("bb_trace_" + std::to_string(::getpid()));
  std::vector<TraceSlice> slices = {
      message(0, TraceLane::send, 0, 10, 1),  message(0, TraceLane::send, 5, 8, 2),
      message(0, TraceLane::send, 10, 12, 3),  // the first thread is free again at 10
      message(1, TraceLane::recv, 0, 10, 1),  message(1, TraceLane::recv, 5, 8, 2),
      message(1, TraceLane::recv, 10, 12, 3)};
  TraceSlice f{.pid = 0, .lane = TraceLane::compute, .name = "0F0", .kind = "F"};
  f.end_us = 3;
  slices.push_back(f);
  write_chrome_trace(path.string(), slices, 2, "t", "1 test unit");
  const auto doc = nlohmann::json::parse(std::ifstream(path));
  fs::remove(path);
  std::map<std::pair<int, int>, std::string> thread;
  std::map<std::int64_t, int> starts, ends;
  std::vector<nlohmann::json> x;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name")
      thread[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
    if (e["ph"] == "s") ++starts[e["id"].get<std::int64_t>()];
    if (e["ph"] == "f") {
      ++ends[e["id"].get<std::int64_t>()];
      EXPECT_EQ(e["bp"], "e");
    }
    if (e["ph"] == "X") x.push_back(e);
  }
  ASSERT_EQ(x.size(), 7u);
  const auto name_of = [&](const nlohmann::json& e) {
    return thread.at({e["pid"].get<int>(), e["tid"].get<int>()});
  };
  // In order of start: send 0 [0,10], send 1 [5,8], send 0 again [10,12].
  std::map<double, std::string> send_thread;
  for (const auto& e : x) {
    EXPECT_TRUE(e["args"].contains("micro_batch") && e["args"].contains("stage"));
    if (e["cat"] == "send") send_thread[e["ts"].get<double>()] = name_of(e);
    if (e["cat"] == "F") {
      EXPECT_EQ(name_of(e), "compute");
    }
    if (e["cat"] == "send") {
      EXPECT_EQ(e["args"]["bytes"], 1024);
    }
  }
  EXPECT_EQ(send_thread,
            (std::map<double, std::string>{{0, "send 0"}, {5, "send 1"}, {10, "send 0"}}));
  EXPECT_EQ(starts, (std::map<std::int64_t, int>{{1, 1}, {2, 1}, {3, 1}}));
  EXPECT_EQ(ends, starts);
  EXPECT_EQ(doc["otherData"]["time_unit"], "1 us = 1 test unit");
  // Every rank has its compute and wait threads named, used or not.
  EXPECT_EQ(thread.at({1, 0}), "compute");
  EXPECT_EQ(thread.at({1, 1}), "wait");
}

TEST(ChromeTrace, OutOfOrderSlicesAreRefused) {
  const fs::path path = fs::temp_directory_path() / ("bb_trace_o_" + std::to_string(::getpid()));
  {
    ChromeTraceWriter w(path.string(), 1, "t", "1 test unit");
    w.add(message(0, TraceLane::send, 5, 6, 1));
    EXPECT_THROW(w.add(message(0, TraceLane::send, 4, 6, 2)), std::logic_error);
    EXPECT_THROW(w.add(message(0, TraceLane::send, 7, 6, 3)), std::logic_error);  // ends early
  }  // not closed: the file it created is removed
  EXPECT_FALSE(fs::exists(path));
}

TEST(ChromeTrace, SendAndReceiveOfOneMessageShareTheFlowId) {
  const int C = 8;
  const auto id = [&](Op op, int chunk, int mb) {
    const Action a = make_action(op, chunk, mb);
    return message_flow_id(message_producer(a), mb, is_forward_comm(op), C);
  };
  EXPECT_EQ(id(Op::SEND_F, 2, 5), id(Op::RECV_F, 3, 5));
  EXPECT_EQ(id(Op::SEND_B, 3, 5), id(Op::RECV_B, 2, 5));
  EXPECT_NE(id(Op::SEND_F, 2, 5), id(Op::SEND_B, 2, 5));
  EXPECT_NE(id(Op::SEND_F, 2, 5), id(Op::SEND_F, 2, 6));
  EXPECT_NE(id(Op::SEND_F, 2, 5), id(Op::SEND_F, 3, 5));
}

}  // namespace
}  // namespace bb
