#include "runtime/calibrate.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <string>

#include "common/error.hpp"
#include "common/stats.hpp"
#include "runtime/mpi_util.hpp"
#include "runtime/wait.hpp"

namespace bb {
namespace {

constexpr std::size_t kReplyFloats = 2;  // the 8-byte reply
constexpr int kDataTag = 0, kReplyTag = 1;

// The measuring pair polls with sched_yield for up to 20 ms before it sleeps: a sleep's
// wake-up (50 µs cap + the VM's ~30 µs) would be timed as transfer, in steps that move a large
// size's median by 10-20 %. The ranks waiting for their turn sleep at once, up to 20 ms between
// polls, so they leave the measuring ranks' cores alone (1 ms caps still moved 1 MiB at P=4).
const Backoff kHot{Backoff::kMaxSleep, std::chrono::milliseconds(20)};
const Backoff kIdle{std::chrono::milliseconds(20), std::chrono::nanoseconds(0)};

// Polls the requests and then the backend's queue until all are done (runtime/wait.hpp).
class Waiter {
 public:
  Waiter(Transport& t, Backend& b, double timeout_s) : t_(t), b_(b), timeout_s_(timeout_s) {}
  void all(Request* reqs, std::size_t n, int peer, std::size_t bytes, Backoff shape = kHot) {
    const auto describe = [&] {
      return "rank " + std::to_string(t_.rank()) + ": calibrate: waiting for rank " +
             std::to_string(peer) + " (" + std::to_string(bytes) + " B)";
    };
    wait_until(
        [&] {
          bool done = true;
          for (std::size_t i = 0; i < n; ++i) done = t_.test(reqs[i]) && done;
          return done;
        },
        timeout_s_, describe, shape);
    wait_until([&] { return b_.queue_done(); }, timeout_s_, describe, shape);
  }

 private:
  Transport& t_;
  Backend& b_;
  double timeout_s_;
};

// Round trips of `sizes` between this rank and `peer`, in o.rounds sweeps over the sizes
// (upwards, then downwards, ...), each visit of a size warmed up first. As src: every timed
// round trip, by size (empty as dst).
std::vector<std::vector<double>> ping_pong(Transport& t, Waiter& wait, int peer, bool src,
                                           const std::vector<std::size_t>& sizes,
                                           const CalibrationOptions& o, float* data, float* reply) {
  using Clock = std::chrono::steady_clock;
  std::vector<std::vector<double>> rtt(sizes.size());
  const int rounds = std::min(o.rounds, o.reps);
  for (int round = 0; round < rounds; ++round) {
    const int timed = o.reps / rounds + (round < o.reps % rounds ? 1 : 0);
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      const std::size_t i = round % 2 == 0 ? k : sizes.size() - 1 - k;
      const std::size_t bytes = sizes[i], count = bytes / sizeof(float);
      for (int rep = 0; rep < o.warmup + timed; ++rep) {
        if (src) {
          const auto t0 = Clock::now();
          // Send first, then the reply's receive: NCCL runs both in this order on one stream.
          Request reqs[2] = {t.isend(data, count, peer, kDataTag),
                             t.irecv(reply, kReplyFloats, peer, kReplyTag)};
          wait.all(reqs, 2, peer, bytes);
          const auto t1 = Clock::now();
          if (rep >= o.warmup) rtt[i].push_back(std::chrono::duration<double>(t1 - t0).count());
        } else {
          Request in = t.irecv(data, count, peer, kDataTag);
          wait.all(&in, 1, peer, bytes);
          Request out = t.isend(reply, kReplyFloats, peer, kReplyTag);
          wait.all(&out, 1, peer, kReplyFloats * sizeof(float));
        }
      }
    }
  }
  return rtt;
}

// Round trips of 8 B to a receiver that has waited: src pauses o.cold_pause_s before each,
// dst waits for the message with the runtime's backoff. As src: every round trip.
std::vector<double> cold_trips(Transport& t, Backend& b, Waiter& wait, int peer, bool src,
                               const CalibrationOptions& o, float* data, float* reply) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> rtt;
  for (int rep = 0; rep < o.cold_reps; ++rep) {
    if (src) {
      b.sleep_for(o.cold_pause_s);
      const auto t0 = Clock::now();
      Request reqs[2] = {t.isend(data, kReplyFloats, peer, kDataTag),
                         t.irecv(reply, kReplyFloats, peer, kReplyTag)};
      wait.all(reqs, 2, peer, kReplyFloats * sizeof(float));
      rtt.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    } else {
      Request in = t.irecv(data, kReplyFloats, peer, kDataTag);
      wait.all(&in, 1, peer, kReplyFloats * sizeof(float), Backoff{});
      Request out = t.isend(reply, kReplyFloats, peer, kReplyTag);
      wait.all(&out, 1, peer, kReplyFloats * sizeof(float));
    }
  }
  return rtt;
}

}  // namespace

std::vector<std::size_t> calibration_sizes(std::size_t max_bytes) {
  if (max_bytes > static_cast<std::size_t>(INT_MAX) * sizeof(float))
    throw ConfigError("calibrate: --max-bytes " + std::to_string(max_bytes) +
                      " exceeds what one message can carry (2^31 floats)");
  std::vector<std::size_t> out{8};
  while (out.back() < max_bytes) out.push_back(out.back() * 2);
  return out;
}

std::vector<PairSamples> calibrate_links(Transport& t, Backend& b, MPI_Comm comm,
                                         const CalibrationOptions& o) {
  const int me = mpi::rank(comm), P = mpi::size(comm);
  for (const auto& [s, d] : o.pairs)
    if (s < 0 || s >= P || d < 0 || d >= P || s == d)
      throw ConfigError("calibrate: pair " + std::to_string(s) + "->" + std::to_string(d) +
                        " is not two distinct ranks of " + std::to_string(P));
  if (o.reps < 1 || o.warmup < 0 || o.rounds < 1 || o.cold_reps < 0 || !(o.cold_pause_s >= 0))
    throw ConfigError(
        "calibrate: needs reps >= 1, warmup >= 0, rounds >= 1, cold reps and pause >= 0");
  const std::vector<std::size_t> sizes = calibration_sizes(o.max_bytes);
  Buffer data = b.allocate(sizes.back() / sizeof(float));
  Buffer reply = b.allocate(kReplyFloats);
  b.fill(data.data(), 1.0f, data.size());
  b.fill(reply.data(), 0.0f, reply.size());
  b.synchronize();
  Waiter wait(t, b, o.timeout_s);

  // This rank's pairs as src: src, dst, then per size the one-way median and quartiles.
  std::vector<double> mine;
  for (const auto& [s, d] : o.pairs) {
    mpi::barrier(comm, o.timeout_s, kIdle);  // one pair at a time
    if (me != s && me != d) continue;
    const auto rtt =
        ping_pong(t, wait, me == s ? d : s, me == s, sizes, o, data.data(), reply.data());
    const auto cold =
        cold_trips(t, b, wait, me == s ? d : s, me == s, o, data.data(), reply.data());
    if (me != s) continue;
    mine.insert(mine.end(), {double(s), double(d)});
    const double reply_half = quantile(rtt[0], 0.5) / 2;  // one way: minus the reply's half
    for (const auto& r : rtt)
      for (const double q : {0.5, 0.25, 0.75})
        mine.push_back(std::max(quantile(r, q) - reply_half, 1e-9));
    mine.push_back(cold.empty() ? 0.0 : std::max(quantile(cold, 0.5) - 2 * reply_half, 0.0));
  }
  mpi::barrier(comm, o.timeout_s);
  const auto all = mpi::gather(mine, 0, comm, o.timeout_s);
  std::vector<PairSamples> out;
  const std::size_t row = 2 + 3 * sizes.size() + 1;
  for (const auto& from : all)
    for (std::size_t i = 0; i + row <= from.size(); i += row) {
      PairSamples p;
      p.src = static_cast<int>(from[i]);
      p.dst = static_cast<int>(from[i + 1]);
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        const double* q = &from[i + 2 + 3 * k];
        p.samples.push_back({static_cast<double>(sizes[k]), q[0]});
        p.spread.push_back({q[1], q[2]});
      }
      p.wake = from[i + row - 1];
      out.push_back(std::move(p));
    }
  std::sort(out.begin(), out.end(), [](const PairSamples& x, const PairSamples& y) {
    return std::pair{x.src, x.dst} < std::pair{y.src, y.dst};
  });
  return out;
}

std::vector<LinkFit> fit_links(const std::vector<PairSamples>& measured,
                               const FitOptions& options) {
  std::vector<LinkFit> out;
  out.reserve(measured.size());
  for (const PairSamples& p : measured) {
    out.push_back(fit_link(p.src, p.dst, p.samples, options));
    out.back().wake_s = p.wake;
  }
  return out;
}

}  // namespace bb
