#include "cli/mpi_start.hpp"

#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "common/error.hpp"
#include "harness/output.hpp"
#include "runtime/mpi_finalize.hpp"
#include "runtime/mpi_util.hpp"
#include "runtime/wait.hpp"

namespace bb {
namespace {

constexpr double kDefaultTimeout = 600;  // run's and calibrate's --timeout default

// This rank's --timeout (its last one) when it reads as a positive number, else the default.
// The argument exchange happens before the options are parsed, and is the first wait.
double timeout_of(const std::vector<std::string>& args) {
  double t = kDefaultTimeout;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string text;
    if (args[i] == "--timeout" && i + 1 < args.size()) text = args[i + 1];
    if (args[i].rfind("--timeout=", 0) == 0) text = args[i].substr(10);
    if (text.empty()) continue;
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() && *end == '\0' && v > 0 && std::isfinite(v)) t = v;
  }
  return t;
}

// An argument as printed in the error line: control bytes as '?', at most 80 characters.
std::string shown(const std::string& arg) {
  std::string s = arg.substr(0, 80);
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return "'" + s + (arg.size() > 80 ? "...'" : "'");
}

// The arguments as one buffer: each followed by a NUL (no argument contains one).
std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const std::string& a : args) s += a + '\0';
  return s;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < s.size()) {
    const std::size_t end = s.find('\0', at);
    out.push_back(s.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

// Rank 0's arguments on every rank (its length, then its bytes: two non-blocking broadcasts).
std::vector<std::string> rank0_arguments(const std::vector<std::string>& mine, double timeout) {
  std::string buf = mpi::rank(MPI_COMM_WORLD) == 0 ? joined(mine) : std::string();
  int n = static_cast<int>(buf.size());
  mpi::broadcast(n, 0, MPI_COMM_WORLD, timeout);
  buf.resize(static_cast<std::size_t>(n));
  MPI_Request req;
  BB_CHECK_MPI(MPI_Ibcast(buf.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD, &req));
  mpi::wait(req, timeout, "rank 0's arguments");
  return split(buf);
}

// kExitOk when every rank has rank 0's arguments; else the lowest differing rank prints.
int agree_on_arguments(int argc, char** argv) {
  const std::vector<std::string> mine(argv + (argc > 0 ? 1 : 0), argv + argc);
  const double timeout = timeout_of(mine);
  const int me = mpi::rank(MPI_COMM_WORLD), world = mpi::size(MPI_COMM_WORLD);
  const std::string line = argument_difference(rank0_arguments(mine, timeout), mine, me);
  const int first = mpi::allreduce_min(line.empty() ? world : me, MPI_COMM_WORLD, timeout);
  if (first == world) return kExitOk;
  if (first == me) harness::say(line);
  return kExitConfig;
}

}  // namespace

std::string argument_difference(const std::vector<std::string>& rank0,
                                const std::vector<std::string>& mine, int me) {
  if (mine == rank0) return "";
  std::size_t i = 0;
  while (i < mine.size() && i < rank0.size() && mine[i] == rank0[i]) ++i;
  const auto at = [i](const std::vector<std::string>& args) {
    return i < args.size() ? "is " + shown(args[i]) : std::string("is missing");
  };
  const std::string r = std::to_string(me);
  return "bubblebench: error: rank " + r + " was given other arguments than rank 0: argument " +
         std::to_string(i + 1) + " " + at(rank0) + " on rank 0 and " + at(mine) + " on rank " + r +
         " (every rank needs the same arguments)";
}

int start_mpi(int* argc, char*** argv) {
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    harness::say("bubblebench: error: MPI_Init failed");
    return kExitConfig;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
#if defined(__linux__)
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
  int code = kExitOk;
  try {
    code = agree_on_arguments(*argc, *argv);
  } catch (const TimeoutError& e) {
    harness::say(e.what());
    abort_job(kExitTimeout);
  } catch (const std::exception& e) {
    harness::say("bubblebench: rank " + std::to_string(mpi::rank(MPI_COMM_WORLD)) +
                 ": error: " + e.what());
    abort_job(kExitConfig);
  }
  return code == kExitOk ? code : mpi::finalize(code);
}

void abort_job(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  // MPI_Abort makes Hydra tear the job down at once, and output still in the pipe to its proxy
  // can be dropped: CI once saw exit 3 with the watchdog's line missing. A pause lets the proxy
  // forward this rank's last lines first; it only delays a job that is failing anyway.
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  // The job's line is already out: MPICH's own "Abort(3) on node 0 (rank 0 in comm 0):
  // application called MPI_Abort(...)" would be a second one that says nothing new.
  if (const int null = ::open("/dev/null", O_WRONLY); null >= 0) ::dup2(null, STDERR_FILENO);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

}  // namespace bb
