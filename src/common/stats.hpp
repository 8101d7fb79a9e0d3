// Order statistics of a sample, written once for every room that summarises measurements
// (the harness's step medians, the attribution's per-kind costs, link fits, calibrate's
// quartiles, the partitioner's profile, advise's costs).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace bb {

// The median of v: the middle value, or the mean of the two middle values for an even count;
// `if_empty` (NaN unless given) for no values.
inline double median(std::vector<double> v, double if_empty = std::nan("")) {
  if (v.empty()) return if_empty;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The q-quantile (0..1) of v, by linear interpolation between order statistics; v must not be
// empty. (At q = 0.5 it equals median() up to rounding: use median() for the median.)
inline double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double at = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(at);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (at - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace bb
