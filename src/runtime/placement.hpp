// Where a rank runs: its host, the CPUs it may run on, its GPU and whether CUDA MPS serves
// it. `run` records it per rank (docs/run-record.md) and warns when ranks are unbound or
// share a CPU: per-stage timings need one core per rank.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace bb {

struct RankPlacement {
  std::string host;
  std::string cpus;   // the affinity list, e.g. "0-3,8" (sched_getaffinity); "" when unknown
  int host_cpus = 0;  // CPUs online on the host
  int gpu = -1;       // CUDA device, -1 on CPU
  bool mps = false;   // a CUDA MPS control daemon is there for this rank's GPU
  std::string device_name{};  // the GPU as its driver names it ("" on CPU)
};

// This process's placement (GPU: the backend's device, -1 on CPU).
RankPlacement this_placement(const std::string& host, int gpu);

// "0-3,8" from ascending CPU numbers, and back (throws std::invalid_argument).
std::string cpu_list_text(const std::vector<int>& cpus);
std::vector<int> parse_cpu_list(std::string_view text);

// One line for `run`'s warning, or "" when no two ranks on one host may run on the same CPU:
// for the first such pair, "ranks are not bound" when the first may run on every CPU of the
// host, else "ranks A and B share CPU C on HOST".
std::string placement_warning(const std::vector<RankPlacement>& ranks);

}  // namespace bb
