// The bubble metrics of design §4, from a makespan (or period) and the ranks' busy time.
#pragma once

namespace bb {

struct BubbleMetrics {
  double span = 0;             // makespan T (single step) or period (steady state)
  double idle_total = 0;       // P*span - sum of busy
  double bubble_fraction = 0;  // idle_total / (P*span)
  double bubble_ratio = 0;     // (span - T_ideal) / T_ideal
  double bubble_time = 0;      // span - T_ideal
};

inline BubbleMetrics bubble_metrics(double span, double busy_sum, int P, double t_ideal) {
  BubbleMetrics m;
  m.span = span;
  m.idle_total = P * span - busy_sum;
  m.bubble_fraction = span > 0 ? m.idle_total / (P * span) : 0;
  m.bubble_time = span - t_ideal;
  m.bubble_ratio = t_ideal > 0 ? m.bubble_time / t_ideal : 0;
  return m;
}

}  // namespace bb
