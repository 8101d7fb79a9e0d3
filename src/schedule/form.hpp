// A schedule's published closed form (design §4), as its file states it beside its generator:
// what it is given (ModelInput), what it fills (ModelResult), and the pieces the forms share.
// The forms assume uniform chunks and zero communication cost, and carry the conditions under
// which they are exact; outside them `applies` stays false and `reason` says why, rather than a
// wrong number being printed. model/closed_form.hpp looks a schedule's form up by name and adds
// the conditions every form shares; tests/unit/test_core_matrix.cpp checks every form against
// the simulator.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/bubble_metrics.hpp"

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

// Fills part of a result for one configuration (r.t_ideal set): the bubble times (form::times)
// or a refusal (form::refuse); or the peak activations per rank.
using ModelForm = void (*)(const ModelInput&, ModelResult&);

// A schedule's closed form and peak formula: the texts as published, and the functions that
// give the numbers (null where none is published).
struct PublishedForm {
  std::string_view formula;     // bubble_time
  std::string_view conditions;  // when it is exact
  std::string_view source;
  ModelForm bubble = nullptr;
  std::string_view peak_formula;
  ModelForm peak = nullptr;  // leaves peak_activations empty where unknown
};

namespace form {

// a == b up to rounding.
bool close(double a, double b);
// F = B = W.
bool equal_passes(const ModelInput& in);
// F + B + W.
double pass_sum(const ModelInput& in);
// The form applies, with these bubble times (over T_ideal) of a single step and of the steady
// state.
void times(const ModelInput& in, ModelResult& r, double single_bubble, double steady_bubble);
// The form does not apply here, and why.
void refuse(ModelResult& r, std::string why);
// f(rank) for every rank.
std::vector<double> per_rank(int P, double (*f)(int rank, const ModelInput&), const ModelInput& in);

// The flush schedules' form (GPipe, 1F1B): (P-1)(F+B+W) in both views.
void flush(const ModelInput& in, ModelResult& r);
// The looped v-chunk flush's (interleaved, looped-bfs), in both views: rounds of
// K = M/max(1, M/P) micro-batches through v chunks per rank,
// ((P-1) + max(0, P-M)*(v-1))*(F+B+W)/v: below P each later chunk's round comes back late.
void looped_flush(const ModelInput& in, ModelResult& r);
constexpr PublishedForm flush_form(std::string_view source, std::string_view peak_formula,
                                   ModelForm peak) {
  return {"(P-1)*(F+B+W)", "always (fraction (P-1)/(M+P-1))", source, flush, peak_formula, peak};
}

// ZB-H1's and ZB-H2's conditions: F = B = W and M >= min_m (`min_m_text` in the reason).
// False, refused, when one fails.
bool zero_bubble_conditions(const ModelInput& in, ModelResult& r, int min_m,
                            std::string_view min_m_text);
// Their form (Qi et al. 2024, Table 2).
constexpr PublishedForm zero_bubble_form(std::string_view formula, std::string_view conditions,
                                         ModelForm bubble, std::string_view peak_formula,
                                         ModelForm peak) {
  return {formula, conditions,   "Qi et al. 2024 (Zero Bubble PP), Table 2; steady state for ZB-H2",
          bubble,  peak_formula, peak};
}

// DualPipe's and DualPipeV's bubble (DeepSeek-V3 Table 2), `vshape` for DualPipeV, and their
// form.
void dual(const ModelInput& in, ModelResult& r, bool vshape);
constexpr PublishedForm dual_form(std::string_view formula, ModelForm bubble,
                                  std::string_view peak_formula, ModelForm peak) {
  return {formula,
          "F = B = W and no overlap gain (FB = F+B+W); P even for dualpipe; M >= 2P",
          "DeepSeek-V3 report, Table 2; DualPipe README",
          bubble,
          peak_formula,
          peak};
}

}  // namespace form
}  // namespace bb
