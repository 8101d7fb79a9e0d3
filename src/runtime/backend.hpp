// Compute backend: device memory, the kernels of the stage models (design §3's MLP and the
// transformer block of docs/transformer.md), a clock and the waits of the synthetic compute
// mode. CpuBackend implements it on OpenBLAS; a CUDA backend implements the same interface
// on cuBLAS.
//
// All pointers taken by the kernels are device pointers (host memory on CPU): float* for fp32
// tensors (parameters, gradients, optimizer state, LayerNorm statistics) and TensorPtr
// (dtype.hpp) for activations and their gradients, whose dtype is the run's. A caller may
// offset a device pointer inside a buffer it owns, and nothing else: data moves between host
// and device only through copy_to_host()/copy_from_host() and their typed forms. Kernels are
// enqueued in order on one stream; synchronize() waits for them. On CPU every call is synchronous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/device_math.hpp"
#include "runtime/dtype.hpp"
#include "runtime/kinds.hpp"

namespace bb {

class Backend;

// Owning handle to `size()` elements of `dtype()` in device memory; move-only. Freed on
// destruction or reset(). A Buffer must not outlive the Backend that allocated it.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  // The elements of an fp32 buffer (throws std::logic_error for another dtype).
  float* data() const { return ptr().f32(); }
  TensorPtr ptr() const { return {data_, dtype_}; }
  void* raw() const { return data_; }
  Dtype dtype() const { return dtype_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * dtype_size(dtype_); }
  bool empty() const { return data_ == nullptr; }

  void reset() noexcept;

 private:
  friend class Backend;
  Buffer(Backend* owner, void* data, std::size_t count, Dtype dtype)
      : owner_(owner), data_(data), count_(count), dtype_(dtype) {}

  Backend* owner_ = nullptr;
  void* data_ = nullptr;
  std::size_t count_ = 0;
  Dtype dtype_ = Dtype::kF32;
};

// Row-major GEMM operand: as stored, or transposed.
enum Trans : bool { kNoTrans = false, kTrans = true };

// The items of a batched GEMM: item (i, j), i < outer, j < inner, multiplies the operands at
// X + i·outer_x + j·inner_x (elements). Attention runs every sequence (outer) and head (inner)
// of a micro-batch as one batch.
struct GemmBatch {
  int outer = 1, inner = 1;
  std::int64_t outer_a = 0, outer_b = 0, outer_c = 0;
  std::int64_t inner_a = 0, inner_b = 0, inner_c = 0;
  int count() const { return outer * inner; }
};

struct AdamParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
};

// Host staging of device buffers, for a transport that moves host memory only (the MPI
// transport with device memory; design §2.1): the backend, not the transport, knows how to
// get data between its memory and the host. A HostStaging lends host buffers, each named by
// a Ticket, and is used from one thread. Made by Backend::make_host_staging().
//
//   send:    t = stage_send(dev, n)   copies n elements of dev (after the compute enqueued so
//                                     far) into a host buffer;
//            send_ready(t)            that buffer once the copy is complete, else null (never
//                                     blocks): hand it to the network;
//            release(t)               once the network is done with it.
//   receive: t = stage_recv(dev, n);  recv_buffer(t) is a host buffer for the network;
//            deliver(t)               once the data is there: copies it to dev, ordered before
//                                     any compute enqueued afterwards; the buffer is reused.
// Host buffers hold the elements as the device does (n·dtype_size bytes).
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

  virtual Ticket stage_send(ConstTensorPtr device_src, std::size_t count) = 0;
  virtual const void* send_ready(const Ticket& ticket) = 0;
  virtual void release(Ticket& ticket) = 0;

  virtual Ticket stage_recv(TensorPtr device_dst, std::size_t count) = 0;
  virtual void* recv_buffer(const Ticket& ticket) = 0;
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

  virtual std::string_view name() const = 0;  // "cpu", "cuda": name_of(kind())
  virtual BackendKind kind() const = 0;

  // --- Memory -------------------------------------------------------------------------
  // `count` elements of `dtype`, uninitialised. Throws std::bad_alloc when out of memory.
  Buffer allocate(std::size_t count, Dtype dtype = Dtype::kF32);
  // Bytes currently held through Buffers of this backend, and the peak since construction
  // or reset_peak_allocated().
  std::size_t allocated_bytes() const { return allocated_; }
  std::size_t peak_allocated_bytes() const { return peak_allocated_; }
  void reset_peak_allocated() { peak_allocated_ = allocated_; }

  // Copies of `bytes` bytes between device memory and host memory; both wait until the data
  // is there.
  virtual void copy_to_host(const void* device_src, void* host_dst, std::size_t bytes) = 0;
  virtual void copy_from_host(const void* host_src, void* device_dst, std::size_t bytes) = 0;
  // The same in elements of an fp32 tensor.
  void to_host(const float* device_src, float* host_dst, std::size_t count) {
    copy_to_host(device_src, host_dst, count * sizeof(float));
  }
  void from_host(const float* host_src, float* device_dst, std::size_t count) {
    copy_from_host(host_src, device_dst, count * sizeof(float));
  }
  // `count` elements of a tensor of either dtype, as fp32 on the host; and host fp32 values
  // stored into one (rounded to its dtype).
  std::vector<float> download(ConstTensorPtr device_src, std::size_t count);
  void upload(const std::vector<float>& host_src, TensorPtr device_dst);

  // --- Host staging -------------------------------------------------------------------
  // True when device pointers are host memory (CPU): a transport that moves host memory
  // uses them as they are. Otherwise it goes through make_host_staging().
  virtual bool device_is_host() const = 0;
  // A new HostStaging for this backend (CPU: plain host buffers and memcpy; CUDA: pinned
  // buffers and copies on streams of their own). It must not outlive the backend.
  virtual std::unique_ptr<HostStaging> make_host_staging() = 0;

  // Says that p[0, count) holds model parameters: read as GEMM operands, written only through
  // this backend's kernels and copies (never by a transport), until its Buffer is freed. A
  // backend may keep derived copies of such operands (the operand already rounded to bf16 for
  // bf16 GEMMs, refreshed after any write to it). Default: nothing.
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
  // Tensors of either dtype are TensorPtrs: the kernels read them as fp32, compute in fp32
  // and round each result once to the output's dtype (device_math.hpp). Unless a kernel says
  // otherwise, its TensorPtr arguments must share one dtype.
  //
  // C = alpha·op(A)·op(B) + beta·C, row-major; op(A) is m×k, op(B) k×n, C m×n. A bf16 GEMM
  // (any operand bf16, or the backend set to bf16 GEMMs) rounds A and B to bf16 and
  // accumulates the exact products in fp32; otherwise everything is fp32. C is read
  // (beta != 0) and written in its own dtype: fp32 C takes weight gradients of bf16
  // activations.
  virtual void gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha,
                    ConstTensorPtr a, int lda, ConstTensorPtr b, int ldb, float beta, TensorPtr c,
                    int ldc) = 0;
  // Every item of `batch` (GemmBatch) as gemm(); the items' C must not overlap. A and B have one
  // dtype, and C may be bf16 only when they are (std::invalid_argument otherwise).
  virtual void gemm_batched(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha,
                            ConstTensorPtr a, int lda, ConstTensorPtr b, int ldb, float beta,
                            TensorPtr c, int ldc, const GemmBatch& batch) = 0;
  // One level of batch: item i at X + i·stride_x.
  void gemm_strided_batched(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha,
                            ConstTensorPtr a, int lda, std::int64_t stride_a, ConstTensorPtr b,
                            int ldb, std::int64_t stride_b, float beta, TensorPtr c, int ldc,
                            std::int64_t stride_c, int batch) {
    GemmBatch g;
    g.inner = batch;
    g.inner_a = stride_a;
    g.inner_b = stride_b;
    g.inner_c = stride_c;
    gemm_batched(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, g);
  }
  virtual void fill(TensorPtr x, float value, std::size_t count) = 0;
  // dst = src, converting when the dtypes differ (then src and dst must not overlap).
  virtual void copy(ConstTensorPtr src, TensorPtr dst, std::size_t count) = 0;
  // y += alpha·x (fp32: parameters and their gradients)
  virtual void axpy(float alpha, const float* x, float* y, std::size_t count) = 0;
  // a = gelu(z) (exact, erf form). a may alias z.
  virtual void gelu(ConstTensorPtr z, TensorPtr a, std::size_t count) = 0;
  // dz = da ⊙ gelu'(z). dz may alias z or da.
  virtual void gelu_backward(ConstTensorPtr z, ConstTensorPtr da, TensorPtr dz,
                             std::size_t count) = 0;
  // *loss_sum += scale·Σ(y−t)² (one device float), dy = 2·scale·(y−t). dy may alias y.
  virtual void mse_loss(ConstTensorPtr y, ConstTensorPtr target, TensorPtr dy, std::size_t count,
                        float scale, float* loss_sum) = 0;
  // p −= lr·g (fp32)
  virtual void sgd_update(float* p, const float* g, std::size_t count, float lr) = 0;
  // Adam with bias correction (fp32); `step` counts from 1. m and v start at zero.
  virtual void adam_update(float* p, const float* g, float* m, float* v, std::size_t count,
                           const AdamParams& params, std::int64_t step) = 0;
  // x[i] = scale · seeded_uniform_value(seeded_key(seed, stream), i), rounded to x's dtype
  virtual void seeded_uniform(TensorPtr x, std::size_t count, std::uint64_t seed,
                              std::uint64_t stream, float scale) = 0;
  // ids[i] = seeded_token_value(seeded_key(seed, stream), i, vocab): token ids made on the
  // device (no host copy), int32 in [0, vocab).
  virtual void seeded_tokens(std::int32_t* ids, std::size_t count, std::uint64_t seed,
                             std::uint64_t stream, std::int32_t vocab) = 0;

  // --- Kernels of the transformer block (docs/transformer.md) --------------------------
  // Softmax of each row of the dense rows×cols matrix x into y (y may alias x). causal: rows
  // come in cols×cols blocks (query × key of one head) and row r sees only the columns
  // j <= r mod cols; the others get probability 0. rows must then be a multiple of cols.
  virtual void softmax(ConstTensorPtr x, TensorPtr y, int rows, int cols, bool causal) = 0;
  // dx = y ⊙ (dy − rowsum(y ⊙ dy)), the input gradient of softmax from its output y. dx may
  // alias dy. Masked entries (y = 0) get 0.
  virtual void softmax_backward(ConstTensorPtr y, ConstTensorPtr dy, TensorPtr dx, int rows,
                                int cols) = 0;
  // Per row of x (rows×cols): mean, rstd = 1/sqrt(var + eps) (biased variance; fp32), and
  // y = (x − mean)·rstd ⊙ gamma + beta. mean and rstd hold `rows` floats each.
  virtual void layernorm(ConstTensorPtr x, const float* gamma, const float* beta, TensorPtr y,
                         float* mean, float* rstd, int rows, int cols, float eps) = 0;
  // Input gradient of layernorm, ADDED to dx (the residual stream's gradient is there):
  // with x̂ = (x − mean)·rstd and g = dy ⊙ gamma, dx += rstd·(g − mean(g) − x̂·mean(g ⊙ x̂)).
  virtual void layernorm_backward_input(ConstTensorPtr x, const float* gamma, const float* mean,
                                        const float* rstd, ConstTensorPtr dy, TensorPtr dx,
                                        int rows, int cols) = 0;
  // Parameter gradients of layernorm, accumulated: dgamma += Σ_rows dy ⊙ x̂, dbeta += Σ_rows dy.
  virtual void layernorm_backward_params(ConstTensorPtr x, const float* mean, const float* rstd,
                                         ConstTensorPtr dy, float* dgamma, float* dbeta, int rows,
                                         int cols) = 0;
  // y[r][c] += bias[c] for the dense rows×cols matrix y.
  virtual void add_bias(TensorPtr y, const float* bias, int rows, int cols) = 0;
  // out[c] += Σ_r x[r][c] (a bias's gradient, fp32) for the dense rows×cols matrix x.
  virtual void column_sums(ConstTensorPtr x, float* out, int rows, int cols) = 0;

  // --- Kernels of the model's ends (docs/transformer.md, "Model ends") -------------------
  // Token ids are int32 in [0, vocab) (token_ids() of an activation buffer).
  // out[t] = table[ids[t]] + positions[t mod seq] for t in [0, tokens); rows of width cols.
  virtual void embedding(const std::int32_t* ids, const float* table, const float* positions,
                         TensorPtr out, int tokens, int seq, int cols) = 0;
  // Gradients of embedding(), accumulated: dtable[ids[t]] += dout[t], dpositions[t mod seq] +=
  // dout[t]. Deterministic: each row's terms are added in token order.
  virtual void embedding_backward(const std::int32_t* ids, ConstTensorPtr dout, float* dtable,
                                  float* dpositions, int tokens, int seq, int cols) = 0;
  // Per row r of logits (rows×cols): *loss_sum += scale·(logsumexp(row) − row[targets[r]]),
  // dlogits = scale·(softmax(row) − onehot(targets[r])). dlogits may alias logits.
  virtual void cross_entropy(ConstTensorPtr logits, const std::int32_t* targets, TensorPtr dlogits,
                             int rows, int cols, float scale, float* loss_sum) = 0;

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
  virtual void* raw_allocate(std::size_t bytes) = 0;
  virtual void raw_free(void* p, std::size_t bytes) noexcept = 0;

 private:
  friend class Buffer;
  void release(void* p, std::size_t bytes) noexcept;

  std::size_t allocated_ = 0;
  std::size_t peak_allocated_ = 0;
  std::vector<double> marks_;
  double origin_ = 0;
};

// --- Inline definitions (every backend links these; there is no separate source file) ------

inline Buffer::Buffer(Buffer&& other) noexcept
    : owner_(other.owner_), data_(other.data_), count_(other.count_), dtype_(other.dtype_) {
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
    dtype_ = other.dtype_;
    other.owner_ = nullptr;
    other.data_ = nullptr;
    other.count_ = 0;
  }
  return *this;
}

inline void Buffer::reset() noexcept {
  if (data_ != nullptr) owner_->release(data_, (count_ == 0 ? 1 : count_) * dtype_size(dtype_));
  owner_ = nullptr;
  data_ = nullptr;
  count_ = 0;
}

inline Buffer Backend::allocate(std::size_t count, Dtype dtype) {
  const std::size_t bytes = (count == 0 ? 1 : count) * dtype_size(dtype);
  void* p = raw_allocate(bytes);
  allocated_ += bytes;
  if (allocated_ > peak_allocated_) peak_allocated_ = allocated_;
  return Buffer(this, p, count, dtype);
}

inline void Backend::release(void* p, std::size_t bytes) noexcept {
  allocated_ -= bytes;
  raw_free(p, bytes);
}

inline std::vector<float> Backend::download(ConstTensorPtr device_src, std::size_t count) {
  std::vector<float> host(count);
  if (count == 0) return host;
  if (device_src.dtype() == Dtype::kF32) {
    copy_to_host(device_src.get(), host.data(), count * sizeof(float));
    return host;
  }
  std::vector<bf16> raw(count);
  copy_to_host(device_src.get(), raw.data(), count * sizeof(bf16));
  for (std::size_t i = 0; i < count; ++i) host[i] = math::bf16_value(raw[i]);
  return host;
}

inline void Backend::upload(const std::vector<float>& host_src, TensorPtr device_dst) {
  if (host_src.empty()) return;
  if (device_dst.dtype() == Dtype::kF32) {
    copy_from_host(host_src.data(), device_dst.get(), host_src.size() * sizeof(float));
    return;
  }
  std::vector<bf16> raw(host_src.size());
  for (std::size_t i = 0; i < raw.size(); ++i) raw[i] = bf16{math::bf16_bits(host_src[i])};
  copy_from_host(raw.data(), device_dst.get(), raw.size() * sizeof(bf16));
}

}  // namespace bb
