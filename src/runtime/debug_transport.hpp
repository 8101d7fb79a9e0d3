// Testing only (`run --debug-link-delay SRC:DST:US`, hidden): a Transport wrapper that delays
// every message this rank sends on one directed link by a fixed time, so that a test can
// inject a known slow link and find it in the attribution's communication term.
//
// A send to the delayed peer is held and posted to the wrapped transport once its delay has
// passed, at the first test() from then on (the executor tests its sends after every compute,
// while it waits, and inside synthetic computes). Held sends are posted in isend() order, so
// the per-pair message order is kept. Everything else passes through.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string_view>
#include <unordered_map>

#include "runtime/transport.hpp"

namespace bb {

class DelayedLinkTransport final : public Transport {
 public:
  // Sends from this rank to `peer` leave `delay_s` after isend(). `inner` must outlive this.
  DelayedLinkTransport(Transport& inner, int peer, double delay_s)
      : inner_(inner), peer_(peer), delay_(std::chrono::duration<double>(delay_s)) {}

  std::string_view name() const override { return inner_.name(); }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }

  Request isend(const float* buf, std::size_t count, int peer, int tag) override {
    if (peer != peer_) return wrap(inner_.isend(buf, count, peer, tag));
    const std::int64_t id = next_++;
    held_.push_back({id, Clock::now() + std::chrono::duration_cast<Clock::duration>(delay_), buf,
                     count, peer, tag});
    return Request{id};
  }
  Request irecv(float* buf, std::size_t count, int peer, int tag) override {
    return wrap(inner_.irecv(buf, count, peer, tag));
  }
  bool test(Request& request) override {
    post_due();
    auto it = posted_.find(request.id);
    if (it == posted_.end()) {
      if (!request.valid()) return true;
      return false;  // still held
    }
    if (!inner_.test(it->second)) return false;
    posted_.erase(it);
    request = Request{};
    return true;
  }
  void group_begin() override { inner_.group_begin(); }
  void group_end() override { inner_.group_end(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Held {
    std::int64_t id;
    Clock::time_point due;
    const float* buf;
    std::size_t count;
    int peer, tag;
  };

  Request wrap(Request inner) {
    const std::int64_t id = next_++;
    posted_.emplace(id, inner);
    return Request{id};
  }
  void post_due() {
    const auto now = Clock::now();
    while (!held_.empty() && held_.front().due <= now) {
      const Held& h = held_.front();
      posted_.emplace(h.id, inner_.isend(h.buf, h.count, h.peer, h.tag));
      held_.pop_front();
    }
  }

  Transport& inner_;
  int peer_;
  std::chrono::duration<double> delay_;
  std::int64_t next_ = 0;
  std::deque<Held> held_;
  std::unordered_map<std::int64_t, Request> posted_;
};

}  // namespace bb
