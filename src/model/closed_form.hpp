// Closed-form bubble models (design §4) for uniform chunks and zero communication cost, in
// both views: a single step on its own (makespan) and back-to-back steps (period). Each form
// carries the conditions under which it is exact; outside them `applies` is false and
// `reason` says why, rather than a wrong number being printed. The simulator is the
// reference: tests/unit/test_core_matrix.cpp checks every form against it.
#pragma once

#include <string>
#include <vector>

#include "sim/metrics.hpp"

namespace bb {

struct ModelInput {
  std::string schedule;
  int P = 1, M = 1, v = 1;
  double t_f = 1, t_b = 2, t_w = 0;  // one stage, one micro-batch
  double t_fb = -1;                  // overlapped F&B pair of a stage; < 0: F+B+W
  // False when the chunks' costs differ (per-chunk lists of unequal values): the forms assume
  // uniform stages, so none applies (`reason` says so).
  bool uniform_stages = true;
  // Time of one point-to-point message (latency + bytes/bandwidth). The forms assume 0; with
  // a link time none applies (`reason` says so).
  double message_time = 0;
};

struct ModelResult {
  bool applies = false;
  std::string reason;      // why not, when !applies
  std::string formula;     // bubble_time, as published
  std::string conditions;  // when the formula is exact
  std::string source;
  double t_ideal = 0;    // M*(F+B+W)
  BubbleMetrics single;  // one step
  BubbleMetrics steady;  // steady state
  // Peak live activations per rank in micro-batch-stage units; empty when unknown.
  std::vector<double> peak_activations;
  std::string peak_formula;
};

ModelResult closed_form(const ModelInput& in);

}  // namespace bb
