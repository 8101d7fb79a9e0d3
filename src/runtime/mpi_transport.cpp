#include "runtime/mpi_transport.hpp"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/mpi_util.hpp"

namespace bb {

namespace {

int message_count(std::size_t count, int peer) {
  if (count > static_cast<std::size_t>(INT_MAX))
    throw mpi::MpiError("mpi transport: message of " + std::to_string(count) +
                        " elements to/from rank " + std::to_string(peer) +
                        " exceeds MPI's int count");
  return static_cast<int>(count);
}

MPI_Datatype mpi_type(Dtype dtype) {
  return dtype == Dtype::kBF16 ? MPI_UINT16_T : MPI_FLOAT;
}

}  // namespace

MpiTransport::MpiTransport(MPI_Comm comm, Backend* backend, bool stage_always) : comm_(comm) {
  rank_ = mpi::rank(comm);
  size_ = mpi::size(comm);
  const char* env = std::getenv("BB_HOST_STAGING");
  const bool from_env = env != nullptr && std::string(env) == "always";
  device_is_host_ = backend == nullptr || backend->device_is_host();
  if (backend == nullptr || (!stage_always && !from_env && backend->device_is_host())) return;
  staging_ = backend->make_host_staging();
  if (from_env && backend->device_is_host())  // a testing knob left on should be seen
    std::fprintf(stderr,
                 "bubblebench: note: rank %d: BB_HOST_STAGING=always: every MPI message goes "
                 "through host staging (testing)\n",
                 rank_);
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

Request MpiTransport::isend(ConstTensorPtr buf, std::size_t count, int peer, int tag) {
  Slot s;
  s.send = true;
  s.count = message_count(count, peer);
  s.type = mpi_type(buf.dtype());
  s.peer = peer;
  s.tag = tag;
  if (staging_) {
    s.ticket = staging_->stage_send(buf, count).id;
    s.waiting_copy = true;
    const Request r = hold(s);
    staged_.push_back(r.id);
    post_staged_sends();
    return r;
  }
  BB_CHECK_MPI(MPI_Isend(buf.get(), s.count, s.type, peer, tag, comm_, &s.request));
  return hold(s);
}

Request MpiTransport::irecv(TensorPtr buf, std::size_t count, int peer, int tag) {
  Slot s;
  s.count = message_count(count, peer);
  s.type = mpi_type(buf.dtype());
  s.peer = peer;
  s.tag = tag;
  void* dst = buf.get();
  if (staging_) {
    const HostStaging::Ticket t = staging_->stage_recv(buf, count);
    s.ticket = t.id;
    dst = staging_->recv_buffer(t);
  }
  BB_CHECK_MPI(MPI_Irecv(dst, s.count, s.type, peer, tag, comm_, &s.request));
  const Request r = hold(s);
  if (staging_) staged_recvs_.push_back(r.id);
  return r;
}

void MpiTransport::post_staged_sends() {
  while (!staged_.empty()) {
    Slot& s = slots_[static_cast<std::size_t>(staged_.front())];
    const void* host = staging_->send_ready(HostStaging::Ticket{s.ticket});
    if (host == nullptr) return;
    BB_CHECK_MPI(MPI_Isend(host, s.count, s.type, s.peer, s.tag, comm_, &s.request));
    s.waiting_copy = false;
    staged_.pop_front();
  }
}

// Every staged receive that MPI has completed goes to the device now, whichever request the
// caller tests: its copy then starts at once instead of when its consumer asks for it.
void MpiTransport::deliver_staged_receives() {
  for (std::size_t i = 0; i < staged_recvs_.size();) {
    Slot& s = slots_[static_cast<std::size_t>(staged_recvs_[i])];
    int done = 0;
    BB_CHECK_MPI(MPI_Test(&s.request, &done, MPI_STATUS_IGNORE));
    if (!done) {
      ++i;
      continue;
    }
    HostStaging::Ticket t{s.ticket};
    staging_->deliver(t);
    s.ticket = -1;
    s.delivered = true;
    staged_recvs_[i] = staged_recvs_.back();
    staged_recvs_.pop_back();
  }
}

bool MpiTransport::test(Request& request) {
  if (!staged_.empty()) post_staged_sends();
  if (!staged_recvs_.empty()) deliver_staged_receives();
  if (!request.valid()) return true;
  Slot& s = slots_.at(static_cast<std::size_t>(request.id));
  if (s.waiting_copy) return false;
  if (!s.delivered) {
    if (!s.send && s.ticket >= 0) return false;  // staged, and MPI has not completed it (above)
    int done = 0;
    BB_CHECK_MPI(MPI_Test(&s.request, &done, MPI_STATUS_IGNORE));
    if (!done) return false;
    if (s.ticket >= 0) {  // a staged send: its host buffer goes back
      HostStaging::Ticket t{s.ticket};
      staging_->release(t);
    }
  }
  s = Slot{};
  free_.push_back(request.id);
  request = Request{};
  return true;
}

}  // namespace bb
