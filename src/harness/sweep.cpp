#include "harness/sweep.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "common/error.hpp"
#include "results/hdf5_file.hpp"
#include "schedule/lower.hpp"
#include "schedule/validate.hpp"

namespace bb::harness {

ExecutorConfig executor_config(const RunSettings& s, int hidden, int layers, int mb_size) {
  ExecutorConfig c;
  c.hidden = hidden;
  c.layers = layers;
  c.mb_size = mb_size;
  c.seed = s.seed;
  c.synthetic = s.synthetic();
  c.t_f = s.t_f;
  c.t_b = s.t_b;
  c.t_w = s.t_w;
  c.t_fb = s.t_fb;
  c.optimizer.kind = s.optimizer;
  c.optimizer.lr = static_cast<float>(s.lr);
  c.timeout_s = s.timeout;
  c.hold_sends = s.hold_sends;
  c.model_layers = s.model_layers;
  c.partition = s.partition;
  c.dtype = s.dtype;
  if (s.stage == StageModel::kTransformer)
    c.transformer = TransformerConfig{
        .heads = s.heads, .seq = s.seq, .ffn = s.ffn, .causal = s.causal, .vocab = s.vocab};
  return c;
}

std::uint64_t fnv1a(std::uint64_t h, const char* bytes, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    h = (h ^ static_cast<unsigned char>(bytes[i])) * 0x100000001b3ull;
  return h;
}

std::string file_hash(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw ConfigError(path + ": cannot read: " + std::strerror(errno));
  std::uint64_t h = kFnvBasis;
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) h = fnv1a(h, buf, n);
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) throw ConfigError(path + ": cannot read");
  return hex16(h);
}

std::string hex16(std::uint64_t h) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::string seconds_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

std::string run_key(const RunConfig& c, const RunSettings& o) {
  const Schedule& s = *c.lowered;
  std::string k = c.schedule + (c.csv_hash.empty() ? "" : "_hash=" + c.csv_hash) +
                  "_P=" + std::to_string(s.P) + "_M=" + std::to_string(s.M) +
                  "_v=" + std::to_string(s.v) + "_" + std::string(name_of(o.backend)) + "_" +
                  std::string(name_of(o.transport)) + "_" + std::string(name_of(o.compute)) +
                  "_h=" + std::to_string(c.hidden) + "_L=" + std::to_string(c.layers) +
                  "_b=" + std::to_string(c.mb_size) + "_" + std::string(name_of(o.dtype)) +
                  "_recompute=" + (c.recompute ? "1" : "0") +
                  "_sync=" + std::string(name_of(o.sync)) + "_warmup=" + std::to_string(o.warmup) +
                  "_iters=" + std::to_string(o.iters);
  if (o.stage == StageModel::kTransformer)  // MLP keys stay as they were
    k += "_transformer_S=" + std::to_string(o.seq) + "_H=" + std::to_string(o.heads) +
         "_f=" + std::to_string(o.ffn) + (o.causal ? "_causal" : "") +
         (o.vocab > 0 ? "_V=" + std::to_string(o.vocab) : "");
  if (o.model_layers > 0) {  // a fixed model (keys without it are unchanged)
    k += "_N=" + std::to_string(o.model_layers);
    if (!o.partition.empty()) k += "_partition=" + partition_text(o.partition, '-');
    if (o.partition_auto) k += "_partition=auto";
  }
  if (o.hold_sends) k += "_hold_sends";  // keys without it are unchanged
  if (o.synthetic()) {
    k += "_tf=" + seconds_text(o.t_f) + "_tb=" + seconds_text(o.t_b) + "_tw=" + seconds_text(o.t_w);
    if (o.t_fb >= 0) k += "_tfb=" + seconds_text(o.t_fb);
  }
  return sanitize_key(k);
}

int sweep_fingerprint(const std::vector<RunConfig>& configs) {
  std::uint64_t h = kFnvBasis;
  for (const RunConfig& c : configs) h = fnv1a(fnv1a(h, c.key.data(), c.key.size()), "\n", 1);
  return static_cast<int>((h ^ (h >> 32)) & 0x7fffffffu);
}

std::vector<RunConfig> make_configs(std::vector<NamedSchedule> schedules, const ModelLists& lists,
                                    const RunSettings& settings, int world) {
  const bool model_sweep = lists.hidden.size() * lists.layers.size() * lists.mb_size.size() > 1;
  std::vector<RunConfig> out;
  std::set<std::string> keys;
  for (auto& [name, s] : schedules) {
    const bool csv = name.rfind("csv:", 0) == 0;
    if (csv && s.P != world)
      throw ConfigError(name + " has P=" + std::to_string(s.P) + " but the MPI world size is " +
                        std::to_string(world));
    validate_or_throw(s);
    const std::string csv_hash = csv ? file_hash(name.substr(4)) : "";
    auto lowered = std::make_shared<const Schedule>(
        s.lowered ? std::move(s) : lower_by_periodic_form(std::move(s)));
    if (settings.model_layers > 0) try {  // the model splits over this schedule's chunks
        (void)stage_layers(executor_config(settings, 1, 0, 1), model_stages(*lowered));
      } catch (const ConfigError& e) {
        throw ConfigError(name + " P=" + std::to_string(lowered->P) +
                          " v=" + std::to_string(lowered->v) + ": " + e.what());
      }
    for (int h : lists.hidden)
      for (int L : lists.layers)
        for (int b : lists.mb_size)
          for (bool rc : lists.recompute) {
            RunConfig c{name, lowered, rc, h, L, b, csv_hash, "", ""};
            c.key = run_key(c, settings);
            if (!keys.insert(c.key).second) continue;  // a schedule named twice
            c.label = name + " P=" + std::to_string(lowered->P) +
                      " M=" + std::to_string(lowered->M) + " v=" + std::to_string(lowered->v);
            if (model_sweep)
              c.label +=
                  " h=" + std::to_string(h) + " L=" + std::to_string(L) + " b=" + std::to_string(b);
            if (rc) c.label += " recompute";
            out.push_back(std::move(c));
          }
  }
  return out;
}

}  // namespace bb::harness
