// Closed-form bubble models (design §4) for uniform chunks and zero communication cost, in
// both views: a single step on its own (makespan) and back-to-back steps (period). Each form
// carries the conditions under which it is exact; outside them `applies` is false and
// `reason` says why, rather than a wrong number being printed. The simulator is the
// reference: tests/unit/test_core_matrix.cpp checks every form against it. Each schedule's
// ScheduleInfo (schedule/schedule_info.hpp) points at its form and peak formula below.
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

// The form of in.schedule (through its ScheduleInfo), then the conditions every form shares
// (uniform stages, no message time). A name without a form: applies false, with a reason.
ModelResult closed_form(const ModelInput& in);

// One per schedule, for ScheduleInfo: `X` fills formula, conditions, source and the times (or
// leaves applies false with a reason); `X_peak` fills peak_activations and peak_formula. Both
// expect r.t_ideal set (closed_form does it).
namespace forms {
void naive(const ModelInput& in, ModelResult& r);
void naive_peak(const ModelInput& in, ModelResult& r);
void gpipe(const ModelInput& in, ModelResult& r);
void gpipe_peak(const ModelInput& in, ModelResult& r);
void one_f_one_b(const ModelInput& in, ModelResult& r);
void one_f_one_b_peak(const ModelInput& in, ModelResult& r);
void interleaved(const ModelInput& in, ModelResult& r);
void interleaved_peak(const ModelInput& in, ModelResult& r);
void zb_h1(const ModelInput& in, ModelResult& r);
void zb_h1_peak(const ModelInput& in, ModelResult& r);
void zb_h2(const ModelInput& in, ModelResult& r);
void zb_h2_peak(const ModelInput& in, ModelResult& r);
void zb_v(const ModelInput& in, ModelResult& r);
void zb_v_peak(const ModelInput& in, ModelResult& r);
void dualpipe(const ModelInput& in, ModelResult& r);
void dualpipe_peak(const ModelInput& in, ModelResult& r);
void dualpipev(const ModelInput& in, ModelResult& r);
void dualpipev_peak(const ModelInput& in, ModelResult& r);
void zb_auto(const ModelInput& in, ModelResult& r);
void zb_auto_peak(const ModelInput& in, ModelResult& r);
}  // namespace forms

}  // namespace bb
