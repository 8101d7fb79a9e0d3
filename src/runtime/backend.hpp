// Compute backend: device memory, the kernels of the stage models (design §3's MLP and the
// transformer block of docs/transformer.md), a clock and the waits of the synthetic compute
// mode. CpuBackend implements it on OpenBLAS; a CUDA backend implements the same interface
// on cuBLAS.
//
// All float pointers taken by the kernels are device pointers (host memory on CPU). A
// caller may offset a device pointer inside a buffer it owns, and nothing else: data moves
// between host and device only through to_host()/from_host(). Kernels are enqueued in
// order on one stream; synchronize() waits for them. On CPU every call is synchronous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace bb {

class Backend;

// Owning handle to `size()` floats of device memory; move-only. Freed on destruction or
// reset(). A Buffer must not outlive the Backend that allocated it.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  float* data() const { return data_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(float); }
  bool empty() const { return data_ == nullptr; }

  void reset() noexcept;

 private:
  friend class Backend;
  Buffer(Backend* owner, float* data, std::size_t count)
      : owner_(owner), data_(data), count_(count) {}

  Backend* owner_ = nullptr;
  float* data_ = nullptr;
  std::size_t count_ = 0;
};

// Row-major GEMM operand: as stored, or transposed.
enum Trans : bool { kNoTrans = false, kTrans = true };

struct AdamParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
};

// SplitMix64 finaliser. Counter-based random numbers: value `index` of stream `stream`
// under `seed` depends on nothing else, so any process can regenerate any tensor.
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

constexpr std::uint64_t seeded_key(std::uint64_t seed, std::uint64_t stream) {
  return splitmix64(splitmix64(seed) ^ stream);
}

// Uniform in [-1, 1) with 24 random bits: exactly representable, so every backend that
// evaluates this function produces bit-identical tensors.
constexpr float seeded_uniform_value(std::uint64_t key, std::uint64_t index) {
  const std::uint64_t r = splitmix64(key + index * 0x9E3779B97F4A7C15ull);
  return static_cast<float>(r >> 40) * (1.0f / 8388608.0f) - 1.0f;
}

// Host staging of device buffers, for a transport that moves host memory only (the MPI
// transport with device memory; design §2.1): the backend, not the transport, knows how to
// get data between its memory and the host. A HostStaging lends host buffers, each named by
// a Ticket, and is used from one thread. Made by Backend::make_host_staging().
//
//   send:    t = stage_send(dev, n)   copies n floats of dev (after the compute enqueued so
//                                     far) into a host buffer;
//            send_ready(t)            that buffer once the copy is complete, else null (never
//                                     blocks): hand it to the network;
//            release(t)               once the network is done with it.
//   receive: t = stage_recv(dev, n);  recv_buffer(t) is a host buffer for the network;
//            deliver(t)               once the data is there: copies it to dev, ordered before
//                                     any compute enqueued afterwards; the buffer is reused.
// release() and deliver() reset the ticket. A ticket of the other kind, or one already
// released or delivered, throws std::logic_error.
class HostStaging {
 public:
  struct Ticket {
    std::int64_t id = -1;
    bool valid() const { return id >= 0; }
  };

  virtual ~HostStaging() = default;
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  virtual Ticket stage_send(const float* device_src, std::size_t count) = 0;
  virtual const float* send_ready(const Ticket& ticket) = 0;
  virtual void release(Ticket& ticket) = 0;

  virtual Ticket stage_recv(float* device_dst, std::size_t count) = 0;
  virtual float* recv_buffer(const Ticket& ticket) = 0;
  virtual void deliver(Ticket& ticket) = 0;

  // Host bytes held (lent or kept for reuse), and lent now.
  virtual std::size_t held_bytes() const = 0;
  virtual std::size_t in_use_bytes() const = 0;

 protected:
  HostStaging() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  virtual std::string_view name() const = 0;

  // --- Memory -------------------------------------------------------------------------
  // `count` floats, uninitialised. Throws std::bad_alloc when out of memory.
  Buffer allocate(std::size_t count);
  // Bytes currently held through Buffers of this backend, and the peak since construction
  // or reset_peak_allocated().
  std::size_t allocated_bytes() const { return allocated_; }
  std::size_t peak_allocated_bytes() const { return peak_allocated_; }
  void reset_peak_allocated() { peak_allocated_ = allocated_; }

  // Copies between device memory and host memory; both wait until the data is there.
  virtual void to_host(const float* device_src, float* host_dst, std::size_t count) = 0;
  virtual void from_host(const float* host_src, float* device_dst, std::size_t count) = 0;
  std::vector<float> download(const float* device_src, std::size_t count);

  // --- Host staging -------------------------------------------------------------------
  // True when device pointers are host memory (CPU): a transport that moves host memory
  // uses them as they are. Otherwise it goes through make_host_staging().
  virtual bool device_is_host() const = 0;
  // A new HostStaging for this backend (CPU: plain host buffers and memcpy; CUDA: pinned
  // buffers and copies on streams of their own). It must not outlive the backend.
  virtual std::unique_ptr<HostStaging> make_host_staging() = 0;

  // Says that p[0, count) holds model parameters: read as GEMM operands, written only through
  // this backend's kernels and copies (never by a transport), until its Buffer is freed. A
  // backend may keep derived copies of such operands (CUDA with bf16 GEMMs: the operand
  // already rounded to bf16, refreshed after any write to it). Default: nothing.
  virtual void note_parameters(const float* p, std::size_t count) {
    (void)p;
    (void)count;
  }

  // A poll the backend may call between slices of a long kernel, so that the transport moves
  // messages while this rank computes (MPI moves data only inside MPI calls). The CPU backend
  // cuts long GEMMs into slices with one call between them; backends that compute
  // asynchronously ignore it. An empty function removes it.
  virtual void set_progress_poll(std::function<void()> poll) { (void)poll; }

  // --- Kernels (device pointers; `count` elements) ------------------------------------
  // C = alpha·op(A)·op(B) + beta·C, row-major fp32; op(A) is m×k, op(B) k×n, C m×n.
  virtual void gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
                    int lda, const float* b, int ldb, float beta, float* c, int ldc) = 0;
  virtual void fill(float* x, float value, std::size_t count) = 0;
  virtual void copy(const float* src, float* dst, std::size_t count) = 0;
  // y += alpha·x
  virtual void axpy(float alpha, const float* x, float* y, std::size_t count) = 0;
  // a = gelu(z) (exact, erf form). a may alias z.
  virtual void gelu(const float* z, float* a, std::size_t count) = 0;
  // dz = da ⊙ gelu'(z). dz may alias z or da.
  virtual void gelu_backward(const float* z, const float* da, float* dz, std::size_t count) = 0;
  // *loss_sum += scale·Σ(y−t)² (one device float), dy = 2·scale·(y−t). dy may alias y.
  virtual void mse_loss(const float* y, const float* target, float* dy, std::size_t count,
                        float scale, float* loss_sum) = 0;
  // p −= lr·g
  virtual void sgd_update(float* p, const float* g, std::size_t count, float lr) = 0;
  // Adam with bias correction; `step` counts from 1. m and v start at zero.
  virtual void adam_update(float* p, const float* g, float* m, float* v, std::size_t count,
                           const AdamParams& params, std::int64_t step) = 0;
  // x[i] = scale · seeded_uniform_value(seeded_key(seed, stream), i)
  virtual void seeded_uniform(float* x, std::size_t count, std::uint64_t seed, std::uint64_t stream,
                              float scale) = 0;

  // --- Kernels of the transformer block (docs/transformer.md) --------------------------
  // For i in [0, batch): C_i = alpha·op(A_i)·op(B_i) + beta·C_i with X_i = x + i·stride_x
  // (row-major, as gemm()). The C_i must not overlap. Attention runs its heads as one batch.
  virtual void gemm_strided_batched(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha,
                                    const float* a, int lda, std::int64_t stride_a, const float* b,
                                    int ldb, std::int64_t stride_b, float beta, float* c, int ldc,
                                    std::int64_t stride_c, int batch) = 0;
  // Softmax of each row of the dense rows×cols matrix x into y (y may alias x). causal: rows
  // come in cols×cols blocks (query × key of one head) and row r sees only the columns
  // j <= r mod cols; the others get probability 0. rows must then be a multiple of cols.
  virtual void softmax(const float* x, float* y, int rows, int cols, bool causal) = 0;
  // dx = y ⊙ (dy − rowsum(y ⊙ dy)), the input gradient of softmax from its output y. dx may
  // alias dy. Masked entries (y = 0) get 0.
  virtual void softmax_backward(const float* y, const float* dy, float* dx, int rows, int cols) = 0;
  // Per row of x (rows×cols): mean, rstd = 1/sqrt(var + eps) (biased variance), and
  // y = (x − mean)·rstd ⊙ gamma + beta. mean and rstd hold `rows` floats each.
  virtual void layernorm(const float* x, const float* gamma, const float* beta, float* y,
                         float* mean, float* rstd, int rows, int cols, float eps) = 0;
  // Input gradient of layernorm, ADDED to dx (the residual stream's gradient is there):
  // with x̂ = (x − mean)·rstd and g = dy ⊙ gamma, dx += rstd·(g − mean(g) − x̂·mean(g ⊙ x̂)).
  virtual void layernorm_backward_input(const float* x, const float* gamma, const float* mean,
                                        const float* rstd, const float* dy, float* dx, int rows,
                                        int cols) = 0;
  // Parameter gradients of layernorm, accumulated: dgamma += Σ_rows dy ⊙ x̂, dbeta += Σ_rows dy.
  virtual void layernorm_backward_params(const float* x, const float* mean, const float* rstd,
                                         const float* dy, float* dgamma, float* dbeta, int rows,
                                         int cols) = 0;
  // y[r][c] += bias[c] for the dense rows×cols matrix y.
  virtual void add_bias(float* y, const float* bias, int rows, int cols) = 0;
  // out[c] += Σ_r x[r][c] (a bias's gradient) for the dense rows×cols matrix x.
  virtual void column_sums(const float* x, float* out, int rows, int cols) = 0;

  // --- Kernels of the model's ends (docs/transformer.md, "Model ends") -------------------
  // Not every backend has them (default: throws std::runtime_error naming the backend).
  // Token ids are floats holding exact integers in [0, vocab) (vocab < 2^24).
  // out[t] = table[ids[t]] + positions[t mod seq] for t in [0, tokens); rows of width cols.
  virtual void embedding(const float* ids, const float* table, const float* positions, float* out,
                         int tokens, int seq, int cols) {
    (void)ids, (void)table, (void)positions, (void)out, (void)tokens, (void)seq, (void)cols;
    no_model_ends();
  }
  // Gradients of embedding(), accumulated: dtable[ids[t]] += dout[t], dpositions[t mod seq] +=
  // dout[t].
  virtual void embedding_backward(const float* ids, const float* dout, float* dtable,
                                  float* dpositions, int tokens, int seq, int cols) {
    (void)ids, (void)dout, (void)dtable, (void)dpositions, (void)tokens, (void)seq, (void)cols;
    no_model_ends();
  }
  // Per row r of logits (rows×cols): *loss_sum += scale·(logsumexp(row) − row[targets[r]]),
  // dlogits = scale·(softmax(row) − onehot(targets[r])). dlogits may alias logits.
  virtual void cross_entropy(const float* logits, const float* targets, float* dlogits, int rows,
                             int cols, float scale, float* loss_sum) {
    (void)logits, (void)targets, (void)dlogits, (void)rows, (void)cols, (void)scale, (void)loss_sum;
    no_model_ends();
  }

  // --- Time ---------------------------------------------------------------------------
  // Waits until every enqueued kernel has finished.
  virtual void synchronize() = 0;
  // Without blocking: whether everything enqueued has finished. A caller that must not wait
  // past a deadline polls this before synchronize() (on GPU the stream may wait for a
  // receive that never completes). Synchronous backends are always done.
  virtual bool queue_done() { return true; }
  // Seconds on a monotonic clock shared by the processes of one machine.
  virtual double now() = 0;
  // Synthetic compute (design §3): occupy the compute stream for `seconds`. On CPU,
  // sleep_for blocks without using a core (for more ranks than cores) and spin_for busy-waits.
  virtual void sleep_for(double seconds) = 0;
  virtual void spin_for(double seconds) = 0;

  // Timestamps in the compute stream's order (design §7: CUDA events on the compute stream,
  // steady_clock on CPU). `begin_marks()` records the origin (a step's common start) and
  // forgets earlier marks; `mark()` records a point after everything enqueued so far and
  // returns its id; `mark_seconds(id)` is the time from the origin to that mark, valid after
  // synchronize(). The default implementation uses now() (right for a synchronous backend).
  virtual void begin_marks() {
    marks_.clear();
    origin_ = now();
  }
  virtual std::size_t mark() {
    marks_.push_back(now());
    return marks_.size() - 1;
  }
  virtual double mark_seconds(std::size_t id) { return marks_.at(id) - origin_; }
  // now() of the origin, on the host clock (to align marks with host-side waits).
  double mark_origin() const { return origin_; }

 protected:
  Backend() = default;
  virtual float* raw_allocate(std::size_t bytes) = 0;
  virtual void raw_free(float* p, std::size_t bytes) noexcept = 0;

 private:
  [[noreturn]] void no_model_ends() const {
    throw std::runtime_error("the " + std::string(name()) +
                             " backend has no kernels for the model's ends (--vocab): use the CPU");
  }

  friend class Buffer;
  void release(float* p, std::size_t count) noexcept;

  std::size_t allocated_ = 0;
  std::size_t peak_allocated_ = 0;
  std::vector<double> marks_;
  double origin_ = 0;
};

// --- Inline definitions (every backend links these; there is no separate source file) ------

inline Buffer::Buffer(Buffer&& other) noexcept
    : owner_(other.owner_), data_(other.data_), count_(other.count_) {
  other.owner_ = nullptr;
  other.data_ = nullptr;
  other.count_ = 0;
}

inline Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = other.owner_;
    data_ = other.data_;
    count_ = other.count_;
    other.owner_ = nullptr;
    other.data_ = nullptr;
    other.count_ = 0;
  }
  return *this;
}

inline void Buffer::reset() noexcept {
  if (data_ != nullptr) owner_->release(data_, count_);
  owner_ = nullptr;
  data_ = nullptr;
  count_ = 0;
}

inline Buffer Backend::allocate(std::size_t count) {
  const std::size_t bytes = (count == 0 ? 1 : count) * sizeof(float);
  float* p = raw_allocate(bytes);
  allocated_ += bytes;
  if (allocated_ > peak_allocated_) peak_allocated_ = allocated_;
  return Buffer(this, p, count);
}

inline void Backend::release(float* p, std::size_t count) noexcept {
  const std::size_t bytes = (count == 0 ? 1 : count) * sizeof(float);
  allocated_ -= bytes;
  raw_free(p, bytes);
}

inline std::vector<float> Backend::download(const float* device_src, std::size_t count) {
  std::vector<float> host(count);
  if (count > 0) to_host(device_src, host.data(), count);
  return host;
}

}  // namespace bb
