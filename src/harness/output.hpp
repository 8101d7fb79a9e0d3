// What `run` prints: one-line messages on stderr, the table or JSON of the runs on stdout, and
// the trace directory it writes into.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "harness/summary.hpp"
#include "runtime/placement.hpp"

namespace bb::harness {

// Writes LINE and its newline to stderr in one write(2), so that lines from ranks that share
// the stream (mpiexec forwards them all to one file) never interleave mid-line.
void say(std::string line);

// The table of the runs (columns from the field table) and its legend, or their JSON array.
void print_runs(std::ostream& out, const std::vector<RunSummary>& runs, bool json);

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
                                            const std::string& backend);

}  // namespace bb::harness
