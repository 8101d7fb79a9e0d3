#include "runtime/cuda/nccl_transport.hpp"

#include <stdexcept>

#include "common/error.hpp"

#ifdef BB_HAVE_NCCL

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/cuda/check.hpp"
#include "runtime/cuda/cuda_backend.hpp"

namespace bb::cuda {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// An MPI call's error as an exception naming the call (the plugin does not link the main
// binary's mpi_util).
void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(std::string("NCCL transport: ") + what + " failed: " + text);
}

// Polls `done` with a growing sleep (machine notes: never block inside MPICH, which
// busy-polls) until it returns true or the deadline passes (then throws, naming `what`).
template <class Done>
void poll_until(Clock::time_point deadline, const char* what, Done&& done) {
  auto nap = std::chrono::microseconds(2);
  while (!done()) {
    if (Clock::now() > deadline)
      throw std::runtime_error(std::string("NCCL transport: timed out waiting for ") + what);
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(500));
  }
}

void wait_mpi(MPI_Request& request, Clock::time_point deadline, const char* what) {
  poll_until(deadline, what, [&] {
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
    return done != 0;
  });
}

// The communicator's state once no call is in progress any more (non-blocking communicator).
void settle(ncclComm_t comm, ncclResult_t r, Clock::time_point deadline, const char* what) {
  if (r != ncclInProgress) {
    BB_CHECK_NCCL(r);
    return;
  }
  poll_until(deadline, what, [&] {
    ncclResult_t state = ncclSuccess;
    BB_CHECK_NCCL(ncclCommGetAsyncError(comm, &state));
    if (state == ncclInProgress) return false;
    BB_CHECK_NCCL(state);
    return true;
  });
}

// ncclCommFinalize (the communicator's outstanding work and its proxy's, with the peers) polled
// under the deadline, never throwing (called from the destructor): true when it finished
// cleanly, false on an error or past the deadline (the caller then aborts instead of destroying).
bool finalize(ncclComm_t comm, Clock::time_point deadline) noexcept {
  const ncclResult_t r = ncclCommFinalize(comm);
  if (r != ncclInProgress) return r == ncclSuccess;
  auto nap = std::chrono::microseconds(2);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return false;
    if (state != ncclInProgress) return state == ncclSuccess;
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(500));
  }
}

ncclDataType_t nccl_type(Dtype d) {
  return d == Dtype::kBF16 ? ncclBfloat16 : ncclFloat;
}

class NcclTransport final : public Transport {
 public:
  NcclTransport(MPI_Comm comm, CudaBackend& backend, const NcclTransportOptions& options)
      : backend_(&backend), options_(options) {
    check_mpi(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm, &size_), "MPI_Comm_size");
    BB_CHECK_CUDA(cudaSetDevice(backend.device()));
    const Clock::time_point deadline = deadline_after(options.timeout_s);
    check_one_rank_per_gpu(comm, deadline);

    // Rank 0 makes the id; a failure there is broadcast too, so no rank waits forever.
    struct {
      int ok = 0;
      char error[240] = {};
      ncclUniqueId id{};
    } blob;
    if (rank_ == 0) {
      const ncclResult_t r = ncclGetUniqueId(&blob.id);
      blob.ok = r == ncclSuccess ? 1 : 0;
      if (r != ncclSuccess)
        std::snprintf(blob.error, sizeof blob.error, "%s", ncclGetErrorString(r));
    }
    MPI_Request request;
    check_mpi(MPI_Ibcast(&blob, static_cast<int>(sizeof blob), MPI_BYTE, 0, comm, &request),
              "MPI_Ibcast of the NCCL unique id");
    wait_mpi(request, deadline, "MPI_Ibcast of the NCCL unique id");
    if (blob.ok == 0)
      throw CudaError(std::string("NCCL transport: ncclGetUniqueId failed on rank 0: ") +
                      blob.error);

    const std::size_t used_before = used_device_bytes();
    try {
      int least = 0, greatest = 0;
      BB_CHECK_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
      BB_CHECK_CUDA(cudaStreamCreateWithPriority(&comm_stream_, cudaStreamNonBlocking, greatest));
      BB_CHECK_CUDA(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;  // setup polled under the deadline (settle)
      const ncclResult_t r = ncclCommInitRankConfig(&comm_, size_, blob.id, rank_, &config);
      if (comm_ == nullptr) BB_CHECK_NCCL(r);
      settle(comm_, r, deadline, "ncclCommInitRankConfig (a peer that never joined?)");
      connect_peers(deadline);
      const std::size_t used_after = used_device_bytes();
      device_bytes_ = used_after > used_before ? used_after - used_before : 0;
    } catch (...) {
      cleanup();
      throw;
    }
  }

  ~NcclTransport() override { cleanup(); }

  void cleanup() noexcept {
    (void)cudaSetDevice(backend_->device());
    if (comm_ != nullptr) {
      // Finalize then destroy when idle, under the deadline; abort (local, never waits for
      // peers) rather than risk a hang when something is still in flight, an exception is
      // unwinding (a timeout, a failed peer) or the finalize failed or ran past the deadline.
      const bool idle = ops_.empty() && cudaStreamQuery(comm_stream_) == cudaSuccess;
      if (idle && std::uncaught_exceptions() == 0 &&
          finalize(comm_, deadline_after(options_.timeout_s)))
        (void)ncclCommDestroy(comm_);
      else
        (void)ncclCommAbort(comm_);
    }
    for (auto& [id, op] : ops_)
      if (op.done != nullptr) free_events_.push_back(op.done);
    for (cudaEvent_t e : free_events_) (void)cudaEventDestroy(e);
    for (cudaEvent_t e : timing_events_) (void)cudaEventDestroy(e);
    if (ready_ != nullptr) (void)cudaEventDestroy(ready_);
    if (comm_stream_ != nullptr) (void)cudaStreamDestroy(comm_stream_);
    if (scratch_ != nullptr) (void)cudaFree(scratch_);
    (void)cudaGetLastError();
    comm_ = nullptr;
    comm_stream_ = nullptr;
    ready_ = nullptr;
    scratch_ = nullptr;
    free_events_.clear();
    timing_events_.clear();
    ops_.clear();
  }

  std::string_view name() const override { return "nccl"; }
  std::size_t device_bytes() const override { return device_bytes_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Request isend(ConstTensorPtr buf, std::size_t count, int peer, int /*tag*/) override {
    check_peer(peer);
    return post(false, const_cast<void*>(buf.get()), count, buf.dtype(), peer);
  }

  Request irecv(TensorPtr buf, std::size_t count, int peer, int /*tag*/) override {
    check_peer(peer);
    return post(true, buf.get(), count, buf.dtype(), peer);
  }

  // Host query only: the compute stream never waits here (consume() does that).
  bool test(Request& request) override {
    if (!request.valid()) return true;
    Op& op = find(request);
    if (!op.launched) return false;  // inside a group that has not ended
    const cudaError_t e = cudaEventQuery(op.done);
    if (e == cudaErrorNotReady) {
      check_errors();
      return false;
    }
    BB_CHECK_CUDA(e);
    finish(request);
    return true;
  }

  bool consume(Request& request) override {
    if (!request.valid()) return true;
    if (options_.recv_wait != NcclTransportOptions::RecvWait::kDevice) return false;
    Op& op = find(request);
    if (!op.recv || !op.launched) return false;
    BB_CHECK_CUDA(cudaSetDevice(backend_->device()));
    BB_CHECK_CUDA(cudaStreamWaitEvent(backend_->stream(), op.done, 0));
    finish(request);
    return true;
  }

  void check_errors() override {
    if (comm_ == nullptr) return;
    ncclResult_t async = ncclSuccess;
    BB_CHECK_NCCL(ncclCommGetAsyncError(comm_, &async));
    if (async != ncclInProgress) BB_CHECK_NCCL(async);
  }

  void group_begin() override {
    if (in_group_) throw std::logic_error("NCCL transport: groups do not nest");
    BB_CHECK_NCCL(ncclGroupStart());
    in_group_ = true;
  }

  void group_end() override {
    if (!in_group_) throw std::logic_error("NCCL transport: group_end() without group_begin()");
    in_group_ = false;
    settle(comm_, ncclGroupEnd(), deadline_after(options_.timeout_s), "ncclGroupEnd");
    for (const std::int64_t id : group_ops_) launched(ops_.at(id));
    group_ops_.clear();
  }

  void begin_timing(bool on) override {
    timing_ = on;
    timings_.clear();
    used_timing_events_ = 0;
  }

  bool op_seconds(std::int64_t token, double* start, double* end) override {
    if (token < 0 || static_cast<std::size_t>(token) >= timings_.size()) return false;
    const auto& [a, b] = timings_[static_cast<std::size_t>(token)];
    if (b == nullptr) return false;  // inside a group: launched together, not timed alone
    *start = backend_->seconds_since_origin(a);
    *end = backend_->seconds_since_origin(b);
    return true;
  }

 private:
  struct Op {
    bool recv = false;
    bool launched = false;
    cudaEvent_t done = nullptr;  // recorded on the comm stream after the operation
  };

  Op& find(const Request& request) {
    const auto it = ops_.find(request.id);
    if (it == ops_.end()) throw std::logic_error("NCCL transport: an unknown request");
    return it->second;
  }

  void finish(Request& request) {
    const auto it = ops_.find(request.id);
    free_events_.push_back(it->second.done);
    ops_.erase(it);
    request = Request{};
  }

  void check_peer(int peer) const {
    if (peer < 0 || peer >= size_ || peer == rank_)
      throw std::invalid_argument("NCCL transport: bad peer " + std::to_string(peer));
  }

  // Host name and PCI bus id of every rank's device: two ranks on one GPU cannot share an
  // NCCL communicator.
  void check_one_rank_per_gpu(MPI_Comm comm, Clock::time_point deadline) const {
    constexpr int kLen = 256;
    std::vector<char> mine(kLen, '\0'), all(static_cast<std::size_t>(kLen) * size_, '\0');
    char host[128] = {};
    gethostname(host, sizeof host - 1);
    char bus[64] = {};
    BB_CHECK_CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, backend_->device()));
    std::snprintf(mine.data(), kLen, "%s %s", host, bus);
    MPI_Request request;
    check_mpi(
        MPI_Iallgather(mine.data(), kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, comm, &request),
        "MPI_Iallgather of the devices");
    wait_mpi(request, deadline, "MPI_Iallgather of the devices");
    for (int a = 0; a < size_; ++a)
      for (int b = a + 1; b < size_; ++b)
        if (std::strncmp(&all[static_cast<std::size_t>(a) * kLen],
                         &all[static_cast<std::size_t>(b) * kLen], kLen) == 0)
          throw ConfigError("--transport nccl needs one rank per GPU, but ranks " +
                            std::to_string(a) + " and " + std::to_string(b) + " share " +
                            std::string(&all[static_cast<std::size_t>(a) * kLen]) +
                            "; use --transport mpi");
  }

  // One float to and from each peer in a single group: NCCL sets the connections up now, not
  // inside the first step. The peers: the ring neighbours (every schedule's activations and
  // gradients) and the mirror rank size-1-rank (DualPipe's partner gradients); all of them with
  // connect_all_peers. Each relation is symmetric, so both ends post the pair.
  void connect_peers(Clock::time_point deadline) {
    std::set<int> peers;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      const bool neighbour = p == (rank_ + 1) % size_ || p == (rank_ + size_ - 1) % size_;
      const bool mirror = p == size_ - 1 - rank_;
      if (options_.connect_all_peers || neighbour || mirror) peers.insert(p);
    }
    if (peers.empty()) return;
    BB_CHECK_CUDA(cudaMalloc(&scratch_, 2 * peers.size() * sizeof(float)));
    BB_CHECK_CUDA(cudaMemsetAsync(scratch_, 0, 2 * peers.size() * sizeof(float), comm_stream_));
    BB_CHECK_NCCL(ncclGroupStart());
    std::size_t i = 0;
    for (const int p : peers) {
      const ncclResult_t s = ncclSend(scratch_ + 2 * i, 1, ncclFloat, p, comm_, comm_stream_);
      if (s != ncclInProgress) BB_CHECK_NCCL(s);
      const ncclResult_t r = ncclRecv(scratch_ + 2 * i + 1, 1, ncclFloat, p, comm_, comm_stream_);
      if (r != ncclInProgress) BB_CHECK_NCCL(r);
      ++i;
    }
    settle(comm_, ncclGroupEnd(), deadline, "the connection setup (ncclGroupEnd)");
    cudaEvent_t done = take_event();
    BB_CHECK_CUDA(cudaEventRecord(done, comm_stream_));
    poll_until(deadline, "the connection setup (a peer that never connected?)", [&] {
      const cudaError_t e = cudaEventQuery(done);
      if (e == cudaSuccess) return true;
      if (e != cudaErrorNotReady) BB_CHECK_CUDA(e);
      check_errors();
      return false;
    });
    free_events_.push_back(done);
  }

  cudaEvent_t take_event() {
    if (free_events_.empty()) {
      cudaEvent_t e = nullptr;
      BB_CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      return e;
    }
    cudaEvent_t e = free_events_.back();
    free_events_.pop_back();
    return e;
  }

  // A timing event (reused from the previous begin_timing on; the step has synchronised).
  cudaEvent_t timing_event() {
    if (used_timing_events_ == timing_events_.size()) {
      cudaEvent_t e = nullptr;
      BB_CHECK_CUDA(cudaEventCreate(&e));
      timing_events_.push_back(e);
    }
    return timing_events_[used_timing_events_++];
  }

  void launched(Op& op) {
    op.done = take_event();
    BB_CHECK_CUDA(cudaEventRecord(op.done, comm_stream_));
    op.launched = true;
  }

  Request post(bool recv, void* buf, std::size_t count, Dtype dtype, int peer) {
    BB_CHECK_CUDA(cudaSetDevice(backend_->device()));
    // Send: after its producer. Receive: after earlier readers of the buffer.
    BB_CHECK_CUDA(cudaEventRecord(ready_, backend_->stream()));
    BB_CHECK_CUDA(cudaStreamWaitEvent(comm_stream_, ready_, 0));
    Request request;
    cudaEvent_t started = nullptr;
    if (timing_ && !in_group_) {
      started = timing_event();
      BB_CHECK_CUDA(cudaEventRecord(started, comm_stream_));
    }
    const ncclResult_t r = recv ? ncclRecv(buf, count, nccl_type(dtype), peer, comm_, comm_stream_)
                                : ncclSend(buf, count, nccl_type(dtype), peer, comm_, comm_stream_);
    if (in_group_) {
      if (r != ncclInProgress) BB_CHECK_NCCL(r);
    } else {
      settle(comm_, r, deadline_after(options_.timeout_s), recv ? "ncclRecv" : "ncclSend");
    }
    if (started != nullptr) {
      cudaEvent_t ended = timing_event();
      BB_CHECK_CUDA(cudaEventRecord(ended, comm_stream_));
      request.timing = static_cast<std::int64_t>(timings_.size());
      timings_.emplace_back(started, ended);
    }
    const std::int64_t id = next_id_++;
    Op& op = ops_[id];
    op.recv = recv;
    if (in_group_)
      group_ops_.push_back(id);
    else
      launched(op);
    request.id = id;
    return request;
  }

  // (total − free) of the device now (0 when unknown).
  static std::size_t used_device_bytes() {
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return total - free;
  }

  CudaBackend* backend_;
  NcclTransportOptions options_;
  std::size_t device_bytes_ = 0;  // what the communicator's setup took on the device
  int rank_ = 0, size_ = 1;
  ncclComm_t comm_ = nullptr;
  cudaStream_t comm_stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  float* scratch_ = nullptr;
  std::unordered_map<std::int64_t, Op> ops_;
  std::vector<std::int64_t> group_ops_;
  std::vector<cudaEvent_t> free_events_;
  std::int64_t next_id_ = 0;
  bool in_group_ = false;
  bool timing_ = false;
  std::vector<cudaEvent_t> timing_events_;  // with timing enabled; reused every step
  std::size_t used_timing_events_ = 0;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> timings_;  // by token: start, end
};

}  // namespace

bool nccl_available() {
  return true;
}

std::string nccl_version_string() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess || v <= 0) return "unknown";
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}

std::unique_ptr<Transport> make_nccl_transport(MPI_Comm comm, Backend& backend,
                                               const NcclTransportOptions& options) {
  CudaBackend* cuda = as_cuda(backend);
  if (cuda == nullptr)
    throw std::invalid_argument("--transport nccl needs --backend cuda (got backend " +
                                std::string(backend.name()) + ")");
  return std::make_unique<NcclTransport>(comm, *cuda, options);
}

}  // namespace bb::cuda

#else  // !BB_HAVE_NCCL

namespace bb::cuda {

bool nccl_available() {
  return false;
}
std::string nccl_version_string() {
  return "none";
}

std::unique_ptr<Transport> make_nccl_transport(MPI_Comm, Backend&, const NcclTransportOptions&) {
  throw ConfigError("--transport nccl: this bubblebench was built without NCCL");
}

}  // namespace bb::cuda

#endif
