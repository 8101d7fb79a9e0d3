#include "runtime/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace bb {

const LayerGrads* GradientSet::find(int layer) const {
  for (const LayerGrads& g : layers)
    if (g.layer == layer) return &g;
  return nullptr;
}

GradientSet run_reference(Backend& be, const ReferenceConfig& c,
                          const std::vector<int>& keep_layers) {
  if (c.hidden <= 0 || c.rows <= 0 || c.num_layers <= 0 || c.num_microbatches <= 0)
    throw std::invalid_argument("run_reference: sizes must be positive");
  const int b = c.rows, h = c.hidden, n = c.num_layers;
  const std::size_t act = static_cast<std::size_t>(b) * h;
  const std::size_t wsize = 4 * static_cast<std::size_t>(h) * h;

  std::vector<Buffer> w1, w2, dw1, dw2;
  for (int l = 0; l < n; ++l) {
    w1.push_back(be.allocate(wsize));
    w2.push_back(be.allocate(wsize));
    dw1.push_back(be.allocate(wsize));
    dw2.push_back(be.allocate(wsize));
    init_layer_params(be, c.seed, l, h, w1[l].data(), w2[l].data());
    be.fill(dw1[l].data(), 0.0f, wsize);
    be.fill(dw2[l].data(), 0.0f, wsize);
  }
  // X[l] is layer l's input, X[n] the model's output; activations in the pipeline's dtype.
  const Dtype dt = c.dtype;
  std::vector<Buffer> x, z, a;
  for (int l = 0; l <= n; ++l) x.push_back(be.allocate(act, dt));
  for (int l = 0; l < n; ++l) {
    z.push_back(be.allocate(4 * act, dt));
    a.push_back(be.allocate(4 * act, dt));
  }
  Buffer target = be.allocate(act, dt), g = be.allocate(act, dt), g_prev = be.allocate(act, dt);
  Buffer da = be.allocate(4 * act, dt), dz = be.allocate(4 * act, dt), loss = be.allocate(1);
  be.fill(loss.data(), 0.0f, 1);
  const float scale = static_cast<float>(
      1.0 / (static_cast<double>(c.num_microbatches) * static_cast<double>(act)));

  for (int mb = 0; mb < c.num_microbatches; ++mb) {
    make_input(be, c.seed, mb, b, h, x[0].ptr());
    for (int l = 0; l < n; ++l) {
      be.gemm(kNoTrans, kNoTrans, b, 4 * h, h, 1.0f, x[l].ptr(), h, w1[l].data(), 4 * h, 0.0f,
              z[l].ptr(), 4 * h);
      be.gelu(z[l].ptr(), a[l].ptr(), 4 * act);
      be.copy(x[l].ptr(), x[l + 1].ptr(), act);
      be.gemm(kNoTrans, kNoTrans, b, h, 4 * h, 1.0f, a[l].ptr(), 4 * h, w2[l].data(), h, 1.0f,
              x[l + 1].ptr(), h);
    }
    make_target(be, c.seed, mb, b, h, target.ptr());
    be.mse_loss(x[n].ptr(), target.ptr(), g.ptr(), act, scale, loss.data());
    for (int l = n - 1; l >= 0; --l) {
      // g = dL/dY of layer l; g_prev becomes dL/dX.
      be.gemm(kNoTrans, kTrans, b, 4 * h, h, 1.0f, g.ptr(), h, w2[l].data(), h, 0.0f, da.ptr(),
              4 * h);
      be.gelu_backward(z[l].ptr(), da.ptr(), dz.ptr(), 4 * act);
      be.copy(g.ptr(), g_prev.ptr(), act);
      be.gemm(kNoTrans, kTrans, b, h, 4 * h, 1.0f, dz.ptr(), 4 * h, w1[l].data(), 4 * h, 1.0f,
              g_prev.ptr(), h);
      be.gemm(kTrans, kNoTrans, 4 * h, h, b, 1.0f, a[l].ptr(), 4 * h, g.ptr(), h, 1.0f,
              dw2[l].data(), h);
      be.gemm(kTrans, kNoTrans, h, 4 * h, b, 1.0f, x[l].ptr(), h, dz.ptr(), 4 * h, 1.0f,
              dw1[l].data(), 4 * h);
      std::swap(g, g_prev);
    }
  }

  GradientSet out;
  float loss_host = 0.0f;
  be.to_host(loss.data(), &loss_host, 1);
  out.loss = loss_host;
  for (int l = 0; l < n; ++l) {
    if (!keep_layers.empty() &&
        std::find(keep_layers.begin(), keep_layers.end(), l) == keep_layers.end())
      continue;
    out.layers.push_back({l, be.download(dw1[l].data(), wsize), be.download(dw2[l].data(), wsize)});
  }
  return out;
}

GradientSet run_transformer_reference(Backend& be, const TransformerConfig& model, int num_layers,
                                      int num_microbatches, const std::vector<int>& keep_layers) {
  if (num_layers <= 0 || num_microbatches <= 0)
    throw std::invalid_argument("run_transformer_reference: sizes must be positive");
  TransformerConfig c = model;
  c.first_layer = 0;
  c.num_layers = num_layers;
  c.recompute = false;
  c.synthetic.reset();
  c.embed = c.head = c.vocab > 0;  // the whole model: both ends
  TransformerStage whole(be, c);
  Buffer x = be.allocate(whole.activation_count(), c.dtype);
  Buffer y = be.allocate(whole.activation_count(), c.dtype);
  for (int mb = 0; mb < num_microbatches; ++mb) {
    whole.make_input(mb, x.ptr());
    whole.forward(mb, x.ptr(), y.ptr());
    whole.loss(mb, num_microbatches, y.ptr(), y.ptr());
    whole.backward_full(mb, y.ptr(), nullptr);
  }
  GradientSet all;
  all.loss = whole.loss_sum();
  append_gradients(whole, all);
  GradientSet out;
  out.loss = all.loss;
  for (LayerGrads& g : all.layers)
    if (keep_layers.empty() ||
        std::find(keep_layers.begin(), keep_layers.end(), g.layer) != keep_layers.end())
      out.layers.push_back(std::move(g));
  return out;
}

void append_gradients(const ChunkModel& chunk, GradientSet& out) {
  if (chunk.grads() == nullptr) throw std::logic_error("append_gradients: synthetic stage");
  const std::size_t per_layer = chunk.layer_param_count(), split = chunk.gradient_split();
  for (int i = 0; i < chunk.num_layers(); ++i) {
    const float* g = chunk.grads() + per_layer * static_cast<std::size_t>(i);
    out.layers.push_back({chunk.first_layer() + i, chunk.backend().download(g, split),
                          chunk.backend().download(g + split, per_layer - split)});
  }
  for (const ChunkModel::EndTensors& e : chunk.end_tensors()) {
    const float* g = chunk.grads() + e.offset;
    out.layers.push_back({e.layer, chunk.backend().download(g, e.split),
                          chunk.backend().download(g + e.split, e.count - e.split)});
  }
}

double check_tolerance(Dtype dtype) {
  return dtype == Dtype::kBF16 ? 1e-3 : 1e-5;
}

double relative_error(const std::vector<float>& ref, const std::vector<float>& got) {
  if (ref.size() != got.size()) return std::numeric_limits<double>::infinity();
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double r = ref[i], d = r - static_cast<double>(got[i]);
    diff += d * d;
    norm += r * r;
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

CompareResult compare(const GradientSet& ref, const GradientSet& got, double tolerance) {
  CompareResult r;
  auto consider = [&](double err, const std::string& what) {
    if (std::isnan(err)) err = std::numeric_limits<double>::infinity();
    if (r.worst.empty() || err > r.max_rel_error) {
      r.max_rel_error = err;
      r.worst = what;
    }
  };
  if (ref.loss && got.loss)
    consider(std::abs(*ref.loss - *got.loss) / std::max(std::abs(*ref.loss), 1e-30), "loss");
  for (const LayerGrads& g : got.layers) {
    const LayerGrads* want = ref.find(g.layer);
    if (want == nullptr) {
      r.pass = false;
      r.max_rel_error = std::numeric_limits<double>::infinity();
      r.worst = "layer " + std::to_string(g.layer);
      r.message = "check FAILED: layer " + std::to_string(g.layer) + " is not in the reference";
      return r;
    }
    consider(relative_error(want->dw1, g.dw1), "layer " + std::to_string(g.layer) + " dW1");
    consider(relative_error(want->dw2, g.dw2), "layer " + std::to_string(g.layer) + " dW2");
  }
  r.pass = !r.worst.empty() && r.max_rel_error <= tolerance;
  char line[160];
  if (r.worst.empty())
    std::snprintf(line, sizeof line, "check FAILED: nothing to compare");
  else
    std::snprintf(line, sizeof line, "check %s: max relative error %.3g (%s), tolerance %.3g",
                  r.pass ? "passed" : "FAILED", r.max_rel_error, r.worst.c_str(), tolerance);
  r.message = line;
  return r;
}

}  // namespace bb
