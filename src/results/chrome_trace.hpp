// Chrome trace event format (opens in Perfetto and chrome://tracing; docs/traces.md): ranks
// as processes; compute, the waits for inputs, sends and receives as complete ("X") slices,
// each with `args` (chunk, micro_batch, stage, kind, bytes); a flow ("s" -> "f") from each
// send to its receive; counter tracks ("C": each rank's memory by kind); process and thread
// names ("M").
//
// Slices of one lane of one rank never overlap without nesting (the format's rule for one
// thread): the writer spreads each rank's slices of one kind over as many threads as are in
// flight at once (`send 0`, `send 1`, ...), first fit.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim/memory.hpp"

namespace bb {

enum class TraceLane : std::uint8_t { compute, wait, send, recv };

struct TraceSlice {
  int pid = 0;  // rank
  TraceLane lane = TraceLane::compute;
  std::string name;  // e.g. "0F3", "(0F4;3BW1)FB", "1SEND_F3", "wait 0F3"
  std::string kind;  // F, B, W, BW, FB, wait, SEND_F, RECV_F, SEND_B, RECV_B
  double start_us = 0, end_us = 0;
  int chunk = -1, mb = -1, stage = -1;  // < 0: not known
  double bytes = -1;                    // message bytes (send/recv), < 0: none
  std::int64_t flow = -1;               // send: a flow starts here; recv: it ends here
};

// A value of a counter track ("ph": "C"): a rank's memory by kind from `t_us` on.
struct TraceCounter {
  int pid = 0;
  double t_us = 0;
  std::vector<std::pair<std::string, double>> values;  // series name, value (stacked)
};

// The flow id of a message: micro-batch MB's output of chunk PRODUCER (FORWARD) or its input
// gradient, so that its send and its receive get the same id (unique within one step of a
// schedule with NUM_CHUNKS chunks; bb::message_producer gives PRODUCER of a SEND or RECV).
std::int64_t message_flow_id(int producer, int mb, bool forward, int num_chunks);

// Writes a trace event by event (a timeline of millions of slices never exists as one JSON
// tree). Slices of one rank and lane must come in order of their start. The file is complete
// after close(); destroyed before (an exception), it removes the file if it created it.
// Throws IoError when the file cannot be written.
class ChromeTraceWriter {
 public:
  // TIME_UNIT: what one µs of the trace is (written to otherData), e.g. "1 simulated time unit".
  ChromeTraceWriter(const std::string& path, int num_processes, const std::string& title,
                    const std::string& time_unit);
  ~ChromeTraceWriter();
  ChromeTraceWriter(const ChromeTraceWriter&) = delete;
  ChromeTraceWriter& operator=(const ChromeTraceWriter&) = delete;

  void add(const TraceSlice& s);
  // One value of the counter track NAME of rank c.pid (any order; Perfetto draws one track per
  // rank and name, its series stacked).
  void add_counter(const TraceCounter& c, const std::string& name);
  void close();  // the names of processes and threads, then the end of the document

 private:
  void put(const std::string& event_json);
  int thread_of(const TraceSlice& s);

  std::string path_;
  int num_processes_;
  bool created_ = false, first_ = true, closed_ = false;
  std::ofstream f_;
  std::string event_;  // add()'s scratch: one event's text
  // Per (rank, lane): the latest start, and the end of the last slice on each of its threads.
  struct Lane {
    double last_start = -1e300;
    std::vector<double> ends;
  };
  std::map<std::pair<int, TraceLane>, Lane> lanes_;
};

// Each rank's memory samples (sim/memory.hpp, rank_memory with samples) as counter values, bytes
// by kind; times scaled by US_PER_UNIT and shifted by SHIFT_US.
std::vector<TraceCounter> memory_counters(const std::vector<RankMemory>& ranks, double us_per_unit,
                                          double shift_us = 0);

// All of SLICES (any order) and COUNTERS (named COUNTER_NAME, any order) into PATH.
void write_chrome_trace(const std::string& path, std::vector<TraceSlice> slices, int num_processes,
                        const std::string& title, const std::string& time_unit,
                        const std::vector<TraceCounter>& counters = {},
                        const std::string& counter_name = "memory");

}  // namespace bb
