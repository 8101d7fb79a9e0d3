// Pinned-host staging of device buffers: the CUDA backend's bb::HostStaging
// (runtime/backend.hpp), made by CudaBackend::make_host_staging() for a transport that moves
// host memory (the MPI transport). Plain C++ header; defined only with BB_HAVE_CUDA.
//
// How the MPI transport uses a HostStaging (runtime/mpi_transport.cpp):
//
//   isend(dev, n, peer, tag):  t = staging.stage_send(dev, n);          // D2H enqueued
//       state "staging"; the MPI_Isend is posted later, from any test():
//   progress (every test(), for every staged send):
//       if (const float* host = staging.send_ready(t)) MPI_Isend(host, n, MPI_FLOAT, ...);
//   test(send):  ... once its MPI_Isend has completed: staging.release(t); return true.
//
//   irecv(dev, n, peer, tag):  t = staging.stage_recv(dev, n);
//       MPI_Irecv(staging.recv_buffer(t), n, MPI_FLOAT, peer, tag, ...);
//   progress (every test(), for every staged receive): once MPI_Test says done,
//       staging.deliver(t) (deliver enqueues the H2D copy and makes the compute stream wait
//       for it, so compute enqueued afterwards reads the data; the pinned buffer is recycled
//       by itself); test(recv) is true once its receive is delivered.
//
// Posting a send's MPI_Isend only once its copy has finished changes the order of posts but
// not the matching (MPI matches by tag), and test() must advance every staged send, not only
// the one it was asked about, so that no rank waits on a send that nobody posts.
//
// Ordering: stage_send copies after everything enqueued so far on the compute stream (the
// producer); a receive's copy waits for what was enqueued when stage_recv was called (earlier
// readers of the destination), not for compute enqueued since. The copies run on two copy
// streams of their own, so they overlap compute.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/backend.hpp"

namespace bb::cuda {

class PinnedStaging final : public HostStaging {
 public:
  // `backend` must be a CudaBackend (std::invalid_argument otherwise) and outlive this.
  explicit PinnedStaging(Backend& backend);
  ~PinnedStaging() override;

  // --- Send side ----------------------------------------------------------------------
  // Enqueues the device→pinned copy of `count` elements.
  Ticket stage_send(ConstTensorPtr device_src, std::size_t count) override;
  // The pinned copy once it is complete (pass it to MPI_Isend), null while it is not. Never
  // blocks.
  const void* send_ready(const Ticket& ticket) override;
  // Gives the pinned buffer back (after the MPI send has completed) and resets the ticket.
  void release(Ticket& ticket) override;

  // --- Receive side -------------------------------------------------------------------
  // A pinned buffer of `count` elements to receive into; the data goes to `device_dst`.
  Ticket stage_recv(TensorPtr device_dst, std::size_t count) override;
  void* recv_buffer(const Ticket& ticket) override;
  // After the MPI receive has completed: enqueues the pinned→device copy, makes the compute
  // stream wait for it, and resets the ticket (the pinned buffer is recycled once the copy is
  // done).
  void deliver(Ticket& ticket) override;

  // Pinned bytes held (in use or cached) and in use.
  std::size_t held_bytes() const override;
  std::size_t in_use_bytes() const override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace bb::cuda
