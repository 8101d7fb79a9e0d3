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
#include <cmath>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/error.hpp"
#include "runtime/transport.hpp"

namespace bb {

// `SRC:DST:US`: messages from rank SRC to rank DST leave US microseconds late.
struct LinkDelay {
  int src = -1, dst = -1;
  double seconds = 0;
};

// Throws ConfigError (one line) unless TEXT is SRC:DST:US with ranks >= 0, SRC != DST, US >= 0.
inline LinkDelay parse_link_delay(const std::string& text) {
  const auto bad = [&] {
    return ConfigError("--debug-link-delay: expected SRC:DST:US (ranks, microseconds), got '" +
                       text + "'");
  };
  const auto a = text.find(':');
  const auto b = a == std::string::npos ? a : text.find(':', a + 1);
  if (b == std::string::npos) throw bad();
  LinkDelay d;
  try {
    std::size_t n1 = 0, n2 = 0, n3 = 0;
    d.src = std::stoi(text.substr(0, a), &n1);
    d.dst = std::stoi(text.substr(a + 1, b - a - 1), &n2);
    d.seconds = std::stod(text.substr(b + 1), &n3) * 1e-6;
    if (n1 != a || n2 != b - a - 1 || n3 != text.size() - b - 1) throw bad();
  } catch (const std::logic_error&) {  // stoi/stod: invalid_argument, out_of_range
    throw bad();
  }
  if (d.src < 0 || d.dst < 0 || d.src == d.dst || !(d.seconds >= 0) || !std::isfinite(d.seconds))
    throw bad();
  return d;
}

class DelayedLinkTransport final : public Transport {
 public:
  // Sends from this rank to `peer` leave `delay_s` after isend(). `inner` must outlive this.
  DelayedLinkTransport(Transport& inner, int peer, double delay_s)
      : inner_(inner), peer_(peer), delay_(std::chrono::duration<double>(delay_s)) {}
  // The same, owning the wrapped transport.
  DelayedLinkTransport(std::unique_ptr<Transport> inner, int peer, double delay_s)
      : DelayedLinkTransport(*inner, peer, delay_s) {
    owned_ = std::move(inner);
  }

  std::string_view name() const override { return inner_.name(); }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }

  Request isend(ConstTensorPtr buf, std::size_t count, int peer, int tag) override {
    if (peer != peer_) return wrap(inner_.isend(buf, count, peer, tag));
    const std::int64_t id = next_++;
    held_.push_back({id, Clock::now() + std::chrono::duration_cast<Clock::duration>(delay_), buf,
                     count, peer, tag});
    return Request{id};
  }
  Request irecv(TensorPtr buf, std::size_t count, int peer, int tag) override {
    return wrap(inner_.irecv(buf, count, peer, tag));
  }
  void check_errors() override { inner_.check_errors(); }
  std::size_t device_bytes() const override { return inner_.device_bytes(); }
  std::size_t pinned_host_bytes() const override { return inner_.pinned_host_bytes(); }
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
    ConstTensorPtr buf;
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

  std::unique_ptr<Transport> owned_;  // declared first: destroyed after the rest
  Transport& inner_;
  int peer_;
  std::chrono::duration<double> delay_;
  std::int64_t next_ = 0;
  std::deque<Held> held_;
  std::unordered_map<std::int64_t, Request> posted_;
};

}  // namespace bb
