// Where and how a results file was made: its root attributes (design §6), and the facts of
// this process they and the ranks table need.
#pragma once

#include <string>

#include "results/run_record.hpp"
#include "runtime/backend.hpp"

namespace bb::harness {

std::string host_name();          // gethostname(), else MPI's processor name
int device_of(Backend& backend);  // the CUDA device of this rank's backend, -1 on CPU
// This rank's index among the ranks of its node (the launcher's variable, else MPI's).
int local_rank();
std::string utc_now_iso8601();
// The command line as typed, arguments with spaces or shell characters single-quoted.
std::string command_line(int argc, char** argv);
std::string mpi_library_version();  // one line

// Root attributes of a new results file (schema_version is the writer's).
Attrs root_attributes(int argc, char** argv, const std::string& tool_version,
                      const std::string& git_sha);

}  // namespace bb::harness
