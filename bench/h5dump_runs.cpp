// h5dump_runs FILE.h5: a results file as JSON through the project's own reader
// (bb::read_root_attrs / read_complete_keys / read_run), so that tests can compare what C++
// reads with what h5py reads. NaN attributes come out as null.
//   {"root": {...}, "runs": {"<run_key>": {"attrs": {...}, "step_time_s": [...],
//    "events": [[iter, rank, chunk, microbatch, kind, t_start_s, t_end_s], ...],
//    "ranks": [{"rank": 0, "host": ..., ...}, ...]}}}
// Exit 0; 2 with the usage on stderr for other arguments; 4 with one line on stderr when the
// file cannot be read. `h5dump_runs --help` (or -h) prints the usage on stdout, exit 0.
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "results/hdf5_file.hpp"

namespace {

nlohmann::json attrs_json(const bb::Attrs& attrs) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [k, v] : attrs) std::visit([&](const auto& x) { out[k] = x; }, v);
  return out;
}

constexpr const char* kUsage =
    "usage: h5dump_runs FILE.h5\n"
    "Prints a bubblebench results file (any schema_version this build reads) as one JSON\n"
    "document on stdout: {\"root\": {...}, \"runs\": {\"<run_key>\": {\"attrs\", \"step_time_s\",\n"
    "\"events\", \"ranks\"}}}, through the project's C++ reader. Exit 0; 2 for wrong\n"
    "arguments; 4 when the file cannot be read.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::cout << kUsage;
    return 0;
  }
  if (argc != 2 || argv[1][0] == '-') {
    std::cerr << kUsage;
    return bb::kExitConfig;
  }
  try {
    const std::string path = argv[1];
    nlohmann::json doc;
    doc["root"] = attrs_json(bb::read_root_attrs(path));
    doc["runs"] = nlohmann::json::object();
    for (const std::string& key : bb::read_complete_keys(path)) {
      const bb::RunRecord run = bb::read_run(path, key);
      nlohmann::json r;
      r["attrs"] = attrs_json(run.attrs);
      r["step_time_s"] = run.step_time_s;
      r["events"] = nlohmann::json::array();
      for (const bb::EventRecord& e : run.events)
        r["events"].push_back(
            {e.iter, e.rank, e.chunk, e.microbatch, e.kind, e.t_start_s, e.t_end_s});
      r["ranks"] = nlohmann::json::array();
      for (const bb::RankRecord& k : run.ranks) {  // every column, as the file has them
        nlohmann::json row = nlohmann::json::object();
        for (const auto& [name, v] : k.columns)
          std::visit([&, n = name](const auto& x) { row[n] = x; }, v);
        r["ranks"].push_back(std::move(row));
      }
      doc["runs"][key] = std::move(r);
    }
    std::cout << doc.dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "h5dump_runs: " << e.what() << "\n";
    return bb::kExitIo;
  }
  return 0;
}
