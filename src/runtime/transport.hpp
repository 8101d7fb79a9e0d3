// Transport: moves activations (forward) and activation gradients (backward) between the
// ranks of a pipeline. The executor drives it from a rank's lowered action list (design §1):
// RECV_* posts irecv() at its position in the list, SEND_* posts isend() right after the
// producing compute, and the compute that consumes a receive polls test() until it is done.
//
// Implementations: MpiTransport (runtime/mpi_transport.hpp, host memory) and an NCCL transport
// (runtime/cuda/, device memory, made by bb::cuda::make_nccl_transport).
//
// Contract:
// - Buffers are device pointers of the Backend the transport was made for (host memory on
//   CPU), typed (TensorPtr): a message moves `count` elements of the buffer's dtype, so a bf16
//   activation travels in half the bytes of an fp32 one. A send buffer must not be written,
//   and a receive buffer not read, until test() on its request has returned true (or, for a
//   receive, consume() has taken it).
// - isend() is posted after the compute that produced its data has been enqueued on the
//   backend's compute stream; the transport orders the send after that work (CPU: it is
//   already done; CUDA: an event on the compute stream). Once test() on a receive returns
//   true, or consume() has taken it, compute enqueued afterwards may read the buffer.
// - consume() lets a transport whose receives complete on the device (NCCL) order the
//   consuming compute after the receive without the host waiting for it; a transport that
//   cannot (MPI) says so and the caller polls test(). test() never makes the compute wait:
//   polling a receive early must not stall unrelated compute.
// - Messages between one pair of ranks are matched in posting order (NCCL semantics; MPI
//   also matches by tag). bb::lower orders every rank's SEND/RECV so that this cannot
//   deadlock even when each operation blocks until its peer posts the match.
// - test() never blocks and makes progress on everything posted. Callers wait by polling
//   test() with a backoff (runtime/wait.hpp), never inside the transport: MPICH busy-polls,
//   and several ranks may share one core.
// - group_begin()/group_end() bracket operations that may be launched together (NCCL:
//   ncclGroupStart/End; MPI: no-op). Operations posted inside a group may not complete before
//   group_end(). Groups do not nest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/dtype.hpp"

namespace bb {

// Handle of a posted operation. Default-constructed: no operation (test() returns true).
struct Request {
  std::int64_t id = -1;
  std::int64_t timing = -1;  // the operation's device-timing token (see op_seconds), or -1
  bool valid() const { return id >= 0; }
};

// What a message carries.
enum class Direction : std::uint8_t {
  kForward = 0,   // chunk c's output activation of a micro-batch, to chunk c+1
  kBackward = 1,  // chunk c's input gradient of a micro-batch, to chunk c-1
};

// Tag of a message: identifies (direction, sending chunk, micro-batch). Both ends compute it
// from the lowered action (SEND_F c m pairs with RECV_F c+1 m: tag of (kForward, c, m);
// SEND_B c m pairs with RECV_B c-1 m: tag of (kBackward, c, m)). Tags only need to be
// unique among messages in flight between one pair of ranks; values wrap at `tag_limit`
// (MPI_TAG_UB + 1), which stays correct because matching is in posting order.
constexpr int message_tag(Direction dir, int sending_chunk, int mb, int num_chunks,
                          std::int64_t tag_limit = 32768) {
  const std::int64_t t =
      (static_cast<std::int64_t>(mb) * num_chunks + sending_chunk) * 2 + static_cast<int>(dir);
  return static_cast<int>(t % tag_limit);
}

class Transport {
 public:
  virtual ~Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  virtual std::string_view name() const = 0;  // "mpi", "nccl"
  // This rank and the number of pipeline ranks.
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Non-blocking point-to-point operations on `count` elements of the buffer's dtype.
  virtual Request isend(ConstTensorPtr buf, std::size_t count, int peer, int tag) = 0;
  virtual Request irecv(TensorPtr buf, std::size_t count, int peer, int tag) = 0;
  // True when the operation is complete (then the request is released and reset); false
  // otherwise. Never blocks. Throws std::runtime_error when the operation failed.
  virtual bool test(Request& request) = 0;
  // A posted receive about to be read by compute: when the transport can make the compute
  // enqueued from now on wait for it on the device, it does so, releases the request and
  // returns true (the host does not wait). Otherwise returns false: poll test(). Default:
  // false.
  virtual bool consume(Request& request) {
    (void)request;
    return false;
  }
  // Throws std::runtime_error when the transport has failed asynchronously (NCCL's
  // asynchronous errors), for callers that wait on something else (the device) meanwhile.
  virtual void check_errors() {}

  // Memory the transport holds beside the backend's allocator: device bytes (NCCL: its buffers
  // and connections, measured with cudaMemGetInfo around its setup) and pinned host bytes (the
  // MPI transport's host staging of device memory). Default: 0.
  virtual std::size_t device_bytes() const { return 0; }
  virtual std::size_t pinned_host_bytes() const { return 0; }

  // Device-clock timing of operations (NCCL: CUDA events around each operation on its
  // stream). Between begin_timing(true) and the next begin_timing(), a transport that times
  // on the device gives each posted operation a token (Request::timing); once the device has
  // finished (Backend::synchronize()), op_seconds(token, ...) gives the operation's start and
  // end in seconds since the backend's mark origin (Backend::begin_marks()) and returns true.
  // Default: no device timing (tokens stay -1, op_seconds returns false).
  virtual void begin_timing(bool on) { (void)on; }
  virtual bool op_seconds(std::int64_t token, double* start, double* end) {
    (void)token, (void)start, (void)end;
    return false;
  }

  // Optional batching of posts (NCCL groups). No-ops by default.
  virtual void group_begin() {}
  virtual void group_end() {}

 protected:
  Transport() = default;
};

}  // namespace bb
