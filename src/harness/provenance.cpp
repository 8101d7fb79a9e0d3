#include "harness/provenance.hpp"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>

#include "runtime/cuda_plugin.hpp"
#include "runtime/mpi_util.hpp"

namespace bb::harness {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

}  // namespace

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return mpi::processor_name();
  return name;
}

int device_of(Backend& backend) {
  return cuda_plugin::device_of(backend);
}

int local_rank() {
  for (const char* var : {"MPI_LOCALRANKID", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  MPI_Comm node;
  BB_CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  const int r = mpi::rank(node);
  MPI_Comm_free(&node);
  return r;
}

std::string utc_now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string command_line(int argc, char** argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyz"
                                         "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                         "-_=+.,:/@%") == std::string::npos;
    if (!plain) {
      std::string q = "'";
      for (char ch : a) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      a = q + "'";
    }
    if (i > 0) out += ' ';
    out += a;
  }
  return out;
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "unknown";
  std::string s(text, static_cast<std::size_t>(std::max(0, len)));
  s = s.substr(0, s.find('\n'));
  // One line, whitespace runs (MPICH puts a tab after "Version:") as one space.
  std::string out;
  for (char ch : s) {
    if (ch == '\0') break;
    const bool space = ch == ' ' || ch == '\t' || ch == '\r';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : ch;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

Attrs root_attributes(int argc, char** argv, const std::string& tool_version,
                      const std::string& git_sha) {
  // Loads the CUDA plugin where there is one (its versions), "none" each without.
  const cuda_plugin::Versions cuda = cuda_plugin::versions();
  return {
      {"tool_version", tool_version},
      {"git_sha", git_sha},
      {"created_utc", utc_now_iso8601()},
      {"hostname", host_name()},
      {"cmdline", command_line(argc, argv)},
      {"mpi_library", mpi_library_version()},
      // What the build can use; what a run used is its own attributes (fields.cpp).
      {"build_cuda", cuda.runtime},
      {"build_nccl", cuda.nccl},
      {"slurm_job_id", env_or_empty("SLURM_JOB_ID")},
      {"slurm_array_job_id", env_or_empty("SLURM_ARRAY_JOB_ID")},
      {"slurm_array_task_id", env_or_empty("SLURM_ARRAY_TASK_ID")},
  };
}

}  // namespace bb::harness
