// Transport over MPI point-to-point: MPI_Isend / MPI_Irecv, completed with MPI_Test. Never
// blocks inside MPI.
//
// Host memory is sent as is. Device memory (a backend whose device_is_host() is false: CUDA)
// goes through the backend's HostStaging (runtime/backend.hpp): a send's device-to-host copy
// is started at isend() and its MPI_Isend posted by a later test() once the copy is done
// (staged sends are posted strictly in their isend() order, so the per-pair message order is
// kept); a receive lands in a host buffer that the first test() after MPI has completed it —
// on any request, not only that receive's — delivers to the device, so the copy overlaps the
// compute queued before its consumer asks. The transport knows nothing of CUDA (design §2.1).
//
// BB_HOST_STAGING=always in the environment stages every message even on a host-memory
// backend: the staged path then runs (and is tested) without a GPU.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/transport.hpp"

namespace bb {

class MpiTransport final : public Transport {
 public:
  // Uses `comm` as given (pass a duplicate reserved for pipeline traffic); does not free it.
  // `backend` (optional) decides whether buffers are device memory that needs staging.
  // `stage_always` stages host memory too (testing; see BB_HOST_STAGING above).
  explicit MpiTransport(MPI_Comm comm, Backend* backend = nullptr, bool stage_always = false);
  ~MpiTransport() override;

  std::string_view name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Request isend(ConstTensorPtr buf, std::size_t count, int peer, int tag) override;
  Request irecv(TensorPtr buf, std::size_t count, int peer, int tag) override;
  bool test(Request& request) override;

  // The host staging's buffers when they stage device memory (pinned on CUDA).
  std::size_t pinned_host_bytes() const override {
    return staging_ && !device_is_host_ ? staging_->held_bytes() : 0;
  }

  // Operations posted and not yet completed by test().
  std::size_t pending() const { return slots_.size() - free_.size(); }
  bool staging() const { return staging_ != nullptr; }

 private:
  struct Slot {
    MPI_Request request = MPI_REQUEST_NULL;
    bool send = false;
    bool waiting_copy = false;  // staged send whose MPI_Isend is not posted yet
    std::int64_t ticket = -1;   // staging ticket, or -1
    bool delivered = false;     // staged receive: completed and delivered to the device
    int count = 0, peer = 0, tag = 0;
    MPI_Datatype type = MPI_FLOAT;  // MPI_UINT16_T for bf16 (moved, never reduced)
  };
  Request hold(const Slot& slot);
  void post_staged_sends();
  void deliver_staged_receives();

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::vector<Slot> slots_;
  std::vector<std::int64_t> free_;
  std::deque<std::int64_t> staged_;         // slots waiting for their copy, in isend() order
  std::vector<std::int64_t> staged_recvs_;  // staged receives MPI has not completed yet
  std::unique_ptr<HostStaging> staging_;
  bool device_is_host_ = true;
};

}  // namespace bb
