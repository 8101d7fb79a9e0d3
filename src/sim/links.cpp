#include "sim/links.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "common/error.hpp"
#include "common/stats.hpp"
#include "schedule/edges.hpp"

namespace bb {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kPointsPerRegime = 3;

// Sum of squared relative errors of `line` over [first, last).
double relative_sse(const LinkSample* first, const LinkSample* last, const AlphaBeta& line) {
  double sse = 0;
  for (const LinkSample* p = first; p != last; ++p) {
    const double e = (line.at(p->bytes) - p->seconds) / p->seconds;
    sse += e * e;
  }
  return sse;
}

AlphaBeta from_slope(double alpha, double seconds_per_byte) {
  return {alpha, seconds_per_byte > 0 ? 1.0 / seconds_per_byte : 0.0};
}

void check_samples(const std::vector<LinkSample>& samples, int src, int dst) {
  const std::string pair = std::to_string(src) + "->" + std::to_string(dst);
  if (samples.empty()) throw ConfigError("link " + pair + ": no measured sizes");
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const LinkSample& x = samples[i];
    if (!(x.seconds > 0) || !std::isfinite(x.seconds) || !(x.bytes >= 0) || !std::isfinite(x.bytes))
      throw ConfigError("link " + pair + ": a measured size needs bytes >= 0 and a time > 0 (" +
                        std::to_string(x.bytes) + " B, " + std::to_string(x.seconds) + " s)");
    if (i > 0 && x.bytes == samples[i - 1].bytes)
      throw ConfigError("link " + pair + ": size " + std::to_string(x.bytes) + " B measured twice");
  }
}

// One candidate segment of the piecewise fit: points [i, j) of the samples.
struct Segment {
  AlphaBeta line;
  double max_rel = kInf;
  double sse = kInf;
};

}  // namespace

AlphaBeta fit_alpha_beta(const LinkSample* first, const LinkSample* last) {
  if (first == last) throw ConfigError("link fit: no measured sizes");
  // Rows (1/t, x/t) · (α, γ) ≈ 1 with γ = 1/β: every size weighs alike in relative terms.
  double A = 0, B = 0, C = 0, D = 0, E = 0;
  for (const LinkSample* p = first; p != last; ++p) {
    if (!(p->seconds > 0)) throw ConfigError("link fit: a measured time must be > 0");
    const double a = 1.0 / p->seconds, b = p->bytes / p->seconds;
    A += a * a;
    B += a * b;
    C += b * b;
    D += a;
    E += b;
  }
  // The constrained candidates: latency only, bandwidth only (α = 0), both.
  std::vector<AlphaBeta> candidates{from_slope(D / A, 0)};
  if (C > 0) candidates.push_back(from_slope(0, E / C));
  if (C > 0) {
    // The 2x2 normal equations with unit-norm columns (well conditioned whatever the units).
    const double sa = std::sqrt(A), sb = std::sqrt(C), rho = B / (sa * sb);
    const double det = 1 - rho * rho;
    if (det > 1e-12) {
      const double alpha = (D / sa - rho * E / sb) / det / sa;
      const double gamma = (E / sb - rho * D / sa) / det / sb;
      if (alpha >= 0 && gamma >= 0) candidates.push_back(from_slope(alpha, gamma));
    }
  }
  AlphaBeta best = candidates.front();
  double best_sse = relative_sse(first, last, best);
  for (const AlphaBeta& c : candidates)
    if (const double sse = relative_sse(first, last, c); sse < best_sse) {
      best = c;
      best_sse = sse;
    }
  return best;
}

FitError fit_error(const std::vector<LinkSample>& samples, const AlphaBeta& line) {
  FitError e;
  std::vector<double> rel;
  rel.reserve(samples.size());
  for (const LinkSample& x : samples) {
    rel.push_back(std::abs(line.at(x.bytes) - x.seconds) / x.seconds);
    e.max_rel = std::max(e.max_rel, rel.back());
  }
  e.median_rel = median(std::move(rel), 0.0);
  return e;
}

double LinkFit::cost(double bytes) const {
  if (regimes.empty()) return line.at(bytes);
  for (std::size_t r = 0; r + 1 < regimes.size(); ++r) {
    const double hi = regimes[r].hi_bytes, lo = regimes[r + 1].lo_bytes;
    const double boundary = hi > 0 ? std::sqrt(hi * lo) : 0.5 * (hi + lo);
    if (bytes <= boundary) return regimes[r].line.at(bytes);
  }
  return regimes.back().line.at(bytes);
}

FitError regimes_error(const LinkFit& fit) {
  FitError e;
  std::vector<double> rel;
  rel.reserve(fit.samples.size());
  for (const LinkSample& x : fit.samples) {
    rel.push_back(std::abs(fit.rel_error(x)));
    e.max_rel = std::max(e.max_rel, rel.back());
  }
  e.median_rel = median(std::move(rel), 0.0);
  return e;
}

LinkFit fit_link(int src, int dst, std::vector<LinkSample> samples, const FitOptions& opt) {
  std::sort(samples.begin(), samples.end(),
            [](const LinkSample& a, const LinkSample& b) { return a.bytes < b.bytes; });
  check_samples(samples, src, dst);
  if (opt.max_regimes < 1 || opt.min_points < 1)
    throw ConfigError("link fit: needs max_regimes >= 1 and min_points >= 1");
  LinkFit fit;
  fit.src = src;
  fit.dst = dst;
  fit.samples = std::move(samples);
  const std::vector<LinkSample>& x = fit.samples;
  const LinkSample* base = x.data();
  fit.line = fit_alpha_beta(base, base + x.size());
  fit.line_error = fit_error(x, fit.line);

  const int n = static_cast<int>(x.size());
  const int m = std::min(opt.min_points, n);
  // At most one regime per kPointsPerRegime sizes on average (a regime may still hold fewer):
  // with more, the regimes would just interpolate the sizes.
  const int K = std::max(1, std::min({opt.max_regimes, n / m, n / kPointsPerRegime}));
  // Every segment [i, j) of at least m sizes, fitted once.
  std::vector<std::vector<Segment>> seg(static_cast<std::size_t>(n + 1),
                                        std::vector<Segment>(static_cast<std::size_t>(n + 1)));
  for (int i = 0; i < n; ++i)
    for (int j = i + m; j <= n; ++j) {
      Segment& s = seg[i][j];
      s.line = fit_alpha_beta(base + i, base + j);
      s.sse = relative_sse(base + i, base + j, s.line);
      s.max_rel = 0;
      for (int k = i; k < j; ++k)
        s.max_rel =
            std::max(s.max_rel, std::abs(s.line.at(x[k].bytes) - x[k].seconds) / x[k].seconds);
    }
  // Per number of regimes k: the smallest possible largest error (minimax DP), then among the
  // segmentations within it the smallest sum of squared errors (additive DP), kept with its
  // cuts.
  struct Choice {
    double max_rel = kInf, sse = kInf;
    std::vector<int> cuts;  // segment starts, then n
  };
  std::vector<Choice> by_k;
  for (int k = 1; k <= K; ++k) {
    std::vector<std::vector<double>> mm(static_cast<std::size_t>(k + 1),
                                        std::vector<double>(static_cast<std::size_t>(n + 1), kInf));
    mm[0][0] = 0;
    for (int q = 1; q <= k; ++q)
      for (int j = q * m; j <= n; ++j)
        for (int i = (q - 1) * m; i + m <= j; ++i)
          if (mm[q - 1][i] < kInf)
            mm[q][j] = std::min(mm[q][j], std::max(mm[q - 1][i], seg[i][j].max_rel));
    const double tau = mm[k][n];
    if (!(tau < kInf)) continue;
    std::vector<std::vector<double>> ss(static_cast<std::size_t>(k + 1),
                                        std::vector<double>(static_cast<std::size_t>(n + 1), kInf));
    std::vector<std::vector<int>> from(static_cast<std::size_t>(k + 1),
                                       std::vector<int>(static_cast<std::size_t>(n + 1), -1));
    ss[0][0] = 0;
    for (int q = 1; q <= k; ++q)
      for (int j = q * m; j <= n; ++j)
        for (int i = (q - 1) * m; i + m <= j; ++i)
          if (ss[q - 1][i] < kInf && seg[i][j].max_rel <= tau &&
              ss[q - 1][i] + seg[i][j].sse < ss[q][j]) {
            ss[q][j] = ss[q - 1][i] + seg[i][j].sse;
            from[q][j] = i;
          }
    Choice c;
    c.max_rel = tau;
    c.sse = ss[k][n];
    c.cuts.assign(static_cast<std::size_t>(k + 1), n);
    for (int q = k, j = n; q > 0; --q) {
      j = from[q][j];
      c.cuts[static_cast<std::size_t>(q - 1)] = j;
    }
    by_k.push_back(std::move(c));
  }
  // The fewest regimes within the target; else the smallest largest error, and among
  // equal ones (an outlier no segmentation helps) the smallest sum of squares.
  const Choice* pick = nullptr;
  for (const Choice& c : by_k)
    if (c.max_rel <= opt.target_rel) {
      pick = &c;
      break;
    }
  if (pick == nullptr)
    for (const Choice& c : by_k)
      if (pick == nullptr || c.max_rel < pick->max_rel ||
          (c.max_rel == pick->max_rel && c.sse < pick->sse))
        pick = &c;
  if (pick == nullptr || m < opt.min_points) {  // too few sizes for regimes: the line
    fit.regimes = {{x.front().bytes, x.back().bytes, fit.line}};
  } else {
    for (std::size_t q = 0; q + 1 < pick->cuts.size(); ++q) {
      const int i = pick->cuts[q], j = pick->cuts[q + 1];
      fit.regimes.push_back({x[i].bytes, x[j - 1].bytes, seg[i][j].line});
    }
  }
  fit.regimes_error = regimes_error(fit);
  return fit;
}

LinkModel::LinkModel(std::vector<LinkFit> fits) : fits_(std::move(fits)) {
  for (std::size_t i = 0; i < fits_.size(); ++i)
    if (!index_.emplace(std::pair{fits_[i].src, fits_[i].dst}, i).second)
      throw ConfigError("links: two fits for " + std::to_string(fits_[i].src) + "->" +
                        std::to_string(fits_[i].dst));
}

double LinkModel::cost(int src, int dst, double bytes) const {
  const auto it = index_.find({src, dst});
  if (it == index_.end()) return 0.0;
  const LinkFit& f = fits_[it->second];
  return f.cost(bytes) + f.wake_s;
}

std::vector<std::pair<int, int>> pipeline_pairs(const Schedule& s) {
  std::set<std::pair<int, int>> pairs;
  for (int r = 0; r < s.P; ++r)
    for (const Action& a : s.ranks[static_cast<std::size_t>(r)]) {
      const MessageName out = message_out(a, s.routes[a.mb]);
      if (out.none()) continue;
      const int dst = s.chunk_rank[consumer_chunk(out)];
      if (dst != r) pairs.insert({r, dst});
    }
  return {pairs.begin(), pairs.end()};
}

std::vector<std::pair<int, int>> all_pairs(int P) {
  std::vector<std::pair<int, int>> out;
  for (int a = 0; a < P; ++a)
    for (int b = 0; b < P; ++b)
      if (a != b) out.push_back({a, b});
  return out;
}

std::vector<std::pair<int, int>> neighbour_pairs(int P) {
  std::vector<std::pair<int, int>> out;
  for (int a = 0; a < P; ++a)
    for (int b : {a - 1, a + 1})
      if (b >= 0 && b < P) out.push_back({a, b});
  return out;
}

}  // namespace bb
