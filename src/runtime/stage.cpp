#include "runtime/stage.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

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

void make_input(Backend& backend, std::uint64_t seed, int mb, int rows, int hidden, float* x) {
  backend.seeded_uniform(x, static_cast<std::size_t>(rows) * hidden, seed,
                         seed_stream(SeedKind::kInput, static_cast<std::uint64_t>(mb)), 1.0f);
}

void make_target(Backend& backend, std::uint64_t seed, int mb, int rows, int hidden, float* t) {
  backend.seeded_uniform(t, static_cast<std::size_t>(rows) * hidden, seed,
                         seed_stream(SeedKind::kTarget, static_cast<std::uint64_t>(mb)), 1.0f);
}

// --- Stage ---------------------------------------------------------------------------------

Stage::Stage(Backend& backend, const StageConfig& config, ActivationMeter* shared_meter)
    : backend_(&backend), config_(config), shared_meter_(shared_meter) {
  if (config.hidden <= 0 || config.rows <= 0 || config.num_layers <= 0 || config.first_layer < 0)
    throw std::invalid_argument("Stage: hidden, rows and num_layers must be positive");
  param_count_ = 2 * w1_count() * static_cast<std::size_t>(config.num_layers);
  in_flight_.reserve(16);
  if (config.synthetic) return;

  params_ = backend.allocate(param_count_);
  backend.note_parameters(params_.data(), param_count_);
  grads_ = backend.allocate(param_count_);
  for (int i = 0; i < config.num_layers; ++i)
    init_layer_params(backend, config.seed, config.first_layer + i, config.hidden,
                      params_.data() + 2 * w1_count() * i,
                      params_.data() + 2 * w1_count() * i + w1_count());
  backend.fill(grads_.data(), 0.0f, param_count_);
  da_ = backend.allocate(4 * act());
  scratch_ = backend.allocate(act());
  loss_ = backend.allocate(1);
  backend.fill(loss_.data(), 0.0f, 1);
}

std::size_t Stage::act() const {
  return static_cast<std::size_t>(config_.rows) * static_cast<std::size_t>(config_.hidden);
}

std::size_t Stage::w1_count() const {
  return 4 * static_cast<std::size_t>(config_.hidden) * static_cast<std::size_t>(config_.hidden);
}

// Block i of `saved`: [Z 4bh][A 4bh][dY bh][input of block i+1, bh, if i < L-1].
std::size_t Stage::saved_count() const {
  return (10 * static_cast<std::size_t>(config_.num_layers) - 1) * act();
}
float* Stage::z_of(Slot& s, int block) const {
  return s.saved.data() + 10 * act() * block;
}
float* Stage::a_of(Slot& s, int block) const {
  return z_of(s, block) + 4 * act();
}
float* Stage::dy_of(Slot& s, int block) const {
  return z_of(s, block) + 8 * act();
}
float* Stage::x_of(Slot& s, int block) const {
  return block == 0 ? s.input.data() : z_of(s, block - 1) + 9 * act();
}

const float* Stage::w1(int block) const {
  return params_.data() + 2 * w1_count() * block;
}
const float* Stage::w2(int block) const {
  return w1(block) + w1_count();
}
const float* Stage::dw1(int block) const {
  return grads_.data() + 2 * w1_count() * block;
}
const float* Stage::dw2(int block) const {
  return dw1(block) + w1_count();
}

std::size_t Stage::pool_bytes() const {
  std::size_t total = 0;
  for (const Slot& s : in_flight_) total += s.input.bytes() + s.saved.bytes();
  for (const Buffer& b : free_inputs_) total += b.bytes();
  for (const Buffer& b : free_saved_) total += b.bytes();
  return total;
}

Stage::Slot& Stage::find(int mb, const char* action) {
  for (Slot& s : in_flight_)
    if (s.mb == mb) return s;
  throw std::logic_error(std::string("Stage: ") + action + " of micro-batch " + std::to_string(mb) +
                         " without its forward");
}

Buffer Stage::take(std::vector<Buffer>& pool, std::size_t count) {
  if (pool.empty()) return backend_->allocate(count);
  Buffer b = std::move(pool.back());
  pool.pop_back();
  return b;
}

void Stage::count(Slot& s, std::size_t bytes) {
  s.counted += bytes;
  meter_.add(bytes);
  if (shared_meter_ != nullptr) shared_meter_->add(bytes);
}

void Stage::wait(double seconds) {
  if (config_.synthetic->spin)
    backend_->spin_for(seconds);
  else
    backend_->sleep_for(seconds);
}

void Stage::reserve(int forward_in_flight, int backward_in_flight) {
  if (config_.synthetic) return;
  const int saved = config_.recompute ? backward_in_flight : forward_in_flight;
  while (static_cast<int>(free_inputs_.size() + in_flight_.size()) < forward_in_flight)
    free_inputs_.push_back(backend_->allocate(act()));
  int have_saved = static_cast<int>(free_saved_.size());
  for (const Slot& s : in_flight_) have_saved += s.saved.empty() ? 0 : 1;
  for (; have_saved < saved; ++have_saved) free_saved_.push_back(backend_->allocate(saved_count()));
}

// --- Math ----------------------------------------------------------------------------------

void Stage::run_forward(Slot& s, float* y) {
  Backend& be = *backend_;
  const int b = config_.rows, h = config_.hidden, L = config_.num_layers;
  for (int i = 0; i < L; ++i) {
    const float* x = x_of(s, i);
    float* z = z_of(s, i);
    float* a = a_of(s, i);
    float* out = i + 1 < L ? x_of(s, i + 1) : y;
    be.gemm(kNoTrans, kNoTrans, b, 4 * h, h, 1.0f, x, h, w1(i), 4 * h, 0.0f, z, 4 * h);
    be.gelu(z, a, 4 * act());
    be.copy(x, out, act());
    be.gemm(kNoTrans, kNoTrans, b, h, 4 * h, 1.0f, a, 4 * h, w2(i), h, 1.0f, out, h);
  }
}

// Forward without keeping anything (recompute mode's F): Z and A share the dA workspace,
// and the blocks' outputs alternate between scratch and y so that the last lands in y.
void Stage::run_forward_transient(const float* x0, float* y) {
  Backend& be = *backend_;
  const int b = config_.rows, h = config_.hidden, L = config_.num_layers;
  const float* x = x0;
  for (int i = 0; i < L; ++i) {
    float* za = da_.data();
    float* out = (L - 1 - i) % 2 == 0 ? y : scratch_.data();
    be.gemm(kNoTrans, kNoTrans, b, 4 * h, h, 1.0f, x, h, w1(i), 4 * h, 0.0f, za, 4 * h);
    be.gelu(za, za, 4 * act());
    be.copy(x, out, act());
    be.gemm(kNoTrans, kNoTrans, b, h, 4 * h, 1.0f, za, 4 * h, w2(i), h, 1.0f, out, h);
    x = out;
  }
}

void Stage::run_backward(Slot& s, const float* dy, float* dx) {
  Backend& be = *backend_;
  const int b = config_.rows, h = config_.hidden, L = config_.num_layers;
  be.copy(dy, dy_of(s, L - 1), act());
  for (int i = L - 1; i >= 0; --i) {
    const float* g = dy_of(s, i);
    float* z = z_of(s, i);  // becomes dZ
    be.gemm(kNoTrans, kTrans, b, 4 * h, h, 1.0f, g, h, w2(i), h, 0.0f, da_.data(), 4 * h);
    be.gelu_backward(z, da_.data(), z, 4 * act());
    float* out = i > 0 ? dy_of(s, i - 1) : (dx != nullptr ? dx : scratch_.data());
    be.copy(g, out, act());
    be.gemm(kNoTrans, kTrans, b, h, 4 * h, 1.0f, z, 4 * h, w1(i), 4 * h, 1.0f, out, h);
  }
}

void Stage::run_weight(Slot& s) {
  Backend& be = *backend_;
  const int b = config_.rows, h = config_.hidden, L = config_.num_layers;
  for (int i = 0; i < L; ++i) {
    float* gw1 = grads_.data() + 2 * w1_count() * i;
    float* gw2 = gw1 + w1_count();
    be.gemm(kTrans, kNoTrans, 4 * h, h, b, 1.0f, a_of(s, i), 4 * h, dy_of(s, i), h, 1.0f, gw2, h);
    be.gemm(kTrans, kNoTrans, h, 4 * h, b, 1.0f, x_of(s, i), h, z_of(s, i), 4 * h, 1.0f, gw1,
            4 * h);
  }
}

// --- Work items ----------------------------------------------------------------------------

void Stage::forward(int mb, const float* x, float* y) {
  for (const Slot& s : in_flight_)
    if (s.mb == mb)
      throw std::logic_error("Stage: forward of micro-batch " + std::to_string(mb) +
                             " while it is in flight");
  Slot slot;
  slot.mb = mb;
  if (!config_.synthetic) {
    slot.input = take(free_inputs_, act());
    if (!config_.recompute) slot.saved = take(free_saved_, saved_count());
  }
  Slot& s = in_flight_.emplace_back(std::move(slot));
  const std::size_t L = static_cast<std::size_t>(config_.num_layers);
  count(s, (config_.recompute ? act() : 9 * L * act()) * sizeof(float));
  if (config_.synthetic) {
    wait(config_.synthetic->forward);
    return;
  }
  backend_->copy(x, s.input.data(), act());
  if (config_.recompute)
    run_forward_transient(s.input.data(), y);  // keeps X0 only
  else
    run_forward(s, y);
}

Stage::Slot& Stage::start_backward(int mb) {
  Slot& s = find(mb, "backward_input");
  if (s.backward_done)
    throw std::logic_error("Stage: backward_input of micro-batch " + std::to_string(mb) + " twice");
  s.backward_done = true;
  count(s, 10 * static_cast<std::size_t>(config_.num_layers) * act() * sizeof(float) - s.counted);
  return s;
}

void Stage::compute_backward(Slot& s, const float* dy, float* dx) {
  if (config_.recompute) {
    s.saved = take(free_saved_, saved_count());
    run_forward(s, scratch_.data());
  }
  run_backward(s, dy, dx);
}

void Stage::retire(Slot& s) {
  meter_.release(s.counted);
  if (shared_meter_ != nullptr) shared_meter_->release(s.counted);
  if (!s.input.empty()) free_inputs_.push_back(std::move(s.input));
  if (!s.saved.empty()) free_saved_.push_back(std::move(s.saved));
  if (&s != &in_flight_.back()) s = std::move(in_flight_.back());
  in_flight_.pop_back();
}

void Stage::backward_input(int mb, const float* dy, float* dx) {
  Slot& s = start_backward(mb);
  if (config_.synthetic)
    wait(config_.synthetic->backward);
  else
    compute_backward(s, dy, dx);
}

void Stage::backward_weight(int mb) {
  Slot& s = find(mb, "backward_weight");
  if (!s.backward_done)
    throw std::logic_error("Stage: backward_weight of micro-batch " + std::to_string(mb) +
                           " before its backward_input");
  if (config_.synthetic)
    wait(config_.synthetic->weight);
  else
    run_weight(s);
  retire(s);
}

void Stage::backward_full(int mb, const float* dy, float* dx) {
  Slot& s = start_backward(mb);
  if (config_.synthetic) {
    wait(config_.synthetic->backward + config_.synthetic->weight);
  } else {
    compute_backward(s, dy, dx);
    run_weight(s);
  }
  retire(s);
}

// --- Loss, gradients, optimizer --------------------------------------------------------------

void Stage::make_input(int mb, float* x) {
  if (config_.synthetic) return;
  bb::make_input(*backend_, config_.seed, mb, config_.rows, config_.hidden, x);
}

void Stage::loss(int mb, int num_microbatches, const float* y, float* dy) {
  if (config_.synthetic) return;
  make_target(*backend_, config_.seed, mb, config_.rows, config_.hidden, scratch_.data());
  const float scale = static_cast<float>(
      1.0 / (static_cast<double>(num_microbatches) * static_cast<double>(act())));
  backend_->mse_loss(y, scratch_.data(), dy, act(), scale, loss_.data());
}

double Stage::loss_sum() {
  if (config_.synthetic) return 0.0;
  float v = 0.0f;
  backend_->to_host(loss_.data(), &v, 1);
  return v;
}

void Stage::reset_loss() {
  if (!config_.synthetic) backend_->fill(loss_.data(), 0.0f, 1);
}

void Stage::zero_grads() {
  if (!config_.synthetic) backend_->fill(grads_.data(), 0.0f, param_count_);
}

void Stage::optimizer_step(const OptimizerConfig& config) {
  ++steps_;
  if (config_.synthetic) return;
  if (config.kind == OptimizerConfig::Kind::kSgd) {
    backend_->sgd_update(params_.data(), grads_.data(), param_count_, config.lr);
    return;
  }
  if (adam_m_.empty()) {
    adam_m_ = backend_->allocate(param_count_);
    adam_v_ = backend_->allocate(param_count_);
    backend_->fill(adam_m_.data(), 0.0f, param_count_);
    backend_->fill(adam_v_.data(), 0.0f, param_count_);
  }
  const AdamParams adam{config.lr, config.beta1, config.beta2, config.eps};
  backend_->adam_update(params_.data(), grads_.data(), adam_m_.data(), adam_v_.data(), param_count_,
                        adam, ++adam_steps_);
}

}  // namespace bb
