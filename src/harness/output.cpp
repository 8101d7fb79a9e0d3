#include "harness/output.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "harness/fields.hpp"
#include "harness/sweep.hpp"
#include "harness/table.hpp"

namespace bb::harness {

void say(std::string line) {
  line += '\n';
  std::fflush(stderr);
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void print_runs(std::ostream& out, const std::vector<RunSummary>& runs, bool json) {
  if (json) {
    nlohmann::json all = nlohmann::json::array();
    for (const RunSummary& s : runs) all.push_back(to_json(s));
    out << all.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return;
  }
  const bool steady = !runs.empty() && runs.front().sync == "none";
  const Table t = to_table(runs);
  print_table(out, t.headers, t.rows);
  out << "measured/sim/model: bubble fraction "
      << (steady ? "(steady state, period)" : "(single step, makespan)")
      << "; peak_act: peak live activations per rank (max over ranks) in micro-batch-stage "
         "units, runtime vs schedule\n";
  for (const RunSummary& s : runs)
    if (s.check == "fail")
      out << "check failed: " << s.schedule << " M=" << s.M << " v=" << s.v << ": "
          << s.check_message << "\n";
}

std::string make_trace_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir))
    throw ConfigError("--trace " + dir + ": cannot create the directory" +
                      (ec ? " (" + ec.message() + ")" : std::string()));
  if (access(dir.c_str(), W_OK) != 0)
    throw ConfigError("--trace " + dir + ": the directory is not writable");
  return dir;
}

std::string trace_file_name(const std::string& key) {
  constexpr std::size_t kNameMax = 255, kKept = 220;
  if (key.size() + 5 <= kNameMax) return key + ".json";
  return key.substr(0, kKept) + "_" + hex16(fnv1a(kFnvBasis, key.data(), key.size())) + ".json";
}

std::string shared_gpu_note(const std::vector<std::string>& host, const std::vector<int>& device) {
  const std::size_t n = std::min(host.size(), device.size());
  for (std::size_t a = 0; a < n; ++a) {
    std::vector<std::size_t> same{a};
    for (std::size_t b = a + 1; b < n; ++b)
      if (host[b] == host[a] && device[b] == device[a]) same.push_back(b);
    if (same.size() < 2) continue;
    std::string ranks;
    for (std::size_t i = 0; i < same.size(); ++i)
      ranks += (i == 0 ? "" : i + 1 == same.size() ? " and " : ", ") + std::to_string(same[i]);
    return "ranks " + ranks + " share GPU " + std::to_string(device[a]) + " on " + host[a];
  }
  return "";
}

std::vector<std::string> placement_warnings(const std::vector<RankPlacement>& ranks,
                                            const std::string& backend) {
  std::vector<std::string> out;
  if (const std::string cpus = placement_warning(ranks); !cpus.empty()) out.push_back(cpus);
  std::vector<std::string> host;
  std::vector<int> gpu;
  for (const RankPlacement& p : ranks) {
    host.push_back(p.host);
    gpu.push_back(p.gpu);
  }
  // Ranks on one GPU (more ranks than a node's GPUs, --transport mpi) take turns on it: each
  // action's GPU time then includes the other ranks' kernels unless CUDA MPS runs them side by
  // side, so the run is a functional test, not a per-stage timing (docs/gpu.md).
  if (backend == "cuda")
    if (const std::string shared = shared_gpu_note(host, gpu); !shared.empty())
      out.push_back(shared +
                    ": their kernels time-slice unless CUDA MPS runs, so timings are not one GPU "
                    "per stage (docs/gpu.md)");
  return out;
}

}  // namespace bb::harness
