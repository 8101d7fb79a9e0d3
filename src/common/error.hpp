// Error types shared by the pure core and the edges. Exit codes follow design §5.3.
#pragma once

#include <stdexcept>
#include <string>

namespace bb {

enum ExitCode : int {
  kExitOk = 0,
  kExitCheckFailed = 1,
  kExitConfig = 2,
  kExitTimeout = 3,
  kExitIo = 4,
  kExitStopped = 5  // run: SIGUSR1 stopped the sweep between runs (continue with --resume)
};

// A configuration a schedule or command does not accept: one line, exit code 2.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A schedule that fails validation or the dry run (exit code 1), with a readable report.
struct ScheduleError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Input/output failure (exit code 4).
struct IoError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace bb
