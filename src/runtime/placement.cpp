#include "runtime/placement.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace bb {

RankPlacement this_placement(const std::string& host, int gpu) {
  RankPlacement p;
  p.host = host;
  p.gpu = gpu;
  p.host_cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    p.cpus = cpu_list_text(cpus);
  }
  if (gpu >= 0) {
    const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
    std::error_code ec;
    p.mps = std::filesystem::exists(
        std::filesystem::path(dir ? dir : "/tmp/nvidia-mps") / "control", ec);
  }
  return p;
}

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> parse_cpu_list(std::string_view text) {
  std::vector<int> out;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string item(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const std::size_t dash = item.find('-');
    const int lo = std::stoi(item.substr(0, dash));
    const int hi = dash == std::string::npos ? lo : std::stoi(item.substr(dash + 1));
    if (lo < 0 || hi < lo) throw std::invalid_argument("bad CPU list item " + item);
    for (int c = lo; c <= hi; ++c) out.push_back(c);
  }
  return out;
}

std::string placement_warning(const std::vector<RankPlacement>& ranks) {
  const std::string bind =
      ": bind one core per rank (mpiexec -bind-to core, srun --cpu-bind=cores)";
  std::vector<std::vector<int>> cpus;
  for (const RankPlacement& r : ranks) cpus.push_back(parse_cpu_list(r.cpus));
  for (std::size_t a = 0; a < ranks.size(); ++a)
    for (std::size_t b = a + 1; b < ranks.size(); ++b) {
      if (ranks[a].host != ranks[b].host) continue;
      for (int c : cpus[a]) {
        if (std::find(cpus[b].begin(), cpus[b].end(), c) == cpus[b].end()) continue;
        const RankPlacement& r = ranks[a];
        if (static_cast<int>(cpus[a].size()) >= r.host_cpus)  // rank a may run anywhere
          return "ranks are not bound (rank " + std::to_string(a) + " may run on CPUs " + r.cpus +
                 " of " + r.host + ", like rank " + std::to_string(b) + ")" + bind;
        return "ranks " + std::to_string(a) + " and " + std::to_string(b) + " share CPU " +
               std::to_string(c) + " on " + r.host + bind;
      }
    }
  return "";
}

}  // namespace bb
