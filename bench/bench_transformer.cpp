// B:W:F time ratio of one chunk on CPU (one OpenBLAS thread, this thread's CPU time, the
// fastest of 40 micro-batches after 2 warm-ups): a transformer block without and with the
// causal mask, and the MLP block on the same tokens (docs/transformer.md).
// usage: bench_transformer [HIDDEN=256] [SEQ=128] [HEADS=4] [SEQUENCES=2]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "runtime/cpu_backend.hpp"
#include "runtime/stage.hpp"
#include "runtime/transformer_stage.hpp"

using namespace bb;

// This thread's CPU seconds: stable on a loaded machine, unlike wall time.
double cpu_now() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

template <class Chunk>
void measure(const char* name, Chunk& st, int reps) {
  Backend& be = st.backend();
  const std::size_t n = st.activation_count();
  Buffer x = be.allocate(n), y = be.allocate(n), dx = be.allocate(n);
  std::vector<double> f, b, w;
  for (int r = 0; r < reps + 2; ++r) {
    st.make_input(r, x.data());
    double t0 = cpu_now();
    st.forward(r, x.data(), y.data());
    double t1 = cpu_now();
    st.loss(r, 1, y.data(), y.data());
    double t2 = cpu_now();
    st.backward_input(r, y.data(), dx.data());
    double t3 = cpu_now();
    st.backward_weight(r);
    double t4 = cpu_now();
    if (r < 2) continue;
    f.push_back(t1 - t0);
    b.push_back(t3 - t2);
    w.push_back(t4 - t3);
  }
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[0];
  };
  const double F = med(f), B = med(b), W = med(w);
  std::printf("%s: F %.2f ms  B %.2f ms  W %.2f ms  B:W:F = %.2f : %.2f : 1\n", name, F * 1e3,
              B * 1e3, W * 1e3, B / F, W / F);
}

int main(int argc, char** argv) {
  const int h = argc > 1 ? std::atoi(argv[1]) : 256, S = argc > 2 ? std::atoi(argv[2]) : 128;
  const int heads = argc > 3 ? std::atoi(argv[3]) : 4, b = argc > 4 ? std::atoi(argv[4]) : 2;
  const int reps = 40;
  CpuBackend be;
  for (bool causal : {false, true}) {
    TransformerConfig c;
    c.hidden = h;
    c.heads = heads;
    c.seq = S;
    c.rows = b;
    c.num_layers = 1;
    c.seed = 1;
    c.causal = causal;
    TransformerStage st(be, c);
    char name[128];
    std::snprintf(name, sizeof name, "transformer h=%d S=%d H=%d b=%d f=4h%s", h, S, heads, b,
                  causal ? " causal" : "");
    measure(name, st, reps);
  }
  StageConfig m;
  m.hidden = h;
  m.rows = b * S;
  m.num_layers = 1;
  m.seed = 1;
  Stage mlp(be, m);
  char name[128];
  std::snprintf(name, sizeof name, "mlp h=%d rows=%d", h, b * S);
  measure(name, mlp, reps);
}
