// What `calibrate` prints per size (bench/cli/calibrate.hpp calibration_report): every pair
// and size with its median, quartiles, fitted time, signed error and regime; each pair's
// largest |error|; the verdict against the 10 % target; the note for more ranks than CPUs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "cli/calibrate.hpp"

namespace bb {
namespace {

// Sizes 8 B .. 64 KiB from an exact α-β line (α 2 µs, β 4 GB/s), the quartiles ±4 %; the
// median of `bad` (a size) is `factor` times the line.
PairSamples measured(int src, int dst, double bad = 0, double factor = 1, double spread = 0.04) {
  PairSamples p{src, dst, {}, {}};
  for (double b = 8; b <= 65536; b *= 2) {
    const double t = (2e-6 + b / 4e9) * (b == bad ? factor : 1);
    p.samples.push_back({b, t});
    p.spread.push_back({t * (1 - spread), t * (1 + spread)});
  }
  return p;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(CalibrationReport, EverySizeWithMedianSpreadFitAndError) {
  const std::vector<PairSamples> m{measured(0, 1), measured(1, 0)};
  const std::vector<LinkFit> fits = fit_links(m);
  const std::string t = calibration_report(m, fits, 2, 2);
  const auto lines = lines_of(t);
  // A comment, the header, 2 pairs x 14 sizes, one line per pair, the verdict.
  ASSERT_EQ(lines.size(), 1u + 1 + 28 + 2 + 1) << t;
  std::istringstream header(lines[1]);
  std::vector<std::string> cols;
  for (std::string c; header >> c;) cols.push_back(c);
  EXPECT_EQ(cols, (std::vector<std::string>{"pair", "bytes", "median_us", "q25_us", "q75_us",
                                            "fit_us", "error", "regime"}))
      << t;
  // 1 KiB: 2 µs + 1024 B / 4 GB/s = 2.256 µs, quartiles ±4 %, fitted exactly.
  bool found = false;
  for (const auto& l : lines)
    if (l.rfind("0->1  1024 ", 0) == 0) {
      found = true;
      std::istringstream row(l);
      std::string pair, bytes, median, q25, q75, fit, error, regime;
      row >> pair >> bytes >> median >> q25 >> q75 >> fit >> error >> regime;
      EXPECT_EQ(median, "2.256");
      EXPECT_EQ(q25, "2.166");
      EXPECT_EQ(q75, "2.346");
      EXPECT_EQ(fit, "2.256");
      EXPECT_TRUE(error == "+0.0%" || error == "-0.0%") << error;
      EXPECT_EQ(regime, "1");
    }
  EXPECT_TRUE(found) << t;
  EXPECT_NE(t.find("0->1: max |error| "), std::string::npos) << t;
  EXPECT_NE(t.find("1->0: max |error| "), std::string::npos) << t;
  EXPECT_NE(t.find("largest |error| over 2 pairs: "), std::string::npos) << t;
  EXPECT_NE(t.find("largest |error| over 2 pairs: 0.0% (0->1 at "), std::string::npos) << t;
  EXPECT_NE(t.find(" B): within 10.0%\n"), std::string::npos) << t;
  EXPECT_EQ(t.find("quartiles span"), std::string::npos) << t;  // ±4 %: narrower than 10 %
  EXPECT_EQ(t.find("note:"), std::string::npos) << t;
}

TEST(CalibrationReport, AMissedSizeIsNamedWithItsErrorAndSpread) {
  // 1->0 at 4 KiB is 1.5x the line and its quartiles span ±20 %: one line cannot hold it and
  // the regimes (two sizes at least) cannot either.
  const std::vector<PairSamples> m{measured(0, 1), measured(1, 0, 4096, 1.5, 0.2)};
  FitOptions one;
  one.max_regimes = 1;
  const std::vector<LinkFit> fits = fit_links(m, one);
  const std::string t = calibration_report(m, fits, 4, 2);
  const double rel =
      std::abs(fits[1].cost(4096) - m[1].samples[9].seconds) / m[1].samples[9].seconds;
  ASSERT_GT(rel, 0.1);
  std::ostringstream want;
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.1f%%", 100 * rel);
  want << "1->0: max |error| " << pct << " at 4096 B (1 regimes; one line: " << pct << ")";
  EXPECT_NE(t.find(want.str()), std::string::npos) << t;
  EXPECT_NE(t.find("its quartiles span 40.0% of the median there"), std::string::npos) << t;
  EXPECT_NE(t.find("(1->0 at 4096 B): NOT within 10.0%"), std::string::npos) << t;
  EXPECT_NE(t.find("note: 4 ranks on 2 CPUs"), std::string::npos) << t;
  // The signed error of the missed size is negative: the fit is below the measured median.
  EXPECT_NE(t.find("1->0  4096 "), std::string::npos) << t;
  for (const auto& l : lines_of(t))
    if (l.rfind("1->0  4096 ", 0) == 0) {
      EXPECT_NE(l.find("  -"), std::string::npos) << l;
    }
}

}  // namespace
}  // namespace bb
