#include "runtime/mpi_finalize.hpp"

#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

namespace bb::mpi {

double finalize_timeout(const char* env) {
  if (env == nullptr || *env == '\0') return kDefaultFinalizeTimeout;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  if (*end != '\0' || !(v >= 0) || !std::isfinite(v)) return kDefaultFinalizeTimeout;
  return v;
}

int finalize_within(const std::function<void()>& finalize, double seconds, int code,
                    const std::string& line) {
  if (!(seconds > 0)) {
    finalize();
    return code;
  }
  std::mutex m;
  std::condition_variable cv;
  bool returned = false;
  std::thread watchdog([&] {
    std::unique_lock lock(m);
    if (cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return returned; })) return;
    const std::string text = line + "\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
    ::_exit(code);  // `finalize` still runs on the other thread: no destructor may wait for it
  });
  finalize();
  {
    const std::lock_guard lock(m);
    returned = true;
  }
  cv.notify_one();
  watchdog.join();
  return code;
}

int finalize(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  int me = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  const double seconds = finalize_timeout(std::getenv("BB_FINALIZE_TIMEOUT"));
  char within[32];
  std::snprintf(within, sizeof within, "%g", seconds);
  const std::string line =
      "bubblebench: rank " + std::to_string(me) + ": warning: MPI_Finalize did not return in " +
      within +
      " s (BB_FINALIZE_TIMEOUT), the known MPICH 4.0 finalize deadlock across hosts; every "
      "output of the run is complete: exit " +
      std::to_string(code) + ", the run's own code";
  return finalize_within([] { MPI_Finalize(); }, seconds, code, line);
}

}  // namespace bb::mpi
