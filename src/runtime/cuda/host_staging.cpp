#include "runtime/cuda/host_staging.hpp"

#include <cuda_runtime_api.h>

#include <map>
#include <new>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/cuda/check.hpp"
#include "runtime/cuda/cuda_backend.hpp"

namespace bb::cuda {
namespace {

constexpr std::size_t kPinnedRound = 4096;

std::size_t pinned_size(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  return (bytes + kPinnedRound - 1) / kPinnedRound * kPinnedRound;
}

}  // namespace

struct PinnedStaging::Impl {
  struct Entry {
    bool send = false;
    void* host = nullptr;
    std::size_t bytes = 0;  // pinned block size
    std::size_t copy = 0;   // bytes of the message
    void* device = nullptr;
    cudaEvent_t copied = nullptr;   // send: the D2H copy
    cudaEvent_t readers = nullptr;  // receive: the compute enqueued before it was posted
  };
  struct Pending {
    cudaEvent_t done;
    void* host;
    std::size_t bytes;
  };

  CudaBackend* backend = nullptr;
  cudaStream_t d2h = nullptr, h2d = nullptr;
  cudaEvent_t ready = nullptr;
  std::multimap<std::size_t, void*> free_blocks;
  std::size_t held = 0, in_use = 0;
  std::unordered_map<std::int64_t, Entry> entries;
  std::vector<Pending> pending;
  std::vector<cudaEvent_t> free_events;
  std::int64_t next_id = 0;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    if (backend != nullptr) (void)cudaSetDevice(backend->device());
    if (d2h != nullptr) (void)cudaStreamSynchronize(d2h);
    if (h2d != nullptr) (void)cudaStreamSynchronize(h2d);
    for (const Pending& p : pending) {
      free_events.push_back(p.done);
      (void)cudaFreeHost(p.host);
    }
    for (auto& [id, e] : entries) {
      if (e.copied != nullptr) free_events.push_back(e.copied);
      if (e.readers != nullptr) free_events.push_back(e.readers);
      (void)cudaFreeHost(e.host);
    }
    for (const auto& [size, p] : free_blocks) (void)cudaFreeHost(p);
    for (cudaEvent_t e : free_events) (void)cudaEventDestroy(e);
    if (ready != nullptr) (void)cudaEventDestroy(ready);
    if (d2h != nullptr) (void)cudaStreamDestroy(d2h);
    if (h2d != nullptr) (void)cudaStreamDestroy(h2d);
    (void)cudaGetLastError();
  }

  void bind() const { BB_CHECK_CUDA(cudaSetDevice(backend->device())); }

  cudaEvent_t take_event() {
    if (free_events.empty()) {
      cudaEvent_t e = nullptr;
      BB_CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      return e;
    }
    cudaEvent_t e = free_events.back();
    free_events.pop_back();
    return e;
  }

  void give_back(void* host, std::size_t bytes) {
    free_blocks.emplace(bytes, host);
    in_use -= bytes;
  }

  // Receive buffers whose copy to the device has finished go back to the pool.
  void recycle() {
    for (std::size_t i = 0; i < pending.size();) {
      const cudaError_t e = cudaEventQuery(pending[i].done);
      if (e == cudaErrorNotReady) {
        ++i;
        continue;
      }
      BB_CHECK_CUDA(e);
      give_back(pending[i].host, pending[i].bytes);
      free_events.push_back(pending[i].done);
      pending[i] = pending.back();
      pending.pop_back();
    }
  }

  std::pair<void*, std::size_t> take(std::size_t message_bytes) {
    recycle();
    const std::size_t bytes = pinned_size(message_bytes);
    const auto it = free_blocks.lower_bound(bytes);
    if (it != free_blocks.end() && it->first - bytes <= bytes / 4) {
      const std::pair<void*, std::size_t> got{it->second, it->first};
      free_blocks.erase(it);
      in_use += got.second;
      return got;
    }
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      throw std::bad_alloc();
    }
    BB_CHECK_CUDA(e);
    held += bytes;
    in_use += bytes;
    return {p, bytes};
  }

  Entry& find(const Ticket& t, bool send) {
    const auto it = entries.find(t.id);
    if (it == entries.end() || it->second.send != send)
      throw std::logic_error("HostStaging: unknown or wrong-kind ticket");
    return it->second;
  }

  // The stream `s` waits for everything enqueued so far on the compute stream.
  void after_compute(cudaStream_t s) {
    BB_CHECK_CUDA(cudaEventRecord(ready, backend->stream()));
    BB_CHECK_CUDA(cudaStreamWaitEvent(s, ready, 0));
  }
};

PinnedStaging::PinnedStaging(Backend& backend) : impl_(std::make_unique<Impl>()) {
  CudaBackend* cuda = as_cuda(backend);
  if (cuda == nullptr)
    throw std::invalid_argument("PinnedStaging needs the CUDA backend (got " +
                                std::string(backend.name()) + ")");
  Impl& s = *impl_;
  s.backend = cuda;
  s.bind();
  BB_CHECK_CUDA(cudaStreamCreateWithFlags(&s.d2h, cudaStreamNonBlocking));
  BB_CHECK_CUDA(cudaStreamCreateWithFlags(&s.h2d, cudaStreamNonBlocking));
  BB_CHECK_CUDA(cudaEventCreateWithFlags(&s.ready, cudaEventDisableTiming));
}

PinnedStaging::~PinnedStaging() = default;

PinnedStaging::Ticket PinnedStaging::stage_send(ConstTensorPtr device_src, std::size_t count) {
  Impl& s = *impl_;
  s.bind();
  const std::size_t copy = device_src.bytes(count);
  const auto [host, bytes] = s.take(copy);
  Impl::Entry e;
  e.send = true;
  e.host = host;
  e.bytes = bytes;
  e.copy = copy;
  try {
    s.after_compute(s.d2h);
    if (copy > 0)
      BB_CHECK_CUDA(cudaMemcpyAsync(host, device_src.get(), copy, cudaMemcpyDeviceToHost, s.d2h));
    e.copied = s.take_event();
    BB_CHECK_CUDA(cudaEventRecord(e.copied, s.d2h));
  } catch (...) {
    s.give_back(host, bytes);
    throw;
  }
  const std::int64_t id = s.next_id++;
  s.entries.emplace(id, e);
  return Ticket{id};
}

const void* PinnedStaging::send_ready(const Ticket& ticket) {
  Impl::Entry& e = impl_->find(ticket, true);
  if (e.copied == nullptr) return e.host;  // already seen complete
  const cudaError_t q = cudaEventQuery(e.copied);
  if (q == cudaErrorNotReady) return nullptr;
  BB_CHECK_CUDA(q);
  impl_->free_events.push_back(e.copied);
  e.copied = nullptr;
  return e.host;
}

void PinnedStaging::release(Ticket& ticket) {
  Impl& s = *impl_;
  Impl::Entry& e = s.find(ticket, true);
  if (e.copied != nullptr) {
    // Released before its copy was seen complete: wait for it, the buffer is still written.
    BB_CHECK_CUDA(cudaEventSynchronize(e.copied));
    s.free_events.push_back(e.copied);
  }
  s.give_back(e.host, e.bytes);
  s.entries.erase(ticket.id);
  ticket = Ticket{};
}

PinnedStaging::Ticket PinnedStaging::stage_recv(TensorPtr device_dst, std::size_t count) {
  Impl& s = *impl_;
  s.bind();
  const std::size_t copy = device_dst.bytes(count);
  const auto [host, bytes] = s.take(copy);
  Impl::Entry e;
  e.host = host;
  e.bytes = bytes;
  e.copy = copy;
  e.device = device_dst.get();
  try {
    // The destination's earlier readers are what is enqueued now: nothing may read it between
    // here and deliver() (the Transport contract), so the copy need not wait for more.
    e.readers = s.take_event();
    BB_CHECK_CUDA(cudaEventRecord(e.readers, s.backend->stream()));
  } catch (...) {
    if (e.readers != nullptr) s.free_events.push_back(e.readers);
    s.give_back(host, bytes);
    throw;
  }
  const std::int64_t id = s.next_id++;
  s.entries.emplace(id, e);
  return Ticket{id};
}

void* PinnedStaging::recv_buffer(const Ticket& ticket) {
  return impl_->find(ticket, false).host;
}

void PinnedStaging::deliver(Ticket& ticket) {
  Impl& s = *impl_;
  s.bind();
  const Impl::Entry e = s.find(ticket, false);
  s.entries.erase(ticket.id);
  ticket = Ticket{};
  cudaEvent_t done = s.take_event();
  // Earlier readers of the destination first: those enqueued before stage_recv(), not the
  // compute enqueued since, which the copy overlaps. (A wait captures the event's record of
  // now, so the event can be recorded again for another message.)
  BB_CHECK_CUDA(cudaStreamWaitEvent(s.h2d, e.readers, 0));
  s.free_events.push_back(e.readers);
  if (e.copy > 0)
    BB_CHECK_CUDA(cudaMemcpyAsync(e.device, e.host, e.copy, cudaMemcpyHostToDevice, s.h2d));
  BB_CHECK_CUDA(cudaEventRecord(done, s.h2d));
  BB_CHECK_CUDA(cudaStreamWaitEvent(s.backend->stream(), done, 0));
  s.pending.push_back(Impl::Pending{done, e.host, e.bytes});
}

std::size_t PinnedStaging::held_bytes() const {
  return impl_->held;
}
std::size_t PinnedStaging::in_use_bytes() const {
  return impl_->in_use;
}

std::unique_ptr<HostStaging> CudaBackend::make_host_staging() {
  return std::make_unique<PinnedStaging>(*this);
}

}  // namespace bb::cuda
