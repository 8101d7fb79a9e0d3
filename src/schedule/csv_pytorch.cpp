// PyTorch's pipelining CSV (torch.distributed.pipelining): read, with its placement inferred
// from the stage -> rank map, and written the way PyTorch's own _dump_csv writes it.
// Vocabulary: a PyTorch stage is a bubblebench chunk (same numbering, looped or V); PyTorch's
// I is bubblebench's B, its B (full backward) is bubblebench's BW, W is W, and
// (F;B)OVERLAP_F_B is bubblebench's FB pair. docs/csv.md has the table.
#include <algorithm>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>

#include "common/error.hpp"
#include "schedule/edges.hpp"
#include "schedule/text_detail.hpp"

namespace bb {

using text_detail::bad_token;
using text_detail::CsvLine;
using text_detail::parse_uint;
using text_detail::trim;

namespace {

constexpr std::string_view kOverlap = "OVERLAP_F_B";
// PyTorch's kinds that carry no compute: bubblebench lowers the compute actions itself.
constexpr std::string_view kNoCompute[] = {"UNSHARD", "RESHARD", "REDUCE_GRAD", "SEND_F",
                                           "RECV_F",  "SEND_B",  "RECV_B"};
constexpr std::string_view kKinds =
    "F, I, B, W, (..;..)OVERLAP_F_B, UNSHARD, RESHARD, REDUCE_GRAD, SEND_F, RECV_F, SEND_B, "
    "RECV_B";

// PyTorch's letter of a bubblebench compute op, by Op's order F, B, W, BW.
constexpr std::string_view kPytorchKind = "FIWB";
static_assert(static_cast<int>(Op::B) == 1 && static_cast<int>(Op::BW) == 3);

std::string pytorch_token(const Action& a) {
  return std::to_string(a.chunk) + kPytorchKind[static_cast<int>(a.op)] + std::to_string(a.mb);
}

// The rows of a PyTorch CSV, parsed: actions per rank, which rank each stage is on, and what
// was left out.
class Reader {
 public:
  void row(std::string_view line, int rank) {
    rank_ = rank;
    rows_.emplace_back();
    std::size_t pos = 0;
    while (pos <= line.size()) {
      std::size_t end = line.find(',', pos);
      if (end == line.npos) end = line.size();
      cell(trim(line.substr(pos, end - pos)));
      pos = end + 1;
    }
  }

  CsvSchedule finish() {
    const int P = static_cast<int>(rows_.size());
    const int C = static_cast<int>(stage_rank_.size());
    if (C == 0) throw ScheduleError("CSV: no compute action (F, I, B, W) in any row");
    std::optional<Placement> placement;
    int v = 0;
    if (C % P == 0 && placed([&](int s) { return s % P; })) {
      placement = Placement::looped;
      v = C / P;
    } else if (C == 2 * P && placed([&](int s) { return s < P ? s : 2 * P - 1 - s; })) {
      placement = Placement::v;
      v = 2;
    }
    if (!placement) {
      // Why not looped: a stage off its rank, else the count.
      std::string where = std::to_string(C) + " is not a multiple of " + std::to_string(P);
      for (int s = C - 1; s >= 0; --s)
        if (stage_rank_[s] >= 0 && stage_rank_[s] != s % P)
          where = "stage " + std::to_string(s) + " is on rank " + std::to_string(stage_rank_[s]) +
                  ", not " + std::to_string(s % P);
      throw ScheduleError("CSV: " + std::to_string(C) + " stages on " + std::to_string(P) +
                          " ranks are placed neither looped (stage s on rank s mod P) nor as a V "
                          "(stages r and 2P-1-r on rank r); " +
                          where);
    }
    CsvSchedule out{
        text_detail::csv_schedule("csv", P, max_mb_ + 1, v, *placement, std::move(rows_)),
        CsvFormat::pytorch,
        {}};
    if (!ignored_.empty()) {
      long total = 0;
      std::string kinds;
      for (const auto& [kind, n] : ignored_) {
        total += n;
        kinds += (kinds.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
      }
      out.note = "PyTorch's CSV format: " + std::to_string(total) +
                 " actions without compute left out (" + kinds +
                 "); bubblebench adds its own communication";
    }
    return out;
  }

 private:
  template <class RankOf>
  bool placed(RankOf rank_of) const {
    for (int s = 0; s < static_cast<int>(stage_rank_.size()); ++s)
      if (stage_rank_[s] >= 0 && stage_rank_[s] != rank_of(s)) return false;
    return true;
  }

  void cell(std::string_view c) {
    if (c.size() >= 2 && c.front() == '"' && c.back() == '"') c = trim(c.substr(1, c.size() - 2));
    if (c.empty()) return;  // PyTorch writes an empty cell for a step without an action
    if (c.front() == '(') return overlap(c);
    if (std::optional<Action> a = action(c)) add(*a);
  }

  // `(0F1;1B0)OVERLAP_F_B`: a forward and a backward (I or B), run overlapped.
  void overlap(std::string_view c) {
    const std::size_t close = c.find(')');
    if (close == c.npos || c.substr(close + 1) != kOverlap)
      bad_token(c, "an overlapped pair is (<stage>F<mb>;<stage>B<mb>)OVERLAP_F_B");
    const std::string_view inner = c.substr(1, close - 1);
    const std::size_t semi = inner.find(';');
    std::optional<Action> f, b;
    if (semi != inner.npos && inner.find(';', semi + 1) == inner.npos) {
      f = action(trim(inner.substr(0, semi)));
      b = action(trim(inner.substr(semi + 1)));
      if (f && b && f->op != Op::F) std::swap(f, b);
    }
    if (!f || !b || f->op != Op::F || (b->op != Op::B && b->op != Op::BW))
      bad_token(c, "OVERLAP_F_B pairs one forward (F) with one backward (I or B)");
    f->flags |= Action::kOverlapNext;
    add(*f);
    add(*b);
  }

  // One action; nullopt for a kind without compute (counted for the note).
  std::optional<Action> action(std::string_view t) {
    std::size_t i = 0;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
    std::size_t j = t.size();
    while (j > i && t[j - 1] >= '0' && t[j - 1] <= '9') --j;
    if (i == 0) bad_token(t, "expected <stage><KIND>[<micro-batch>], e.g. 0F3 (PyTorch's format)");
    const std::string_view kind = t.substr(i, j - i);
    std::uint64_t stage = 0, mb = 0;
    if (!parse_uint(t.substr(0, i), &stage) || stage >= static_cast<std::uint64_t>(kMaxChunks))
      bad_token(t, "stage out of range (0.." + std::to_string(kMaxChunks - 1) + ")");
    if (std::find(std::begin(kNoCompute), std::end(kNoCompute), kind) != std::end(kNoCompute)) {
      ++ignored_[std::string(kind)];
      return std::nullopt;
    }
    static const std::map<std::string_view, Op> kCompute = {
        {"F", Op::F}, {"I", Op::B}, {"B", Op::BW}, {"W", Op::W}};
    const auto it = kCompute.find(kind);
    if (it == kCompute.end())
      bad_token(t, "unknown kind '" + std::string(kind) + "' (" + std::string(kKinds) + ")");
    if (j == t.size()) bad_token(t, "missing micro-batch number");
    if (!parse_uint(t.substr(j), &mb) || mb >= static_cast<std::uint64_t>(kMaxMicroBatches))
      bad_token(t, "micro-batch out of range (0.." + std::to_string(kMaxMicroBatches - 1) + ")");
    return make_action(it->second, static_cast<int>(stage), static_cast<int>(mb));
  }

  void add(const Action& a) {
    if (a.chunk >= stage_rank_.size()) stage_rank_.resize(a.chunk + 1, -1);
    int& at = stage_rank_[a.chunk];
    if (at >= 0 && at != rank_)
      throw ScheduleError("stage " + std::to_string(a.chunk) + " is on rank " + std::to_string(at) +
                          " and on rank " + std::to_string(rank_) + " (a stage lives on one rank)");
    at = rank_;
    max_mb_ = std::max(max_mb_, static_cast<int>(a.mb));
    rows_.back().push_back(a);
  }

  std::vector<std::vector<Action>> rows_;
  std::vector<int> stage_rank_;  // stage -> rank, -1 where no action names it
  std::map<std::string, long> ignored_;
  int rank_ = 0;
  int max_mb_ = 0;
};

bool has_kind(std::string_view line, std::string_view kind) {
  for (std::size_t p = line.find(kind); p != line.npos; p = line.find(kind, p + 1)) {
    const bool digit_before = p > 0 && line[p - 1] >= '0' && line[p - 1] <= '9';
    const std::size_t after = p + kind.size();
    const bool ends = after == line.size() || (line[after] >= '0' && line[after] <= '9') ||
                      line[after] == ',' || line[after] == ';' || line[after] == ')' ||
                      line[after] == ' ' || line[after] == '\t' || line[after] == '"';
    if (digit_before && ends) return true;
  }
  return false;
}

}  // namespace

namespace text_detail {

// docs/csv.md, "Which dialect": a `#` header line means bubblebench's; a token only PyTorch
// writes (I, OVERLAP_F_B, UNSHARD, RESHARD, REDUCE_GRAD) means PyTorch's, one only bubblebench
// writes (BW, (..;..)FB) bubblebench's; with neither, a W means bubblebench's (PyTorch's W
// needs an I) and otherwise PyTorch's (its B, the full backward, is the only reading in which
// such a file is complete). B never silently means the input gradient of a PyTorch file.
bool is_pytorch_csv(const std::vector<CsvLine>& lines) {
  bool pytorch = false, native = false, w = false;
  for (const CsvLine& line : lines) {
    const std::string_view l = line.text;
    if (l.front() == '#') return false;
    pytorch = pytorch || has_kind(l, "I") || l.find(kOverlap) != l.npos || has_kind(l, "UNSHARD") ||
              has_kind(l, "RESHARD") || has_kind(l, "REDUCE_GRAD");
    native = native || has_kind(l, "BW") || l.find(")FB") != l.npos;
    w = w || has_kind(l, "W");
  }
  if (pytorch && native)
    throw ScheduleError(
        "CSV: mixes PyTorch's tokens (I, OVERLAP_F_B, UNSHARD, ...) with bubblebench's (BW, "
        "(..;..)FB); write one format (docs/csv.md)");
  return pytorch || (!native && !w);
}

CsvSchedule read_pytorch_csv(std::vector<CsvLine>& lines) {
  Reader reader;
  int rank = 0;
  for (CsvLine& line : lines) {
    on_line(line, [&](std::string_view l) {
      reader.row(l, rank);
      return 0;
    });
    std::string().swap(line.text);
    ++rank;
  }
  if (rank == 0) throw ScheduleError("CSV: no rows (one row of actions per rank expected)");
  return reader.finish();
}

}  // namespace text_detail

void dump_pytorch_csv(const Schedule& s, std::ostream& out) {
  const std::optional<Placement> p = placement_of(s);
  if (!p || *p == Placement::dualpipe)
    throw ConfigError(
        std::string("PyTorch's CSV format cannot hold ") +
        (p ? "DualPipe's two model copies (a PyTorch stage runs every micro-batch, a DualPipe "
             "chunk half of them)"
           : "a custom placement (it has looped and V placements)") +
        ": use --format csv");
  for (const auto& r : s.ranks) {
    const char* sep = "";
    for (std::size_t i = 0; i < r.size(); ++i) {
      const Action& a = r[i];
      if (!is_compute(a.op)) continue;
      out << sep;
      sep = ",";
      if (unit_length(a, r.size() - i) == 2) {
        out << '(' << pytorch_token(a) << ';' << pytorch_token(r[i + 1]) << ')' << kOverlap;
        ++i;
      } else {
        out << pytorch_token(a);
      }
    }
    out << "\r\n";  // Python's csv.writer ends rows so
  }
}

std::string dump_pytorch_csv(const Schedule& s) {
  std::ostringstream os;
  dump_pytorch_csv(s, os);
  return os.str();
}

}  // namespace bb
