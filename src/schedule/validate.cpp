#include "schedule/validate.hpp"

#include <bit>
#include <sstream>
#include <thread>

#include "common/error.hpp"
#include "schedule/edges.hpp"
#include "schedule/parallel.hpp"
#include "schedule/text.hpp"

namespace bb {
namespace {

// Per (chunk, micro-batch) bits of what has been seen.
enum : std::uint8_t {
  kF = 1,
  kB = 2,
  kW = 4,
  kSendF = 8,
  kRecvF = 16,
  kSendB = 32,
  kRecvB = 64,
};

std::string where(const Action& a) {
  return "chunk " + std::to_string(a.chunk) + " micro-batch " + std::to_string(a.mb);
}

class Checker {
 public:
  Checker(const Schedule& s, std::size_t max_issues) : s_(s), max_(max_issues) {}

  ValidationReport run() {
    if (!check_shape()) return report_;
    const std::size_t C = s_.num_chunks();
    own_seen_.assign(C * static_cast<std::size_t>(s_.M), 0);
    seen_ = own_seen_.data();
    // A rank's actions touch only the (chunk, micro-batch) bits of its own chunks (any other
    // is reported and skipped), so ranks are checked independently, each worker into its
    // own report; the reports join in rank order, as one pass would have written them.
    std::vector<Checker> workers(rank_workers(2), Checker(s_, max_));
    for (Checker& w : workers) w.seen_ = seen_;
    for_each_rank(s_, 2, [&](int w, int r) { workers[w].check_rank(r); });
    for (Checker& w : workers) {
      for (ValidationIssue& is : w.report_.issues)
        if (report_.issues.size() < max_) report_.issues.push_back(std::move(is));
      report_.total += w.report_.total;
    }
    check_complete();
    return report_;
  }

 private:
  void add(int rank, std::size_t step, std::string msg) {
    if (report_.issues.size() < max_) report_.issues.push_back({rank, step, std::move(msg)});
    ++report_.total;
  }

  bool check_shape() {
    const int C = s_.num_chunks();
    if (s_.P < 1 || s_.M < 1) add(-1, 0, "P and M must be positive");
    if (static_cast<int>(s_.ranks.size()) != s_.P)
      add(-1, 0,
          "there are " + std::to_string(s_.ranks.size()) +
              " rank lists for P=" + std::to_string(s_.P));
    if (static_cast<int>(s_.chunk_stage.size()) != C) add(-1, 0, "chunk_stage size differs");
    if (static_cast<int>(s_.routes.size()) != s_.M)
      add(-1, 0,
          "there are " + std::to_string(s_.routes.size()) +
              " routes for M=" + std::to_string(s_.M));
    for (int c = 0; c < C; ++c)
      if (s_.chunk_rank[c] < 0 || s_.chunk_rank[c] >= s_.P)
        add(-1, 0,
            "chunk " + std::to_string(c) + " is placed on a rank outside 0.." +
                std::to_string(s_.P - 1));
    for (const Route& rt : s_.routes)
      if (!route_in_range(rt, C)) {
        add(-1, 0, "a micro-batch route leaves the chunk range");
        break;
      }
    return report_.ok();
  }

  std::uint8_t& bits(const Action& a) {
    return seen_[static_cast<std::size_t>(a.chunk) * s_.M + a.mb];
  }

  void check_rank(int r) {
    const auto& acts = s_.ranks[r];
    for (std::size_t i = 0; i < acts.size(); ++i) {
      const Action& a = acts[i];
      if (a.chunk >= s_.num_chunks() || a.mb >= static_cast<std::uint32_t>(s_.M)) {
        add(r, i,
            to_string(a) + ": chunk or micro-batch out of range (C=" +
                std::to_string(s_.num_chunks()) + ", M=" + std::to_string(s_.M) + ")");
        continue;
      }
      if (s_.chunk_rank[a.chunk] != r) {
        add(r, i,
            to_string(a) + ": chunk " + std::to_string(a.chunk) + " lives on rank " +
                std::to_string(s_.chunk_rank[a.chunk]) + ", not rank " + std::to_string(r));
        continue;
      }
      const Route& rt = s_.routes[a.mb];
      if (!route_visits(rt, a.chunk)) {
        add(r, i,
            to_string(a) + ": micro-batch " + std::to_string(a.mb) + " does not visit chunk " +
                std::to_string(a.chunk));
        continue;
      }
      if (a.overlap_next()) {
        const bool pair_ok = a.op == Op::F && unit_length(a, acts.size() - i) == 2 &&
                             (acts[i + 1].op == Op::B || acts[i + 1].op == Op::BW);
        if (!pair_ok) add(r, i, to_string(a) + ": an FB pair is an F followed by a B or BW");
      }
      if (!s_.lowered && is_comm(a.op)) {
        add(r, i, to_string(a) + ": communication action in a schedule marked not lowered");
        continue;
      }
      check_action(r, i, a);
    }
  }

  void check_action(int r, std::size_t i, const Action& a) {
    std::uint8_t& b = bits(a);
    const Route& rt = s_.routes[a.mb];
    const int prev = prev_rank(s_, rt, a.chunk);
    const int next = next_rank(s_, rt, a.chunk);
    const bool remote_in = prev >= 0 && prev != r;
    const bool remote_grad = next >= 0 && next != r;
    auto dup = [&](std::uint8_t bit) {
      if (b & bit) {
        add(r, i, to_string(a) + ": duplicate " + std::string(op_name(a.op)) + " of " + where(a));
        return true;
      }
      return false;
    };
    switch (a.op) {
      case Op::F:
        if (dup(kF)) return;
        if (s_.lowered && remote_in && !(b & kRecvF))
          add(r, i,
              to_string(a) + ": F needs RECV_F of " + where(a) + " from rank " +
                  std::to_string(prev) + " before it");
        b |= kF;
        break;
      case Op::B:
      case Op::BW:
        if (dup(kB)) return;
        if (a.op == Op::BW && dup(kW)) return;
        if (!(b & kF)) add(r, i, to_string(a) + ": backward before forward of " + where(a));
        if (s_.lowered && remote_grad && !(b & kRecvB))
          add(r, i,
              to_string(a) + ": backward needs RECV_B of " + where(a) + " from rank " +
                  std::to_string(next) + " before it");
        b |= kB;
        if (a.op == Op::BW) b |= kW;
        break;
      case Op::W:
        if (dup(kW)) return;
        if (!(b & kB)) add(r, i, to_string(a) + ": W before B of " + where(a));
        b |= kW;
        break;
      case Op::SEND_F:
        if (dup(kSendF)) return;
        if (!remote_grad)
          add(r, i,
              to_string(a) + ": nothing to send: the next chunk is " +
                  (next < 0 ? std::string("absent") : "on this rank"));
        if (!(b & kF)) add(r, i, to_string(a) + ": SEND_F before the F it sends");
        b |= kSendF;
        break;
      case Op::RECV_F:
        if (dup(kRecvF)) return;
        if (!remote_in)
          add(r, i,
              to_string(a) + ": nothing to receive: the previous chunk is " +
                  (prev < 0 ? std::string("absent") : "on this rank"));
        b |= kRecvF;
        break;
      case Op::SEND_B:
        if (dup(kSendB)) return;
        if (!remote_in)
          add(r, i,
              to_string(a) + ": nothing to send: the previous chunk is " +
                  (prev < 0 ? std::string("absent") : "on this rank"));
        if (!(b & kB)) add(r, i, to_string(a) + ": SEND_B before the B it sends");
        b |= kSendB;
        break;
      case Op::RECV_B:
        if (dup(kRecvB)) return;
        if (!remote_grad)
          add(r, i,
              to_string(a) + ": nothing to receive: the next chunk is " +
                  (next < 0 ? std::string("absent") : "on this rank"));
        b |= kRecvB;
        break;
    }
  }

  // The bits every (chunk, micro-batch) of micro-batch m's route must have.
  std::uint8_t wanted(int c, const Route& rt) const {
    const int r = s_.chunk_rank[c];
    const int next = next_rank(s_, rt, c);
    const int prev = prev_rank(s_, rt, c);
    std::uint8_t want = kF | kB | kW;
    if (s_.lowered && next >= 0 && next != r) want |= kSendF | kRecvB;
    if (s_.lowered && prev >= 0 && prev != r) want |= kRecvF | kSendB;
    return want;
  }

  // True when every micro-batch has all it needs; one thread per half of the micro-batches.
  bool complete_fast() const {
    const int n = core_parallel(s_) ? 2 : 1;
    bool ok[2] = {true, true};
    const auto scan = [&](int k) {
      for (int m = s_.M * k / n; m < s_.M * (k + 1) / n; ++m) {
        const Route& rt = s_.routes[m];
        for (const int c : route_chunks(rt)) {
          const std::uint8_t want = wanted(c, rt);
          if ((seen_[static_cast<std::size_t>(c) * s_.M + m] & want) != want) {
            ok[k] = false;
            return;
          }
        }
      }
    };
    if (n == 1) {
      scan(0);
    } else {
      std::thread other(scan, 1);
      scan(0);
      other.join();
    }
    return ok[0] && ok[1];
  }

  // Every missing action of every (chunk, micro-batch) is counted; messages are built for the
  // first max_ issues only (describe() prints those and the exact total).
  void check_complete() {
    if (complete_fast()) return;
    for (int m = 0; m < s_.M; ++m) {
      const Route& rt = s_.routes[m];
      for (const int c : route_chunks(rt)) {
        const std::uint8_t b = seen_[static_cast<std::size_t>(c) * s_.M + m];
        const std::uint8_t want = wanted(c, rt);
        if ((b & want) == want) continue;
        if (report_.issues.size() >= max_) {
          report_.total += static_cast<std::size_t>(std::popcount<unsigned>(want & ~b & 0xffu));
          continue;
        }
        const int r = s_.chunk_rank[c];
        const int next = next_rank(s_, rt, c);
        const int prev = prev_rank(s_, rt, c);
        const std::string w = "chunk " + std::to_string(c) + " micro-batch " + std::to_string(m) +
                              " (rank " + std::to_string(r) + ")";
        const auto missing = [&](std::uint8_t bit, const char* what, const char* dir, int peer) {
          if ((want & bit) && !(b & bit))
            add(-1, 0,
                std::string("missing ") + what + " of " + w + dir +
                    (peer >= 0 ? std::to_string(peer) : std::string()));
        };
        missing(kF, "F", "", -1);
        missing(kB, "B", "", -1);
        missing(kW, "W", "", -1);
        missing(kSendF, "SEND_F", " to rank ", next);
        missing(kRecvB, "RECV_B", " from rank ", next);
        missing(kRecvF, "RECV_F", " from rank ", prev);
        missing(kSendB, "SEND_B", " to rank ", prev);
      }
    }
  }

  const Schedule& s_;
  std::size_t max_;
  ValidationReport report_;
  std::vector<std::uint8_t> own_seen_;
  std::uint8_t* seen_ = nullptr;  // per (chunk, micro-batch): what has been seen
};

}  // namespace

std::string ValidationReport::describe(const Schedule& s) const {
  std::ostringstream os;
  os << "schedule '" << s.name << "' (P=" << s.P << ", M=" << s.M << ", v=" << s.v
     << ") is invalid: " << total << " problem" << (total == 1 ? "" : "s") << "\n";
  for (const auto& is : issues) {
    if (is.rank >= 0)
      os << "  rank " << is.rank << " step " << is.step << ": ";
    else
      os << "  ";
    os << is.message << "\n";
  }
  if (total > issues.size()) os << "  ... and " << (total - issues.size()) << " more\n";
  for (const auto& is : issues)
    if (is.rank >= 0 && is.rank < static_cast<int>(s.ranks.size())) {
      os << format_grid(s, is.rank, is.step);
      break;
    }
  return os.str();
}

ValidationReport validate(const Schedule& s, std::size_t max_issues) {
  return Checker(s, max_issues).run();
}

void validate_or_throw(const Schedule& s) {
  ValidationReport rep = validate(s);
  if (!rep.ok()) throw ScheduleError(rep.describe(s));
}

}  // namespace bb
