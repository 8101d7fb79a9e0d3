#include "harness/memory.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "harness/provenance.hpp"
#include "runtime/cuda_plugin.hpp"
#include "runtime/device_blocks.hpp"
#include "runtime/executor.hpp"
#include "runtime/mpi_util.hpp"
#include "sim/sim.hpp"

namespace bb::harness {
namespace {

constexpr double kFloat = 4;  // bytes of a parameter: bf16 runs keep fp32 master copies too

// The first number in a file ("max" and unreadable files: nullopt).
std::optional<double> number_in(const std::string& path) {
  std::ifstream in(path);
  double v = 0;
  if (!(in >> v) || v < 0) return std::nullopt;
  return v;
}

// This process's cgroup path for `controller` ("" for v2) from /proc/self/cgroup.
std::optional<std::string> cgroup_dir(const std::string& controller) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string list = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::stringstream names(list);
    for (std::string n; std::getline(names, n, ',');)
      if (n == controller) return path;
    if (controller.empty() && list.empty()) return path;
  }
  return std::nullopt;
}

// Limit less usage of the memory cgroup (v2, else v1); nullopt without a limit. A v1 "no
// limit" is a huge number: it stays above MemAvailable.
std::optional<double> cgroup_room() {
  const auto room = [](const std::string& dir, const char* limit, const char* usage) {
    const auto l = number_in(dir + "/" + limit), u = number_in(dir + "/" + usage);
    return l && u ? std::optional<double>(std::max(0.0, *l - *u)) : std::nullopt;
  };
  if (const auto d = cgroup_dir(""))
    for (const std::string& root : {"/sys/fs/cgroup" + *d, std::string("/sys/fs/cgroup")})
      if (const auto r = room(root, "memory.max", "memory.current")) return r;
  if (const auto d = cgroup_dir("memory"))
    for (const std::string& root :
         {"/sys/fs/cgroup/memory" + *d, std::string("/sys/fs/cgroup/memory")})
      if (const auto r = room(root, "memory.limit_in_bytes", "memory.usage_in_bytes")) return r;
  return std::nullopt;
}

}  // namespace

MemoryConfig memory_config(const RunConfig& c, const RunSettings& o) {
  ExecutorConfig ec = executor_config(o, c.hidden, c.layers, c.mb_size);
  ec.recompute = c.recompute;
  const bool cuda = o.backend == BackendKind::kCuda;
  MemoryConfig m = bb::memory_config(*c.lowered, ec, cuda ? cuda_block_bytes : nullptr);
  m.eager_bytes = o.transport == TransportKind::kMpi ? kMpiEagerBytes : 0;
  if (cuda && ec.dtype == Dtype::kBF16)
    for (ChunkMemory& x : m.chunks) x.copies = x.params / 2;
  return m;
}

MemoryNeed memory_need(const RunConfig& c, const RunSettings& o, int rank) {
  const Schedule& s = *c.lowered;
  const MemoryConfig m = memory_config(c, o);
  SimConfig unit;  // the order of a step; every compute one time unit
  unit.t_f = unit.t_b = unit.t_w = {1.0};
  const RankMemory r = simulate_memory(s, m, unit).at(static_cast<std::size_t>(rank));
  MemoryNeed n;
  for (int chunk = 0; chunk < s.num_chunks(); ++chunk) {
    if (s.chunk_rank[chunk] != rank) continue;
    const ChunkMemory& x = m.chunks[static_cast<std::size_t>(chunk)];
    n.weights += x.params;
    n.optimizer += x.optimizer;
    n.bf16_copies += x.copies;
  }
  const auto kind = [&](MemoryKind k) { return r.peak_bytes[static_cast<int>(k)]; };
  n.gradients = kind(MemoryKind::weights) - n.weights - n.optimizer - n.bf16_copies;
  n.activations = kind(MemoryKind::activations);
  n.buffers = kind(MemoryKind::messages);
  n.workspace = kind(MemoryKind::workspace);
  if (o.check && rank == 0 && !o.synthetic()) {
    // Uneven partitions: every chunk estimated as the largest (an upper bound).
    ExecutorConfig ec =
        widest_chunk(executor_config(o, c.hidden, c.layers, c.mb_size), model_stages(s));
    ec.recompute = c.recompute;
    const double params = kFloat * static_cast<double>(chunk_param_count(ec));
    const double chunks = static_cast<double>(s.num_chunks());
    n.reference = 2 * chunks * params + chunks * static_cast<double>(chunk_forward_bytes(ec));
  }
  return n;
}

std::optional<MemoryAvailable> memory_available() {
  std::optional<MemoryAvailable> out;
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  while (in >> key >> kib) {
    if (key == "MemAvailable:") out = MemoryAvailable{kib * 1024, "MemAvailable"};
    in.ignore(256, '\n');
  }
  if (const auto room = cgroup_room(); room && (!out || *room < out->bytes))
    out = MemoryAvailable{*room, "the cgroup limit"};
  return out;
}

std::string bytes_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (bytes >= 1024 && u < 5) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

namespace {

// One line naming where the rank's bytes go.
std::string need_text(const MemoryNeed& n) {
  std::string t = "weights " + bytes_text(n.weights) + ", gradients " + bytes_text(n.gradients) +
                  ", optimizer " + bytes_text(n.optimizer) + ", activations " +
                  bytes_text(n.activations) + ", buffers " + bytes_text(n.buffers) +
                  ", workspaces " + bytes_text(n.workspace);
  if (n.bf16_copies > 0) t += ", bf16 weight copies " + bytes_text(n.bf16_copies);
  if (n.reference > 0) t += ", --check reference " + bytes_text(n.reference);
  return t;
}

}  // namespace

std::string memory_refusal(const std::vector<RunConfig>& configs, const RunSettings& o,
                           MPI_Comm comm, double timeout_s, Backend* backend) {
  const bool gpu = o.backend == BackendKind::kCuda;
  // The host's memory before the backend exists; a GPU's with its backend.
  if (gpu ? backend == nullptr || backend->kind() != BackendKind::kCuda : backend != nullptr)
    return "";
  const int me = mpi::rank(comm);
  // Mine: the need of every configuration, then the bytes available (-1: unknown) and where
  // that figure comes from (0 MemAvailable, 1 the cgroup limit, 2 the GPU's free memory).
  std::vector<double> mine;
  for (const RunConfig& c : configs) mine.push_back(memory_need(c, o, me).total());
  std::string place = host_name();
  if (gpu) {
    const auto mem = cuda_plugin::device_memory(*backend);
    mine.push_back(mem ? static_cast<double>(mem->device_free) : -1);
    mine.push_back(2);
    place = "GPU " + std::to_string(cuda_plugin::device_of(*backend)) + " of " + place;
  } else {
    const auto avail = memory_available();
    mine.push_back(avail ? avail->bytes : -1);
    mine.push_back(avail && avail->source != "MemAvailable" ? 1 : 0);
  }
  const auto needs = mpi::gather(mine, 0, comm, timeout_s);
  const auto places = mpi::gather(place, 0, comm, timeout_s);
  if (me != 0) return "";
  std::map<std::string, std::vector<int>> ranks_of;
  for (std::size_t r = 0; r < places.size(); ++r)
    ranks_of[places[r]].push_back(static_cast<int>(r));
  const std::size_t k = configs.size();
  for (std::size_t i = 0; i < k; ++i)
    for (const auto& [where, ranks] : ranks_of) {
      double sum = 0, room = -1;
      for (int r : ranks) {
        sum += needs[r][i];
        // One host: one figure, read at once. One GPU: the least free memory its ranks saw.
        const double have = needs[r][k];
        room = gpu ? (room < 0 ? have : std::min(room, have)) : std::max(room, have);
      }
      if (room < 0 || sum <= room) continue;
      const int worst = *std::max_element(ranks.begin(), ranks.end(),
                                          [&](int a, int b) { return needs[a][i] < needs[b][i]; });
      const int source = static_cast<int>(needs[ranks.front()][k + 1]);
      const char* sources[] = {"MemAvailable", "the cgroup limit",
                               "free on it after the CUDA context and cuBLAS"};
      return configs[i].label + " needs about " + bytes_text(sum) + " on " + where + " (" +
             std::to_string(ranks.size()) + (ranks.size() == 1 ? " rank" : " ranks") + "; rank " +
             std::to_string(worst) + ": " + need_text(memory_need(configs[i], o, worst)) +
             ") but " + bytes_text(room) + " is available (" + sources[source] +
             "): use a smaller --hidden, --layers or --mb-size" +
             (gpu && o.dtype == Dtype::kF32 ? ", or --dtype bf16" : "");
    }
  return "";
}

}  // namespace bb::harness
