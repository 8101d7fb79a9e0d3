// NCCL implementation of bb::Transport (runtime/transport.hpp) for the CUDA backend.
//
// One NCCL communicator spans the MPI communicator given (the pipeline group). Rank 0 makes
// the unique id and broadcasts it with MPI_Ibcast + an MPI_Test/backoff loop (never a blocking
// MPI call). The communicator is non-blocking (ncclConfig_t::blocking = 0): its setup, and
// any call that returns ncclInProgress, is polled with ncclCommGetAsyncError under the
// options' deadline, so a peer that never arrives fails the setup instead of hanging it.
// Every isend/irecv becomes an ncclSend/ncclRecv (ncclFloat or ncclBfloat16 by the buffer's
// dtype) on one dedicated communication stream, in exactly the order the executor posts them
// (bb::lower made that order deadlock-free), so no tags are needed; `tag` is ignored.
//
// Ordering with the backend's compute stream (all through CUDA events, the host never waits):
// - isend: the comm stream waits for everything enqueued so far on the compute stream (the
//   producer of the data), then sends. test() is true once the send has finished on the
//   device; only then may the buffer be overwritten (transport contract).
// - irecv: the comm stream also waits for the compute stream's work enqueued so far (it may
//   still read the buffer's previous contents), then receives.
//   test() returns true once the operation has finished on the device (a host query, never a
//   wait): polling a receive early does not make the compute stream wait for it.
//   RecvWait::kDevice (default): consume() of a launched receive makes the compute stream wait
//   for its completion event (cudaStreamWaitEvent) and returns true: compute enqueued
//   afterwards runs when the data is there, and the host runs ahead. The waiting then happens
//   on the GPU, where the executor's marks measure it. RecvWait::kHost: consume() returns
//   false, and the executor polls test() on the host.
// - Asynchronous NCCL errors (ncclCommGetAsyncError) are checked by test() and check_errors().
// - Timing (begin_timing(true)): events before and after each operation on the comm stream;
//   op_seconds() reads them against the backend's mark origin.
// - group_begin()/group_end() map to ncclGroupStart/End; operations posted inside a group are
//   launched (and can complete) only at group_end().
// NCCL needs one rank per GPU: the constructor checks that no two ranks share a device and
// throws bb::ConfigError (exit code 2) if they do — use the MPI transport then.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "runtime/backend.hpp"
#include "runtime/transport.hpp"

namespace bb::cuda {

struct NcclTransportOptions {
  enum class RecvWait { kDevice, kHost };
  RecvWait recv_wait = RecvWait::kDevice;
  // Connections set up in the constructor with a one-float exchange in one NCCL group, so
  // that no lazy connection setup happens inside a timed step: ring neighbours r±1 mod P
  // (every generated schedule's activations and gradients) and the mirror rank P-1-r
  // (DualPipe's partner gradients before the optimizer), or every pair when true.
  bool connect_all_peers = false;
  // Deadline of the setup (the id's broadcast, the communicator, the connections) and of any
  // NCCL call that reports ncclInProgress: past it the transport throws instead of waiting.
  double timeout_s = 600;
};

// True when this build has NCCL (BB_HAVE_NCCL).
bool nccl_available();
// "2.28.9", or "none" without NCCL.
std::string nccl_version_string();

// Collective over `comm` (every rank calls it). `backend` must be a CudaBackend (throws
// std::invalid_argument otherwise); both must outlive the transport. Without NCCL in the
// build it throws bb::ConfigError.
std::unique_ptr<Transport> make_nccl_transport(MPI_Comm comm, Backend& backend,
                                               const NcclTransportOptions& options = {});

}  // namespace bb::cuda
