// Every rank's order against the reference implementations'. tests/unit/data/ holds what their
// own code builds: pytorch_orders.txt, torch.distributed.pipelining's schedule classes (PyTorch
// 2.15.0, run by tools/pytorch-orders.py) for P = 1..8, M = 1..4P, v = 1..4; sail_orders.txt,
// sail-sg's V-Half/V-Min generator (github.com/sail-sg/zero-bubble-pipeline-parallelism,
// zbv_greedy.py's PipelineGraph, run by tools/sail-orders.py) for P = 1..8, M = 1..4P and
// P=12 M=36, P=16 M=48. A line is a configuration and the
// FNV-1a 64 digest of the rows PyTorch's _dump_csv would write (dump_pytorch_csv's text), or
// `refused` where PyTorch's constructor raises; a few small orders follow in full. Ours must be
// the same text wherever both accept, and the schedules built to be PyTorch's (looped-bfs,
// interleaved-zb) must accept exactly what PyTorch accepts.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "schedule/generators.hpp"
#include "schedule/text.hpp"

namespace bb {
namespace {

struct Reference {
  std::string name;
  int P = 0, M = 0, v = 0;
  std::string digest;  // 16 hex digits, or "refused"
};

struct ReferenceFile {
  std::vector<Reference> digests;
  std::map<std::string, std::string> orders;  // "name P M v" -> rows (CRLF line ends)
};

ReferenceFile read_reference(const std::string& file) {
  std::ifstream in(std::filesystem::path(BB_SOURCE_DIR) / "tests/unit/data" / file);
  EXPECT_TRUE(in.good()) << file;
  ReferenceFile f;
  std::string line, current;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    Reference r;
    if (line.rfind("csv ", 0) == 0) {
      std::string tag;
      words >> tag >> r.name >> r.P >> r.M >> r.v;
      current = r.name + " " + std::to_string(r.P) + " " + std::to_string(r.M) + " " +
                std::to_string(r.v);
      f.orders[current];
    } else if (!current.empty()) {  // a row of the order in full
      f.orders[current] += line + "\r\n";
    } else {
      words >> r.name >> r.P >> r.M >> r.v >> r.digest;
      f.digests.push_back(r);
    }
  }
  return f;
}

std::string fnv1a64(const std::string& text) {
  std::uint64_t h = 0xCBF29CE484222325ULL;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001B3ULL;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

// Ours as PyTorch's CSV, or "refused".
std::string ours(const std::string& name, int P, int M, int v) {
  try {
    return dump_pytorch_csv(generate(name, {P, M, v}));
  } catch (const ConfigError&) {
    return "refused";
  }
}

// Compares every configuration of `file`; `exact` names the schedules that must also refuse
// exactly where the reference does. Returns the configurations compared, by schedule.
std::map<std::string, int> compare(const std::string& file, const std::set<std::string>& exact) {
  const ReferenceFile ref = read_reference(file);
  std::map<std::string, int> compared;
  for (const Reference& r : ref.digests) {
    const std::string what = r.name + " P=" + std::to_string(r.P) + " M=" + std::to_string(r.M) +
                             " v=" + std::to_string(r.v);
    const std::string text = ours(r.name, r.P, r.M, r.v);
    const bool we_refuse = text == "refused", they_refuse = r.digest == "refused";
    if (exact.count(r.name)) {
      EXPECT_EQ(we_refuse, they_refuse) << what;
    }
    if (we_refuse || they_refuse) continue;
    ++compared[r.name];
    EXPECT_EQ(fnv1a64(text), r.digest) << what << ": ours is\n" << text;
  }
  EXPECT_GE(ref.orders.size(), 3u) << file;
  for (const auto& [key, rows] : ref.orders) {
    std::istringstream words(key);
    std::string name;
    int P = 0, M = 0, v = 0;
    words >> name >> P >> M >> v;
    EXPECT_EQ(ours(name, P, M, v), rows) << file << ": " << key;
  }
  return compared;
}

TEST(ReferenceOrders, PytorchsOwnOrders) {
  auto compared = compare("pytorch_orders.txt", {"looped-bfs", "interleaved-zb"});
  // Every schedule of the file was compared somewhere; the new ones wherever PyTorch accepts
  // them: looped-bfs at every P <= 8, M <= 4P, v <= 4; interleaved-zb where M splits into
  // whole rounds.
  for (const char* n :
       {"looped-bfs", "interleaved-zb", "interleaved", "gpipe", "zb-v", "dualpipev"})
    EXPECT_GT(compared[n], 0) << n;
  EXPECT_EQ(compared["looped-bfs"], 4 * 4 * (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8));
  EXPECT_EQ(compared["interleaved-zb"], 428);
}

TEST(ReferenceOrders, SailSgsControllableMemoryOrders) {
  auto compared = compare("sail_orders.txt", {"v-half", "v-min"});
  EXPECT_EQ(compared["v-half"], 4 * (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8) + 2);
  EXPECT_EQ(compared["v-min"], compared["v-half"]);
}

TEST(ReferenceOrders, DigestIsFnv1a64) {
  EXPECT_EQ(fnv1a64(""), "cbf29ce484222325");
  EXPECT_EQ(fnv1a64("a"), "af63dc4c8601ec8c");
}

}  // namespace
}  // namespace bb
