// What `run` prints: one-line messages on stderr, its context and the table (or CSV, JSON) of
// the runs on stdout, and the trace directory it writes into.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "harness/fields.hpp"
#include "harness/summary.hpp"
#include "harness/sweep.hpp"
#include "results/run_record.hpp"
#include "runtime/placement.hpp"

namespace bb::harness {

// Writes LINE and its newline to stderr in one write(2), so that lines from ranks that share
// the stream (mpiexec forwards them all to one file) never interleave mid-line.
void say(std::string line);

// `run`'s context (as nccl-tests prints one): ROOT, the root attributes of a results file
// (version, git sha, date, host, command line, library versions, SLURM ids; empty ones left
// out), then the ranks and their hosts, each rank's CPU binding, backend and transport.
std::vector<std::string> context_lines(const Attrs& root, const std::vector<RankPlacement>& ranks,
                                       BackendKind backend, TransportKind transport);

// The runs' table, printed row by row as each run finishes (columns from the field table,
// fixed before the first run). FORMAT table: the context and the legend as `# ` lines, the
// column header (`# schedule ...`), then one row per run, no trailing spaces; csv: the header
// row, then one row per run, every digit (the context goes to stderr as `# ` lines); json:
// the context to stderr, and the runs as one JSON array at the end.
class RunTable {
 public:
  // STEADY: --sync none. GPU: a GPU backend (the MFU column). CONFIGS: the sweep (whether the
  // stage model's columns show, the width of the schedule column).
  RunTable(std::ostream& out, std::string format, bool steady, bool gpu,
           const std::vector<RunConfig>& configs);
  void begin(const std::vector<std::string>& context);
  void row(const RunSummary& s);
  void end(const std::vector<RunSummary>& runs);

 private:
  std::ostream& out_;
  std::string format_;
  bool steady_;
  std::vector<const Field*> cols_;
  std::vector<std::size_t> widths_;
};

// Whether a launcher started this process (mpiexec's or srun's PMI variables are set), so
// that one rank is what was asked for rather than a plain `bubblebench run`.
bool under_launcher();

// Creates the trace directory (and its parents) if missing; throws ConfigError when it cannot
// be created or written.
std::string make_trace_dir(const std::string& dir);

// The trace file of a run in the --trace directory: "<run_key>.json", or where that is longer
// than a file name may be (255 bytes), the key's first 220 bytes, "_" and its FNV-1a 64 in hex
// (distinct keys stay distinct files; the full key is in the trace's title).
std::string trace_file_name(const std::string& key);

// Per rank, its host name and GPU index: "ranks 0, 1 and 2 share GPU 0 on node1" for the first
// GPU that several ranks use, "" when every rank has its own. `run` warns with it.
std::string shared_gpu_note(const std::vector<std::string>& host, const std::vector<int>& device);

// What `run` warns about where the ranks run (rank 0's gathered view), one line each:
// unbound ranks or ranks sharing a CPU (bb::placement_warning), ranks sharing a GPU.
std::vector<std::string> placement_warnings(const std::vector<RankPlacement>& ranks,
                                            BackendKind backend);

}  // namespace bb::harness
