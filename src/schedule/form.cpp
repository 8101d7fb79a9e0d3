#include "schedule/form.hpp"

#include <algorithm>
#include <cmath>

namespace bb::form {

bool close(double a, double b) {
  return std::fabs(a - b) <= 1e-12 * std::max(1.0, std::fabs(a));
}

bool equal_passes(const ModelInput& in) {
  return close(in.t_f, in.t_b) && close(in.t_b, in.t_w);
}

double pass_sum(const ModelInput& in) {
  return in.t_f + in.t_b + in.t_w;
}

void times(const ModelInput& in, ModelResult& r, double single_bubble, double steady_bubble) {
  r.applies = true;
  r.single = bubble_metrics(r.t_ideal + single_bubble, in.P * r.t_ideal, in.P, r.t_ideal);
  r.steady = bubble_metrics(r.t_ideal + steady_bubble, in.P * r.t_ideal, in.P, r.t_ideal);
}

void refuse(ModelResult& r, std::string why) {
  r.applies = false;
  r.reason = std::move(why);
}

std::vector<double> per_rank(int P, double (*f)(int rank, const ModelInput&),
                             const ModelInput& in) {
  std::vector<double> v(P);
  for (int r = 0; r < P; ++r) v[r] = f(r, in);
  return v;
}

void flush(const ModelInput& in, ModelResult& r) {
  times(in, r, (in.P - 1) * pass_sum(in), (in.P - 1) * pass_sum(in));
}

void looped_flush(const ModelInput& in, ModelResult& r) {
  const double bt = ((in.P - 1) + std::max(0, in.P - in.M) * (in.v - 1)) * pass_sum(in) / in.v;
  times(in, r, bt, bt);
}

bool zero_bubble_conditions(const ModelInput& in, ModelResult& r, int min_m,
                            std::string_view min_m_text) {
  if (!equal_passes(in)) {
    refuse(r, in.schedule + "'s closed form needs F = B = W");
    return false;
  }
  if (in.M < min_m) {
    refuse(r, in.schedule + "'s closed form needs M >= " + std::string(min_m_text));
    return false;
  }
  return true;
}

// DeepSeek-V3 Table 2 writes (PP/2-1)(F&B+B-3W) with B the full backward; here B is the
// input-gradient pass, so the full backward is B+W. DualPipeV: PP/2 -> P devices, and each
// chunk is half a stage, hence the /2.
void dual(const ModelInput& in, ModelResult& r, bool vshape) {
  const int P = in.P;
  const double B = in.t_b, W = in.t_w;
  const double FB = in.t_fb < 0 ? pass_sum(in) : in.t_fb;
  const std::string& s = in.schedule;
  if (in.M < 2 * P) return refuse(r, s + "'s closed form needs M >= 2P");
  if (!equal_passes(in)) return refuse(r, s + "'s closed form needs F = B = W");
  if (!close(FB, pass_sum(in)))
    return refuse(r, s + "'s closed form is exact only without overlap gain (FB = F+B+W); "
                         "with a gain the ranks' work differs and the form gives T minus the "
                         "least-busy rank's work");
  const double bt =
      vshape ? (P - 1) * (FB + B + W - 3 * W) / 2 : (P / 2 - 1) * (FB + B + W - 3 * W);
  times(in, r, bt, bt);
}

}  // namespace bb::form
