// NCCL implementation of bb::Transport (runtime/transport.hpp) for the CUDA backend.
//
// One NCCL communicator spans the MPI communicator given (the pipeline group). Rank 0 makes
// the unique id and broadcasts it with MPI_Ibcast + an MPI_Test/backoff loop (never a blocking
// MPI call). Every isend/irecv becomes an ncclSend/ncclRecv on one dedicated communication
// stream, in exactly the order the executor posts them (bb::lower made that order
// deadlock-free), so no tags are needed; `tag` is ignored.
//
// Ordering with the backend's compute stream (all through CUDA events, the host never waits):
// - isend: the comm stream waits for everything enqueued so far on the compute stream (the
//   producer of the data), then sends. test() is true once the send has finished on the
//   device; only then may the buffer be overwritten (transport contract).
// - irecv: the comm stream also waits for the compute stream's work enqueued so far (it may
//   still read the buffer's previous contents), then receives.
//   RecvWait::kDevice (default): test() on a receive returns true as soon as the receive has
//   been launched, after making the compute stream wait for its completion event
//   (cudaStreamWaitEvent): compute enqueued afterwards runs when the data is there, and the
//   host runs ahead. The waiting then happens on the GPU: an executor that records mark()
//   before polling test() and mark() after it measures it either way.
//   RecvWait::kHost: test() returns true once the receive has finished on the device.
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
  // (every generated schedule talks only to those), or every pair when true.
  bool connect_all_peers = false;
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
