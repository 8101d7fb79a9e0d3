#include <algorithm>

#include "common/error.hpp"
#include "schedule/generators.hpp"

namespace bb {

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = {
      "naive", "gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipe", "dualpipev"};
  return names;
}

bool schedule_takes_v(const std::string& name) {
  return name == "interleaved";
}

Schedule generate(const std::string& name, const ScheduleParams& p) {
  // Validation and simulation keep a few bytes per (chunk, micro-batch): refuse sizes that
  // would not fit rather than die allocating.
  const long long chunks = static_cast<long long>(p.P) * std::max(p.v, 2);
  if (p.P < 1 || p.M < 1 || p.v < 1 || chunks * p.M > kMaxChunkMicroBatches)
    throw ConfigError(name + ": P=" + std::to_string(p.P) + ", M=" + std::to_string(p.M) +
                      ", v=" + std::to_string(p.v) + " is out of range (P, M, v >= 1 and at most " +
                      std::to_string(kMaxChunkMicroBatches) + " chunk x micro-batch pairs)");
  if (name == "naive") return generate_naive(p);
  if (name == "gpipe") return generate_gpipe(p);
  if (name == "1f1b") return generate_1f1b(p);
  if (name == "interleaved") return generate_interleaved(p);
  if (name == "zb-h1") return generate_zb_h1(p);
  if (name == "zb-h2") return generate_zb_h2(p);
  if (name == "zb-v") return generate_zb_v(p);
  if (name == "dualpipe") return generate_dualpipe(p);
  if (name == "dualpipev") return generate_dualpipev(p);
  std::string known;
  for (const auto& n : schedule_names()) known += (known.empty() ? "" : " ") + n;
  throw ConfigError("unknown schedule '" + name + "' (known: " + known + ", csv:FILE)");
}

}  // namespace bb
