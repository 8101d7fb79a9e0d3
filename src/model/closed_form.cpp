#include "model/closed_form.hpp"

#include <algorithm>
#include <cmath>

namespace bb {
namespace {

bool close(double a, double b) {
  return std::fabs(a - b) <= 1e-12 * std::max(1.0, std::fabs(a));
}

void set_times(ModelResult& r, const ModelInput& in, double single_bt, double steady_bt) {
  r.applies = true;
  r.single = bubble_metrics(r.t_ideal + single_bt, in.P * r.t_ideal, in.P, r.t_ideal);
  r.steady = bubble_metrics(r.t_ideal + steady_bt, in.P * r.t_ideal, in.P, r.t_ideal);
}

std::vector<double> per_rank(int P, double (*f)(int r, const ModelInput&), const ModelInput& in) {
  std::vector<double> v(P);
  for (int r = 0; r < P; ++r) v[r] = f(r, in);
  return v;
}

ModelResult closed_form_uniform(const ModelInput& in) {
  ModelResult r;
  const int P = in.P, M = in.M, v = in.v;
  const double F = in.t_f, B = in.t_b, W = in.t_w;
  const double FB = in.t_fb < 0 ? F + B + W : in.t_fb;
  r.t_ideal = M * (F + B + W);
  const std::string& s = in.schedule;
  auto refuse = [&](std::string why) {
    r.applies = false;
    r.reason = std::move(why);
    return r;
  };
  if (s == "naive") {
    r.formula = "(P-1)*M*(F+B+W)";
    r.conditions = "always";
    r.source = "micro-batches one at a time: each stage works 1/P of the time";
    set_times(r, in, (P - 1) * M * (F + B + W), (P - 1) * M * (F + B + W));
    r.peak_activations.assign(P, 1.0);
    r.peak_formula = "1";
    return r;
  }
  if (s == "gpipe" || s == "1f1b") {
    r.formula = "(P-1)*(F+B+W)";
    r.conditions = "always (fraction (P-1)/(M+P-1))";
    r.source =
        s == "gpipe" ? "Huang et al. 2019 (GPipe)" : "Narayanan et al. 2019 (PipeDream-Flush)";
    set_times(r, in, (P - 1) * (F + B + W), (P - 1) * (F + B + W));
    if (s == "gpipe") {
      r.peak_activations.assign(P, M);
      r.peak_formula = "M";
    } else {
      r.peak_activations = per_rank(
          P,
          [](int rk, const ModelInput& i) { return static_cast<double>(std::min(i.P - rk, i.M)); },
          in);
      r.peak_formula = "min(P-s, M)";
    }
    return r;
  }
  if (s == "interleaved") {
    r.formula = "(P-1)*(F+B+W)/v";
    r.conditions = "v >= 2 and M a multiple of P (fraction (P-1)/(v*M+P-1))";
    r.source = "Narayanan et al. 2021 (Megatron-LM)";
    r.peak_activations = per_rank(
        P,
        [](int rk, const ModelInput& i) {
          const int warm = (i.P - rk - 1) * 2 + (i.v - 1) * i.P;
          return std::min(warm + 1, i.M * i.v) / static_cast<double>(i.v);
        },
        in);
    r.peak_formula = "min((P-s-1)*2 + (v-1)*P + 1, v*M)/v  (rank 0: P + (P-1)/v)";
    if (v < 2) return refuse("interleaved needs v >= 2");
    if (M % P != 0) return refuse("interleaved's closed form needs M a multiple of P");
    set_times(r, in, (P - 1) * (F + B + W) / v, (P - 1) * (F + B + W) / v);
    return r;
  }
  if (s == "zb-h1" || s == "zb-h2") {
    const bool h1 = s == "zb-h1";
    r.formula = h1 ? "(P-1)*(F+B-W)" : "(P-1)*(F+B-2W), single step (P-1)*F";
    r.conditions = h1 ? "F = B = W (the schedule's order is built for equal passes) and M >= P"
                      : "F = B = W and M >= 2P-1 (fewer micro-batches cannot fill the ramp)";
    r.source = "Qi et al. 2024 (Zero Bubble PP), Table 2; steady state for ZB-H2";
    r.peak_activations.assign(P, h1 ? std::min(P, M) : std::min(2 * P - 1, M));
    r.peak_formula = h1 ? "min(P, M) (1F1B's peak)" : "min(2P-1, M)";
    if (!(close(F, B) && close(B, W))) return refuse(s + "'s closed form needs F = B = W");
    // Below P micro-batches no W is left to fill the last ranks' drain: the bubble is larger.
    if (h1 && M < P) return refuse("zb-h1's closed form needs M >= P");
    if (!h1 && M < 2 * P - 1) return refuse("zb-h2's closed form needs M >= 2P-1");
    if (h1)
      set_times(r, in, (P - 1) * (F + B - W), (P - 1) * (F + B - W));
    else
      set_times(r, in, (P - 1) * F, std::max(0.0, (P - 1) * (F + B - 2 * W)));
    return r;
  }
  if (s == "zb-v") {
    r.formula = "0 in the steady state; (P-1)*F/2 for a single step (the ramp)";
    r.conditions = "F = B = W and M >= 2P-1";
    r.source = "Qi et al. 2024 (ZB-V); ramp derived here";
    r.peak_activations.assign(P, M >= 2 * P - 1 ? static_cast<double>(P) : -1.0);
    r.peak_formula = "P (as 1F1B), when M >= 2P-1";
    if (M < 2 * P - 1) {
      r.peak_activations.clear();
      return refuse("zb-v's closed form needs M >= 2P-1");
    }
    if (!(close(F, B) && close(B, W))) return refuse("zb-v's closed form needs F = B = W");
    set_times(r, in, (P - 1) * F / 2, 0.0);
    return r;
  }
  if (s == "dualpipe" || s == "dualpipev") {
    const bool vshape = s == "dualpipev";
    // DeepSeek-V3 Table 2 writes (PP/2-1)(F&B+B-3W) with B the full backward; here B is the
    // input-gradient pass, so the full backward is B+W. DualPipeV: PP/2 -> P devices, and
    // each chunk is half a stage, hence the /2.
    r.formula = vshape ? "(P-1)*(FB+B+W-3W)/2" : "(P/2-1)*(FB+B+W-3W)";
    r.conditions = "F = B = W and no overlap gain (FB = F+B+W); P even for dualpipe; M >= 2P";
    r.source = "DeepSeek-V3 report, Table 2; DualPipe README";
    r.peak_activations.assign(P, vshape ? P + 0.5 : P + 1.0);
    r.peak_formula = vshape ? "2P+1 chunks = P+1/2 stages" : "P+1";
    if (M < 2 * P) return refuse(s + "'s closed form needs M >= 2P");
    if (!(close(F, B) && close(B, W))) return refuse(s + "'s closed form needs F = B = W");
    if (!close(FB, F + B + W))
      return refuse(s +
                    "'s closed form is exact only without overlap gain (FB = F+B+W); "
                    "with a gain the ranks' work differs and the form gives T minus the "
                    "least-busy rank's work");
    const double bt =
        vshape ? (P - 1) * (FB + B + W - 3 * W) / 2 : (P / 2 - 1) * (FB + B + W - 3 * W);
    set_times(r, in, bt, bt);
    return r;
  }
  return refuse("no closed form for schedule '" + s + "'");
}

}  // namespace

ModelResult closed_form(const ModelInput& in) {
  ModelResult r = closed_form_uniform(in);
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
