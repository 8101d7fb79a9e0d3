// Waiting without burning a core (machine notes: MPICH busy-polls, and several ranks often
// share one core). A waiter polls a non-blocking test:
//  1. for the first ~50 µs it polls with sched_yield() in between: a message that is about to
//     arrive (the common case when ranks' actions end together) is seen within µs, and a rank
//     sharing the core gets it at every poll;
//  2. then it sleeps between polls, from 2 µs doubling to a cap of 50 µs (in a VM any sleep
//     costs ~30 µs more). Polling much more often than that backfires with more ranks than
//     cores: measured on 4 ranks / 2 cores, caps of 2-10 µs delay messages by milliseconds.
// Both phases can be set (Backoff's constructor): `calibrate` times its round trips with a
// long yield phase (a sleep's wake-up would be timed as transfer) and lets the ranks that wait
// for their turn sleep at once with a 20 ms cap (they would wake on the measuring ranks' cores).
// Every wait has a deadline: past it, TimeoutError carries a one-line description of what was
// awaited (the watchdog of `run --timeout`, exit code 3).
#pragma once

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

namespace bb {

// A wait exceeded its deadline. what() is the line to print, e.g.
// "rank 1: waiting RECV_F chunk 1 mb 0 from rank 0".
struct TimeoutError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Backoff {
 public:
  static constexpr std::chrono::nanoseconds kYieldPhase{50000};
  static constexpr std::chrono::nanoseconds kFirstSleep{2000};
  static constexpr std::chrono::nanoseconds kMaxSleep{50000};

  explicit Backoff(std::chrono::nanoseconds max_sleep = kMaxSleep,
                   std::chrono::nanoseconds yield_phase = kYieldPhase)
      : max_sleep_(max_sleep), yield_phase_(yield_phase) {}

  // Call after each poll that found nothing to do.
  void pause() {
    using Clock = std::chrono::steady_clock;
    if (!sleeping_) {
      const auto now = Clock::now();
      if (polls_++ == 0) start_ = now;
      if (now - start_ < yield_phase_) {
        std::this_thread::yield();
        return;
      }
      sleeping_ = true;
    }
    std::this_thread::sleep_for(sleep_);
    sleep_ = std::min(sleep_ * 2, max_sleep_);
  }
  bool sleeping() const { return sleeping_; }
  void reset() {
    polls_ = 0;
    sleeping_ = false;
    sleep_ = kFirstSleep;
  }

 private:
  std::chrono::nanoseconds max_sleep_;
  std::chrono::nanoseconds yield_phase_;
  std::chrono::steady_clock::time_point start_{};
  long polls_ = 0;
  bool sleeping_ = false;
  std::chrono::nanoseconds sleep_ = kFirstSleep;
};

// Polls `done()` until it returns true, calling `idle()` (e.g. progress on other requests)
// between polls. Throws TimeoutError(describe()) once `timeout_s` seconds have passed
// (timeout_s <= 0: no deadline). `backoff` shapes the pauses (default: the runtime's).
template <class Done, class Idle, class Describe>
void wait_until(Done&& done, Idle&& idle, double timeout_s, Describe&& describe,
                Backoff backoff = Backoff{}) {
  if (done()) return;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  int checks = 0;
  while (!done()) {
    idle();
    // The clock is read every 64 polls (cheap, and still within µs of the deadline), and at
    // every poll once the backoff sleeps (a long sleep cap would make 64 polls a long time).
    if (timeout_s > 0 && ((++checks & 63) == 0 || backoff.sleeping()) &&
        std::chrono::duration<double>(Clock::now() - start).count() > timeout_s)
      throw TimeoutError(describe());
    backoff.pause();
  }
}

template <class Done, class Describe>
void wait_until(Done&& done, double timeout_s, Describe&& describe, Backoff backoff = Backoff{}) {
  wait_until(
      done, [] {}, timeout_s, describe, backoff);
}

}  // namespace bb
