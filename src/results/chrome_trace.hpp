// Chrome trace event format (opens in Perfetto and chrome://tracing): ranks as processes,
// compute / wait / send / recv as complete ("X") slices.
#pragma once

#include <string>
#include <vector>

namespace bb {

struct TraceSlice {
  int pid = 0;       // rank
  int tid = 0;       // 0 compute, 1 communication, 2 waiting
  std::string name;  // e.g. "0F3"
  std::string cat;   // F, B, W, BW, FB, wait, send, recv
  double start_us = 0;
  double dur_us = 0;
};

// Throws IoError when the file cannot be written.
void write_chrome_trace(const std::string& path, const std::vector<TraceSlice>& slices,
                        int num_processes, const std::string& title);

}  // namespace bb
