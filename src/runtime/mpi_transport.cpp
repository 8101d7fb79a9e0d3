#include "runtime/mpi_transport.hpp"

#include <climits>
#include <string>

#include "runtime/mpi_util.hpp"

#if defined(BB_HAVE_CUDA)
#include "runtime/cuda/cuda_backend.hpp"
#include "runtime/cuda/host_staging.hpp"
#endif

namespace bb {

#if !defined(BB_HAVE_CUDA)
namespace cuda {
// Never instantiated without CUDA: a complete type for the unique_ptr's deleter.
class HostStaging {};
}  // namespace cuda
#endif

namespace {

int message_count(std::size_t count, int peer) {
  if (count > static_cast<std::size_t>(INT_MAX))
    throw mpi::MpiError("mpi transport: message of " + std::to_string(count) +
                        " floats to/from rank " + std::to_string(peer) +
                        " exceeds MPI's int count");
  return static_cast<int>(count);
}

}  // namespace

MpiTransport::MpiTransport(MPI_Comm comm, Backend* backend) : comm_(comm) {
  rank_ = mpi::rank(comm);
  size_ = mpi::size(comm);
#if defined(BB_HAVE_CUDA)
  if (backend != nullptr && cuda::as_cuda(*backend) != nullptr)
    staging_ = std::make_unique<cuda::HostStaging>(*backend);
#else
  (void)backend;
#endif
}

MpiTransport::~MpiTransport() {
  // Outstanding operations at destruction only happen on an error path: cancel and free
  // them so that MPI_Finalize is not left waiting.
  for (Slot& s : slots_) {
    if (s.request == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&s.request);
    MPI_Request_free(&s.request);
  }
}

Request MpiTransport::hold(const Slot& slot) {
  std::int64_t id;
  if (free_.empty()) {
    id = static_cast<std::int64_t>(slots_.size());
    slots_.push_back(slot);
  } else {
    id = free_.back();
    free_.pop_back();
    slots_[static_cast<std::size_t>(id)] = slot;
  }
  return Request{id};
}

Request MpiTransport::isend(const float* buf, std::size_t count, int peer, int tag) {
  Slot s;
  s.send = true;
  s.count = message_count(count, peer);
  s.peer = peer;
  s.tag = tag;
#if defined(BB_HAVE_CUDA)
  if (staging_) {
    s.ticket = staging_->stage_send(buf, count).id;
    s.waiting_copy = true;
    const Request r = hold(s);
    staged_.push_back(r.id);
    post_staged_sends();
    return r;
  }
#endif
  BB_CHECK_MPI(MPI_Isend(buf, s.count, MPI_FLOAT, peer, tag, comm_, &s.request));
  return hold(s);
}

Request MpiTransport::irecv(float* buf, std::size_t count, int peer, int tag) {
  Slot s;
  s.count = message_count(count, peer);
  s.peer = peer;
  s.tag = tag;
  float* dst = buf;
#if defined(BB_HAVE_CUDA)
  if (staging_) {
    const cuda::HostStaging::Ticket t = staging_->stage_recv(buf, count);
    s.ticket = t.id;
    dst = staging_->recv_buffer(t);
  }
#endif
  BB_CHECK_MPI(MPI_Irecv(dst, s.count, MPI_FLOAT, peer, tag, comm_, &s.request));
  return hold(s);
}

void MpiTransport::post_staged_sends() {
#if defined(BB_HAVE_CUDA)
  while (!staged_.empty()) {
    Slot& s = slots_[static_cast<std::size_t>(staged_.front())];
    const float* host = staging_->send_ready(cuda::HostStaging::Ticket{s.ticket});
    if (host == nullptr) return;
    BB_CHECK_MPI(MPI_Isend(host, s.count, MPI_FLOAT, s.peer, s.tag, comm_, &s.request));
    s.waiting_copy = false;
    staged_.pop_front();
  }
#endif
}

bool MpiTransport::test(Request& request) {
  if (!staged_.empty()) post_staged_sends();
  if (!request.valid()) return true;
  Slot& s = slots_.at(static_cast<std::size_t>(request.id));
  if (s.waiting_copy) return false;
  int done = 0;
  BB_CHECK_MPI(MPI_Test(&s.request, &done, MPI_STATUS_IGNORE));
  if (!done) return false;
#if defined(BB_HAVE_CUDA)
  if (s.ticket >= 0) {
    cuda::HostStaging::Ticket t{s.ticket};
    if (s.send)
      staging_->release(t);
    else
      staging_->deliver(t);
  }
#endif
  s = Slot{};
  free_.push_back(request.id);
  request = Request{};
  return true;
}

}  // namespace bb
