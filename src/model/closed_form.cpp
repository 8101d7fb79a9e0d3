#include "model/closed_form.hpp"

#include <algorithm>
#include <cmath>

#include "schedule/schedule_info.hpp"

namespace bb {
namespace {

bool close(double a, double b) {
  return std::fabs(a - b) <= 1e-12 * std::max(1.0, std::fabs(a));
}

bool equal_passes(const ModelInput& in) {
  return close(in.t_f, in.t_b) && close(in.t_b, in.t_w);
}

double pass_sum(const ModelInput& in) {
  return in.t_f + in.t_b + in.t_w;
}

void set_times(ModelResult& r, const ModelInput& in, double single_bt, double steady_bt) {
  r.applies = true;
  r.single = bubble_metrics(r.t_ideal + single_bt, in.P * r.t_ideal, in.P, r.t_ideal);
  r.steady = bubble_metrics(r.t_ideal + steady_bt, in.P * r.t_ideal, in.P, r.t_ideal);
}

// A form's text: its formula, when it applies, and where it comes from.
void describe(ModelResult& r, const char* formula, const char* conditions, const char* source) {
  r.formula = formula;
  r.conditions = conditions;
  r.source = source;
}

void refuse(ModelResult& r, std::string why) {
  r.applies = false;
  r.reason = std::move(why);
}

std::vector<double> per_rank(int P, double (*f)(int r, const ModelInput&), const ModelInput& in) {
  std::vector<double> v(P);
  for (int r = 0; r < P; ++r) v[r] = f(r, in);
  return v;
}

// GPipe and 1F1B share the flush form; only the source differs.
void flush(const ModelInput& in, ModelResult& r, const char* source) {
  describe(r, "(P-1)*(F+B+W)", "always (fraction (P-1)/(M+P-1))", source);
  set_times(r, in, (in.P - 1) * pass_sum(in), (in.P - 1) * pass_sum(in));
}

// DeepSeek-V3 Table 2 writes (PP/2-1)(F&B+B-3W) with B the full backward; here B is the
// input-gradient pass, so the full backward is B+W. DualPipeV: PP/2 -> P devices, and each
// chunk is half a stage, hence the /2.
void dual(const ModelInput& in, ModelResult& r, bool vshape) {
  const int P = in.P;
  const double B = in.t_b, W = in.t_w;
  const double FB = in.t_fb < 0 ? pass_sum(in) : in.t_fb;
  const std::string s = vshape ? "dualpipev" : "dualpipe";
  describe(r, vshape ? "(P-1)*(FB+B+W-3W)/2" : "(P/2-1)*(FB+B+W-3W)",
           "F = B = W and no overlap gain (FB = F+B+W); P even for dualpipe; M >= 2P",
           "DeepSeek-V3 report, Table 2; DualPipe README");
  if (in.M < 2 * P) return refuse(r, s + "'s closed form needs M >= 2P");
  if (!equal_passes(in)) return refuse(r, s + "'s closed form needs F = B = W");
  if (!close(FB, pass_sum(in)))
    return refuse(r, s + "'s closed form is exact only without overlap gain (FB = F+B+W); "
                         "with a gain the ranks' work differs and the form gives T minus the "
                         "least-busy rank's work");
  const double bt =
      vshape ? (P - 1) * (FB + B + W - 3 * W) / 2 : (P / 2 - 1) * (FB + B + W - 3 * W);
  set_times(r, in, bt, bt);
}

// ZB-H1 and ZB-H2 (Qi et al. 2024, Table 2): the form's text, then the conditions both have,
// F = B = W and M >= min_m (`min_m_text` in the reason). False, refused, when one fails.
bool zero_bubble_form(const ModelInput& in, ModelResult& r, const std::string& name,
                      const char* formula, const char* conditions, int min_m,
                      const char* min_m_text) {
  describe(r, formula, conditions,
           "Qi et al. 2024 (Zero Bubble PP), Table 2; steady state for ZB-H2");
  if (!equal_passes(in)) {
    refuse(r, name + "'s closed form needs F = B = W");
    return false;
  }
  if (in.M < min_m) {
    refuse(r, name + "'s closed form needs M >= " + min_m_text);
    return false;
  }
  return true;
}

}  // namespace

namespace forms {

void naive(const ModelInput& in, ModelResult& r) {
  describe(r, "(P-1)*M*(F+B+W)", "always",
           "micro-batches one at a time: each stage works 1/P of the time");
  const double bt = (in.P - 1) * in.M * pass_sum(in);
  set_times(r, in, bt, bt);
}
void naive_peak(const ModelInput& in, ModelResult& r) {
  r.peak_activations.assign(in.P, 1.0);
  r.peak_formula = std::string("1");  // (GCC 12 -Wrestrict false positive on = "1")
}

void gpipe(const ModelInput& in, ModelResult& r) {
  flush(in, r, "Huang et al. 2019 (GPipe)");
}
void gpipe_peak(const ModelInput& in, ModelResult& r) {
  r.peak_activations.assign(in.P, in.M);
  r.peak_formula = std::string("M");
}

void one_f_one_b(const ModelInput& in, ModelResult& r) {
  flush(in, r, "Narayanan et al. 2019 (PipeDream-Flush)");
}
void one_f_one_b_peak(const ModelInput& in, ModelResult& r) {
  r.peak_activations = per_rank(
      in.P,
      [](int rk, const ModelInput& i) { return static_cast<double>(std::min(i.P - rk, i.M)); }, in);
  r.peak_formula = "min(P-s, M)";
}

// Rounds of K = M/max(1, M/P) micro-batches (PyTorch's): for M >= P (K >= P) Megatron's
// (P-1)(F+B+W)/v; below P the first chunk's round is short of a full pipeline and each of
// the other v-1 chunks waits (P-M)(F+B+W)/v more (established by the simulator, both views).
void interleaved(const ModelInput& in, ModelResult& r) {
  describe(r, "((P-1) + max(0, P-M)*(v-1))*(F+B+W)/v",
           "v >= 2, M in max(1, M/P) equal rounds (M >= P: fraction (P-1)/(v*M+P-1))",
           "Narayanan et al. 2021 (Megatron-LM); rounds as PyTorch; M < P term derived here");
  if (in.v < 2) return refuse(r, "interleaved needs v >= 2");
  if (in.P < 2 || in.M % std::max(1, in.M / in.P) != 0)
    return refuse(r, "interleaved's closed form needs P >= 2 and M in max(1, M/P) equal rounds");
  const double bt = ((in.P - 1) + std::max(0, in.P - in.M) * (in.v - 1)) * pass_sum(in) / in.v;
  set_times(r, in, bt, bt);
}
void interleaved_peak(const ModelInput& in, ModelResult& r) {
  if (in.P < 2) return;
  r.peak_activations = per_rank(
      in.P,
      [](int rk, const ModelInput& i) {
        const int warm = (i.P - rk - 1) * 2 + (i.v - 1) * interleaved_round_size(i.P, i.M);
        return std::min(warm + 1, i.M * i.v) / static_cast<double>(i.v);
      },
      in);
  r.peak_formula =
      "min((P-s-1)*2 + (v-1)*K + 1, v*M)/v, K = M/max(1, M/P)  (rank 0, M%P=0: P + (P-1)/v)";
}

void zb_h1(const ModelInput& in, ModelResult& r) {
  // Below P micro-batches no W is left to fill the last ranks' drain: the bubble is larger.
  if (!zero_bubble_form(in, r, "zb-h1", "(P-1)*(F+B-W)",
                        "F = B = W (the schedule's order is built for equal passes) and M >= P",
                        in.P, "P"))
    return;
  const double bt = (in.P - 1) * (in.t_f + in.t_b - in.t_w);
  set_times(r, in, bt, bt);
}
void zb_h1_peak(const ModelInput& in, ModelResult& r) {
  r.peak_activations.assign(in.P, std::min(in.P, in.M));
  r.peak_formula = "min(P, M) (1F1B's peak)";
}

void zb_h2(const ModelInput& in, ModelResult& r) {
  if (!zero_bubble_form(in, r, "zb-h2", "(P-1)*(F+B-2W), single step (P-1)*F",
                        "F = B = W and M >= 2P-1 (fewer micro-batches cannot fill the ramp)",
                        2 * in.P - 1, "2P-1"))
    return;
  set_times(r, in, (in.P - 1) * in.t_f, std::max(0.0, (in.P - 1) * (in.t_f + in.t_b - 2 * in.t_w)));
}
void zb_h2_peak(const ModelInput& in, ModelResult& r) {
  r.peak_activations.assign(in.P, std::min(2 * in.P - 1, in.M));
  r.peak_formula = "min(2P-1, M)";
}

void zb_v(const ModelInput& in, ModelResult& r) {
  describe(r, "0 in the steady state; (P-1)*F/2 for a single step (the ramp)",
           "F = B = W and M >= 2P-1", "Qi et al. 2024 (ZB-V); ramp derived here");
  if (in.M < 2 * in.P - 1) return refuse(r, "zb-v's closed form needs M >= 2P-1");
  if (!equal_passes(in)) return refuse(r, "zb-v's closed form needs F = B = W");
  set_times(r, in, (in.P - 1) * in.t_f / 2, 0.0);
}
void zb_v_peak(const ModelInput& in, ModelResult& r) {
  // Known only once the ramp fills (M >= 2P-1): otherwise none.
  if (in.M >= 2 * in.P - 1) r.peak_activations.assign(in.P, static_cast<double>(in.P));
  r.peak_formula = "P (as 1F1B), when M >= 2P-1";
}

void dualpipe(const ModelInput& in, ModelResult& r) {
  dual(in, r, false);
}
void dualpipe_peak(const ModelInput& in, ModelResult& r) {
  r.peak_activations.assign(in.P, in.P + 1.0);
  r.peak_formula = "P+1";
}

void dualpipev(const ModelInput& in, ModelResult& r) {
  dual(in, r, true);
}
void dualpipev_peak(const ModelInput& in, ModelResult& r) {
  r.peak_activations.assign(in.P, in.P + 0.5);
  r.peak_formula = "2P+1 chunks = P+1/2 stages";
}

// zb-auto's order is chosen by simulating candidates with the given costs: no form; its peak
// is at most the memory limit (the generator's input, not the model's).
void zb_auto(const ModelInput&, ModelResult& r) {
  r.formula = "none (the order is searched with the simulator)";
  r.conditions = "never";
  r.source = "Qi et al. 2024 (Zero Bubble PP), automatic scheduler; heuristic search here";
  refuse(r, "zb-auto has no closed form: its order depends on the costs (simulate it)");
}
void zb_auto_peak(const ModelInput&, ModelResult& r) {
  r.peak_formula = "<= the memory limit (--mem-limit, default P)";
}

}  // namespace forms

ModelResult closed_form(const ModelInput& in) {
  ModelResult r;
  r.t_ideal = in.M * pass_sum(in);
  const ScheduleInfo* info = find_schedule(in.schedule);
  if (info == nullptr) {
    refuse(r, "no closed form for schedule '" + in.schedule + "'");
    return r;
  }
  info->peak(in, r);
  info->closed_form(in, r);
  if (r.applies && !in.uniform_stages) {
    r.applies = false;
    r.reason = "per-chunk costs are not all equal; the closed forms assume uniform stages";
  } else if (r.applies && in.message_time != 0) {
    r.applies = false;
    r.reason = "each message takes " + std::to_string(in.message_time) +
               " (--latency/--bandwidth); the closed forms assume zero communication cost";
  }
  return r;
}

}  // namespace bb
