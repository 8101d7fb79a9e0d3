#include "runtime/stage.hpp"

#include <cmath>
#include <stdexcept>

namespace bb {

void init_layer_params(Backend& backend, std::uint64_t seed, int layer, int hidden, float* w1,
                       float* w2) {
  const std::size_t h = static_cast<std::size_t>(hidden);
  const auto id = static_cast<std::uint64_t>(layer);
  backend.seeded_uniform(w1, h * 4 * h, seed, seed_stream(SeedKind::kW1, id),
                         static_cast<float>(1.0 / std::sqrt(static_cast<double>(h))));
  backend.seeded_uniform(w2, h * 4 * h, seed, seed_stream(SeedKind::kW2, id),
                         static_cast<float>(1.0 / std::sqrt(4.0 * static_cast<double>(h))));
}

void make_input(Backend& backend, std::uint64_t seed, int mb, int rows, int hidden, TensorPtr x) {
  make_seeded_input(backend, seed, mb, static_cast<std::size_t>(rows) * hidden, x);
}

void make_target(Backend& backend, std::uint64_t seed, int mb, int rows, int hidden, TensorPtr t) {
  make_seeded_target(backend, seed, mb, static_cast<std::size_t>(rows) * hidden, t);
}

// --- Stage ---------------------------------------------------------------------------------

namespace {

ChunkShape mlp_shape(const StageConfig& c) {
  if (c.hidden <= 0 || c.rows <= 0 || c.num_layers <= 0 || c.first_layer < 0)
    throw std::invalid_argument("Stage: hidden, rows and num_layers must be positive");
  const auto h = static_cast<std::size_t>(c.hidden);
  return chunk_shape(c, static_cast<std::size_t>(c.rows) * h,
                     8 * h * h * static_cast<std::size_t>(c.num_layers));
}

}  // namespace

Stage::Stage(Backend& backend, const StageConfig& config, ActivationMeter* shared_meter)
    : ChunkModel(backend, mlp_shape(config), shared_meter), config_(config) {
  if (config.synthetic) return;
  for (int i = 0; i < config.num_layers; ++i)
    init_layer_params(backend, config.seed, config.first_layer + i, config.hidden,
                      params() + 2 * w1_count() * i, params() + 2 * w1_count() * i + w1_count());
  da_ = backend.allocate(4 * act(), config.dtype);
}

std::size_t Stage::act() const {
  return activation_count();
}

std::size_t Stage::w1_count() const {
  return 4 * static_cast<std::size_t>(config_.hidden) * static_cast<std::size_t>(config_.hidden);
}

// Block i of `saved`: [Z 4bh][A 4bh][dY bh][input of block i+1, bh, if i < L-1].
// After F: every block's Z, A and next input (9·L·b·h, X0 counted); after B, dY too.
ChunkSizes mlp_sizes(const StageConfig& c) {
  const auto L = static_cast<std::size_t>(c.num_layers);
  const std::size_t act =
      static_cast<std::size_t>(c.rows) * static_cast<std::size_t>(c.hidden) * dtype_size(c.dtype);
  return {(10 * L - 1) * act, 9 * L * act, 10 * L * act, 4 * act};  // workspace: dA
}
ChunkSizes Stage::sizes() const {
  return mlp_sizes(config_);
}
TensorPtr Stage::z_of(TensorPtr saved, int block) const {
  return saved + 10 * act() * static_cast<std::size_t>(block);
}
TensorPtr Stage::a_of(TensorPtr saved, int block) const {
  return z_of(saved, block) + 4 * act();
}
TensorPtr Stage::dy_of(TensorPtr saved, int block) const {
  return z_of(saved, block) + 8 * act();
}
ConstTensorPtr Stage::x_of(ConstTensorPtr x0, TensorPtr saved, int block) const {
  return block == 0 ? x0 : ConstTensorPtr(z_of(saved, block - 1) + 9 * act());
}

const float* Stage::w1(int block) const {
  return params() + 2 * w1_count() * block;
}
const float* Stage::w2(int block) const {
  return w1(block) + w1_count();
}
const float* Stage::dw1(int block) const {
  return grads() + 2 * w1_count() * block;
}
const float* Stage::dw2(int block) const {
  return dw1(block) + w1_count();
}

// --- Math ----------------------------------------------------------------------------------

void Stage::run_forward(ConstTensorPtr x0, TensorPtr saved, TensorPtr y) {
  Backend& be = backend();
  const int b = config_.rows, h = config_.hidden, L = config_.num_layers;
  for (int i = 0; i < L; ++i) {
    const ConstTensorPtr x = x_of(x0, saved, i);
    const TensorPtr z = z_of(saved, i);
    const TensorPtr a = a_of(saved, i);
    const TensorPtr out = i + 1 < L ? z_of(saved, i) + 9 * act() : y;
    be.gemm(kNoTrans, kNoTrans, b, 4 * h, h, 1.0f, x, h, w1(i), 4 * h, 0.0f, z, 4 * h);
    be.gelu(z, a, 4 * act());
    be.copy(x, out, act());
    be.gemm(kNoTrans, kNoTrans, b, h, 4 * h, 1.0f, a, 4 * h, w2(i), h, 1.0f, out, h);
  }
}

// Forward without keeping anything (recompute mode's F): Z and A share the dA workspace,
// and the blocks' outputs alternate between scratch and y so that the last lands in y.
void Stage::run_forward_transient(ConstTensorPtr x0, TensorPtr y) {
  Backend& be = backend();
  const int b = config_.rows, h = config_.hidden, L = config_.num_layers;
  ConstTensorPtr x = x0;
  for (int i = 0; i < L; ++i) {
    const TensorPtr za = da_.ptr();
    const TensorPtr out = (L - 1 - i) % 2 == 0 ? y : scratch();
    be.gemm(kNoTrans, kNoTrans, b, 4 * h, h, 1.0f, x, h, w1(i), 4 * h, 0.0f, za, 4 * h);
    be.gelu(za, za, 4 * act());
    be.copy(x, out, act());
    be.gemm(kNoTrans, kNoTrans, b, h, 4 * h, 1.0f, za, 4 * h, w2(i), h, 1.0f, out, h);
    x = out;
  }
}

void Stage::run_backward(ConstTensorPtr /*x0*/, TensorPtr saved, ConstTensorPtr dy, TensorPtr dx) {
  Backend& be = backend();
  const int b = config_.rows, h = config_.hidden, L = config_.num_layers;
  be.copy(dy, dy_of(saved, L - 1), act());
  for (int i = L - 1; i >= 0; --i) {
    const ConstTensorPtr g = dy_of(saved, i);
    const TensorPtr z = z_of(saved, i);  // becomes dZ
    be.gemm(kNoTrans, kTrans, b, 4 * h, h, 1.0f, g, h, w2(i), h, 0.0f, da_.ptr(), 4 * h);
    be.gelu_backward(z, da_.ptr(), z, 4 * act());
    const TensorPtr out = i > 0 ? dy_of(saved, i - 1) : dx;
    be.copy(g, out, act());
    be.gemm(kNoTrans, kTrans, b, h, 4 * h, 1.0f, z, 4 * h, w1(i), 4 * h, 1.0f, out, h);
  }
}

void Stage::run_weight(ConstTensorPtr x0, TensorPtr saved) {
  Backend& be = backend();
  const int b = config_.rows, h = config_.hidden, L = config_.num_layers;
  for (int i = 0; i < L; ++i) {
    float* gw1 = grads() + 2 * w1_count() * i;
    float* gw2 = gw1 + w1_count();
    be.gemm(kTrans, kNoTrans, 4 * h, h, b, 1.0f, a_of(saved, i), 4 * h, dy_of(saved, i), h, 1.0f,
            gw2, h);
    be.gemm(kTrans, kNoTrans, h, 4 * h, b, 1.0f, x_of(x0, saved, i), h, z_of(saved, i), 4 * h, 1.0f,
            gw1, 4 * h);
  }
}

}  // namespace bb
