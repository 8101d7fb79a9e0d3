#include "harness/output.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
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

std::vector<std::string> context_lines(const Attrs& root, const std::vector<RankPlacement>& ranks,
                                       BackendKind backend, TransportKind transport) {
  std::vector<std::string> lines;
  for (const auto& [key, value] : root) {
    std::string text;
    if (const auto* t = std::get_if<std::string>(&value))
      text = *t;
    else if (const auto* i = std::get_if<std::int64_t>(&value))
      text = std::to_string(*i);
    else if (const auto* u = std::get_if<std::uint64_t>(&value))
      text = std::to_string(*u);
    else
      text = fmt_exact(std::get<double>(value));
    if (!text.empty()) lines.push_back(key + ": " + text);
  }
  // Hosts in order of their first rank, with how many ranks each.
  std::vector<std::pair<std::string, int>> hosts;
  std::string binding;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const RankPlacement& p = ranks[r];
    auto it =
        std::find_if(hosts.begin(), hosts.end(), [&](const auto& h) { return h.first == p.host; });
    if (it == hosts.end())
      hosts.push_back({p.host, 1});
    else
      ++it->second;
    binding += (r == 0 ? "" : "; ") + std::string("rank ") + std::to_string(r) + " cpus " +
               (p.cpus.empty() ? "?" : p.cpus) +
               (p.gpu >= 0 ? " gpu " + std::to_string(p.gpu) : "");
  }
  std::string where = std::to_string(ranks.size()) + (ranks.size() == 1 ? " rank" : " ranks") +
                      " on " + std::to_string(hosts.size()) +
                      (hosts.size() == 1 ? " host" : " hosts");
  for (std::size_t i = 0; i < hosts.size(); ++i)
    where += (i == 0 ? " (" : ", ") + hosts[i].first + ": " + std::to_string(hosts[i].second) +
             (i + 1 == hosts.size() ? ")" : "");
  lines.push_back("ranks: " + where);
  lines.push_back("binding: " + binding);
  lines.push_back("backend: " + std::string(name_of(backend)) +
                  ", transport: " + std::string(name_of(transport)));
  return lines;
}

namespace {

// Whether the stage model (hidden, layers, mb_size) differs between configurations.
bool model_varies(const std::vector<RunConfig>& configs) {
  for (const RunConfig& c : configs) {
    const RunConfig& a = configs.front();
    if (c.hidden != a.hidden || c.layers != a.layers || c.mb_size != a.mb_size) return true;
  }
  return false;
}

}  // namespace

RunTable::RunTable(std::ostream& out, std::string format, bool steady, bool gpu,
                   const std::vector<RunConfig>& configs)
    : out_(out),
      format_(std::move(format)),
      steady_(steady),
      cols_(table_columns(steady, model_varies(configs), gpu)) {
  // Fixed before any value is known: each column as wide as its header and at least 8 (a
  // fraction to 4 significant digits, 0.001234), the schedule column as its longest name; a wider
  // value pushes the rest of its row only.
  for (const Field* f : cols_) widths_.push_back(std::max<std::size_t>(f->column.header.size(), 8));
  if (widths_.empty()) return;
  widths_[0] += 2;  // "# " of the header
  for (const RunConfig& c : configs) widths_[0] = std::max(widths_[0], c.schedule.size());
}

void RunTable::begin(const std::vector<std::string>& context) {
  if (format_ != "table") {
    for (const std::string& line : context) say("# " + line);
    if (format_ == "csv") {
      print_csv_row(out_, table_headers(cols_));
      out_.flush();
    }
    return;
  }
  for (const std::string& line : context) out_ << "# " << line << "\n";
  out_ << "# measured/sim/model: bubble fraction "
       << (steady_ ? "(steady state, period)" : "(single step, makespan)")
       << "; peak_act: peak live activations per rank (max over ranks) in micro-batch-stage "
          "units, runtime vs schedule\n";
  std::vector<std::string> headers = table_headers(cols_);
  if (!headers.empty()) headers[0] = "# " + headers[0];
  print_table_row(out_, widths_, headers);
  out_.flush();
}

void RunTable::row(const RunSummary& s) {
  if (format_ == "json") return;
  const std::vector<std::string> cells = table_row(cols_, s, format_ == "csv");
  if (format_ == "csv")
    print_csv_row(out_, cells);
  else
    print_table_row(out_, widths_, cells);
  out_.flush();
}

void RunTable::end(const std::vector<RunSummary>& runs) {
  if (format_ == "json") {
    nlohmann::json all = nlohmann::json::array();
    for (const RunSummary& s : runs) all.push_back(to_json(s));
    out_ << all.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else if (format_ == "table") {
    for (const RunSummary& s : runs)
      if (s.check == CheckStatus::kFail)
        out_ << "check failed: " << s.schedule << " M=" << s.M << " v=" << s.v << ": "
             << s.check_message << "\n";
  }
  out_.flush();
}

bool under_launcher() {
  for (const char* v : {"PMI_RANK", "PMI_SIZE", "PMI_FD", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE",
                        "MPI_LOCALNRANKS", "SLURM_STEP_ID"})
    if (std::getenv(v) != nullptr) return true;
  return false;
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
                                            BackendKind backend) {
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
  if (backend == BackendKind::kCuda)
    if (const std::string shared = shared_gpu_note(host, gpu); !shared.empty())
      out.push_back(shared +
                    ": their kernels time-slice unless CUDA MPS runs, so timings are not one GPU "
                    "per stage (docs/gpu.md)");
  return out;
}

}  // namespace bb::harness
