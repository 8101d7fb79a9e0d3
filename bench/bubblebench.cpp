#include <string_view>

#include "cli/cli.hpp"

// OpenBLAS (linked for the runtime's CPU backend) starts a thread per core when it is loaded,
// and each spins in sched_yield for about 0.1 s before it sleeps: CPU that every command paid
// (sim at P=512: about a tenth of its CPU time on a quiet machine). The commands that never
// call BLAS stop those threads first thing. Not run: OpenBLAS would start them again when the
// runtime sets its thread count, closer to the timed steps. Weak: an OpenBLAS without it (not
// the pthread build) is left as it is.
extern "C" [[gnu::weak]] int blas_thread_shutdown_();

namespace {
bool never_calls_blas(int argc, char** argv) {
  if (argc < 2) return false;
  const std::string_view cmd = argv[1];
  return cmd == "sim" || cmd == "model" || cmd == "validate" || cmd == "show";
}
}  // namespace

int main(int argc, char** argv) {
  if (blas_thread_shutdown_ != nullptr && never_calls_blas(argc, argv)) blas_thread_shutdown_();
  return bb::cli_main(argc, argv);
}
