#include "runtime/chunk_model.hpp"

#include <stdexcept>
#include <string>

namespace bb {

void make_seeded_input(Backend& backend, std::uint64_t seed, int mb, std::size_t count,
                       TensorPtr x) {
  backend.seeded_uniform(x, count, seed,
                         seed_stream(SeedKind::kInput, static_cast<std::uint64_t>(mb)), 1.0f);
}

void make_seeded_target(Backend& backend, std::uint64_t seed, int mb, std::size_t count,
                        TensorPtr t) {
  backend.seeded_uniform(t, count, seed,
                         seed_stream(SeedKind::kTarget, static_cast<std::uint64_t>(mb)), 1.0f);
}

void make_seeded_tokens(Backend& backend, std::uint64_t seed, SeedKind kind, int mb,
                        std::size_t count, int vocab, std::int32_t* ids) {
  if (vocab <= 0 || vocab >= (1 << 24))
    throw std::invalid_argument("make_seeded_tokens: vocab must be 1..2^24-1");
  backend.seeded_tokens(ids, count, seed, seed_stream(kind, static_cast<std::uint64_t>(mb)), vocab);
}

ChunkBuffers chunk_buffers(const ChunkShape& shape, const ChunkSizes& sizes,
                           std::size_t loss_bytes) {
  ChunkBuffers b;
  if (shape.synthetic) return b;
  const std::size_t size = dtype_size(shape.dtype);
  const auto whole = [size](std::size_t bytes) { return (bytes + size - 1) / size * size; };
  b.params = b.grads = shape.param_count * sizeof(float);
  b.adam = 2 * b.params;
  b.scratch = b.input = shape.activation_count * size;
  b.loss = sizeof(float);
  b.workspace = sizes.workspace_bytes;
  b.saved = whole(sizes.saved);
  b.kept = whole(loss_bytes);
  return b;
}

ChunkModel::ChunkModel(Backend& backend, const ChunkShape& shape, ActivationMeter* shared_meter)
    : backend_(&backend), shape_(shape), shared_meter_(shared_meter) {
  if (shape.activation_count == 0 || shape.num_layers <= 0 || shape.first_layer < 0)
    throw std::invalid_argument("ChunkModel: sizes must be positive");
  in_flight_.reserve(16);
  if (shape.synthetic) return;
  params_ = backend.allocate(shape.param_count);
  backend.note_parameters(params_.data(), shape.param_count);
  grads_ = backend.allocate(shape.param_count);
  backend.fill(grads_.data(), 0.0f, shape.param_count);
  scratch_ = backend.allocate(shape.activation_count, shape.dtype);
  loss_ = backend.allocate(1);
  backend.fill(loss_.data(), 0.0f, 1);
}

std::size_t ChunkModel::pool_bytes() const {
  std::size_t total = 0;
  for (const Slot& s : in_flight_) total += s.input.bytes() + s.saved.bytes();
  for (const Buffer& b : free_inputs_) total += b.bytes();
  for (const Buffer& b : free_saved_) total += b.bytes();
  for (const Slot& s : in_flight_) total += s.kept.bytes();
  for (const Buffer& b : free_kept_) total += b.bytes();
  return total;
}

ChunkModel::Slot& ChunkModel::find(int mb, const char* action) {
  for (Slot& s : in_flight_)
    if (s.mb == mb) return s;
  throw std::logic_error(std::string("Stage: ") + action + " of micro-batch " + std::to_string(mb) +
                         " without its forward");
}

Buffer ChunkModel::take(std::vector<Buffer>& pool, std::size_t bytes) {
  if (pool.empty()) return allocate_bytes(bytes);
  Buffer b = std::move(pool.back());
  pool.pop_back();
  return b;
}

void ChunkModel::count(Slot& s, std::size_t bytes) {
  s.counted += bytes;
  meter_.add(bytes);
  if (shared_meter_ != nullptr) shared_meter_->add(bytes);
}

void ChunkModel::wait(double seconds) {
  if (shape_.synthetic->spin)
    backend_->spin_for(seconds);
  else
    backend_->sleep_for(seconds);
}

void ChunkModel::reserve(int forward_in_flight, int backward_in_flight) {
  if (shape_.synthetic) return;
  const int saved = shape_.recompute ? backward_in_flight : forward_in_flight;
  while (static_cast<int>(free_inputs_.size() + in_flight_.size()) < forward_in_flight)
    free_inputs_.push_back(allocate_bytes(activation_bytes()));
  int have_saved = static_cast<int>(free_saved_.size());
  for (const Slot& s : in_flight_) have_saved += s.saved.empty() ? 0 : 1;
  for (; have_saved < saved; ++have_saved) free_saved_.push_back(allocate_bytes(sizes().saved));
}

// --- Work items ----------------------------------------------------------------------------

void ChunkModel::forward(int mb, ConstTensorPtr x, TensorPtr y) {
  for (const Slot& s : in_flight_)
    if (s.mb == mb)
      throw std::logic_error("Stage: forward of micro-batch " + std::to_string(mb) +
                             " while it is in flight");
  Slot slot;
  slot.mb = mb;
  if (!shape_.synthetic) {
    slot.input = take(free_inputs_, activation_bytes());
    if (!shape_.recompute) slot.saved = take(free_saved_, sizes().saved);
  }
  Slot& s = in_flight_.emplace_back(std::move(slot));
  count(s, shape_.recompute ? activation_bytes() : sizes().forward);
  if (shape_.synthetic) {
    wait(shape_.synthetic->forward);
    return;
  }
  backend_->copy(x, s.input.ptr(), activation_count());
  if (shape_.recompute)
    run_forward_transient(s.input.ptr(), y);  // keeps X0 only
  else
    run_forward(s.input.ptr(), s.saved.ptr(), y);
}

ChunkModel::Slot& ChunkModel::start_backward(int mb) {
  Slot& s = find(mb, "backward_input");
  if (s.backward_done)
    throw std::logic_error("Stage: backward_input of micro-batch " + std::to_string(mb) + " twice");
  s.backward_done = true;
  count(s, sizes().backward - s.counted);
  return s;
}

void ChunkModel::compute_backward(Slot& s, ConstTensorPtr dy, TensorPtr dx) {
  if (shape_.recompute) {
    s.saved = take(free_saved_, sizes().saved);
    run_forward(s.input.ptr(), s.saved.ptr(), scratch_.ptr());
  }
  run_backward(s.input.ptr(), s.saved.ptr(), dy, dx ? dx : scratch_.ptr());
}

void ChunkModel::retire(Slot& s) {
  meter_.release(s.counted);
  if (shared_meter_ != nullptr) shared_meter_->release(s.counted);
  if (!s.input.empty()) free_inputs_.push_back(std::move(s.input));
  if (!s.saved.empty()) free_saved_.push_back(std::move(s.saved));
  if (!s.kept.empty()) free_kept_.push_back(std::move(s.kept));
  if (&s != &in_flight_.back()) s = std::move(in_flight_.back());
  in_flight_.pop_back();
}

void ChunkModel::weight(Slot& s) {
  run_weight(s.input.ptr(), s.saved.ptr());
  if (!s.kept.empty()) run_loss_weight(s.kept.ptr());
}

void ChunkModel::backward_input(int mb, ConstTensorPtr dy, TensorPtr dx) {
  Slot& s = start_backward(mb);
  if (shape_.synthetic)
    wait(shape_.synthetic->backward);
  else
    compute_backward(s, dy, dx);
}

void ChunkModel::backward_weight(int mb) {
  Slot& s = find(mb, "backward_weight");
  if (!s.backward_done)
    throw std::logic_error("Stage: backward_weight of micro-batch " + std::to_string(mb) +
                           " before its backward_input");
  if (shape_.synthetic)
    wait(shape_.synthetic->weight);
  else
    weight(s);
  retire(s);
}

void ChunkModel::backward_full(int mb, ConstTensorPtr dy, TensorPtr dx) {
  Slot& s = start_backward(mb);
  if (shape_.synthetic) {
    wait(shape_.synthetic->backward + shape_.synthetic->weight);
  } else {
    compute_backward(s, dy, dx);
    weight(s);
  }
  retire(s);
}

// --- Loss, gradients, optimizer --------------------------------------------------------------

void ChunkModel::make_input(int mb, TensorPtr x) {
  if (!shape_.synthetic) run_make_input(mb, x);
}

void ChunkModel::run_make_input(int mb, TensorPtr x) {
  make_seeded_input(*backend_, shape_.seed, mb, activation_count(), x);
}

void ChunkModel::loss(int mb, int num_microbatches, ConstTensorPtr y, TensorPtr dy) {
  if (shape_.synthetic) return;
  TensorPtr kept;
  if (loss_bytes() > 0) {
    Slot& s = find(mb, "loss");
    if (!s.kept.empty() || s.backward_done)
      throw std::logic_error("Stage: loss of micro-batch " + std::to_string(mb) + " twice");
    s.kept = take(free_kept_, loss_bytes());
    count(s, loss_bytes());
    kept = s.kept.ptr();
  }
  run_loss(mb, num_microbatches, y, dy, kept, loss_.data());
}

void ChunkModel::run_loss(int mb, int num_microbatches, ConstTensorPtr y, TensorPtr dy,
                          TensorPtr kept, float* loss_sum) {
  (void)kept;
  make_seeded_target(*backend_, shape_.seed, mb, activation_count(), scratch_.ptr());
  const float scale = static_cast<float>(
      1.0 / (static_cast<double>(num_microbatches) * static_cast<double>(activation_count())));
  backend_->mse_loss(y, scratch_.ptr(), dy, activation_count(), scale, loss_sum);
}

double ChunkModel::loss_sum() {
  if (shape_.synthetic) return 0.0;
  float v = 0.0f;
  backend_->to_host(loss_.data(), &v, 1);
  return v;
}

void ChunkModel::reset_loss() {
  if (!shape_.synthetic) backend_->fill(loss_.data(), 0.0f, 1);
}

void ChunkModel::zero_grads() {
  if (!shape_.synthetic) backend_->fill(grads_.data(), 0.0f, shape_.param_count);
}

void ChunkModel::optimizer_step(const OptimizerConfig& config) {
  ++steps_;
  if (shape_.synthetic) return;
  if (config.kind == OptimizerConfig::Kind::kSgd) {
    backend_->sgd_update(params_.data(), grads_.data(), shape_.param_count, config.lr);
    return;
  }
  if (adam_m_.empty()) {
    adam_m_ = backend_->allocate(shape_.param_count);
    adam_v_ = backend_->allocate(shape_.param_count);
    backend_->fill(adam_m_.data(), 0.0f, shape_.param_count);
    backend_->fill(adam_v_.data(), 0.0f, shape_.param_count);
  }
  const AdamParams adam{config.lr, config.beta1, config.beta2, config.eps};
  backend_->adam_update(params_.data(), grads_.data(), adam_m_.data(), adam_v_.data(),
                        shape_.param_count, adam, ++adam_steps_);
}

}  // namespace bb
