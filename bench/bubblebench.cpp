#include <malloc.h>

#include <string_view>

#include "cli/cli.hpp"

// OpenBLAS (linked for the runtime's CPU backend) starts a thread per core when it is loaded,
// and each spins in sched_yield for about 0.1 s before it sleeps: CPU that every command paid
// (sim at P=512: about a tenth of its CPU time on a quiet machine). The commands that never
// call BLAS stop those threads first thing. Not run: OpenBLAS would start them again when the
// runtime sets its thread count, closer to the timed steps. Weak: an OpenBLAS without it (not
// the pthread build) is left as it is.
extern "C" [[gnu::weak]] int blas_thread_shutdown_();

// glibc maps every block above 128 KiB on its own and unmaps it when freed, so each of a large
// schedule's per-rank lists (P=512, M=8192: 100-200 KiB each) faults its pages in afresh, and
// so does every list built after one is freed (sim of zb-v: 46 thousand page faults, a third
// of its time in the kernel, for 116 MiB at its peak). The list commands keep blocks up to
// 32 MiB in the heap and the heap's free memory to reuse (sim of zb-v: 29 thousand).
static void keep_freed_lists() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

namespace {
bool never_calls_blas(int argc, char** argv) {
  if (argc < 2) return false;
  const std::string_view cmd = argv[1];
  return cmd == "sim" || cmd == "model" || cmd == "validate" || cmd == "show";
}
}  // namespace

int main(int argc, char** argv) {
  if (never_calls_blas(argc, argv)) {
    if (blas_thread_shutdown_ != nullptr) blas_thread_shutdown_();
    keep_freed_lists();
  }
  return bb::cli_main(argc, argv);
}
