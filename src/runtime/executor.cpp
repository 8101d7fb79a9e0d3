#include "runtime/executor.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>

#include "common/enum_names.hpp"
#include "common/error.hpp"
#include "runtime/wait.hpp"
#include "schedule/edges.hpp"

namespace bb {

namespace {

// Activation/gradient message tags wrap below kGradientTagBase (MPI guarantees tags up to
// 32767); the DualPipe gradient exchange uses the tags above it.
constexpr std::int64_t kMessageTagLimit = 16384;
constexpr int kGradientTagBase = 16384;

RecordKind kind_of(Op op) {
  switch (op) {
    case Op::F:
      return RecordKind::F;
    case Op::B:
      return RecordKind::B;
    case Op::W:
      return RecordKind::W;
    default:
      return RecordKind::BW;
  }
}

std::string where(const Action& a) {
  return "chunk " + std::to_string(a.chunk) + " mb " + std::to_string(a.mb);
}

// The transport's direction of a message (edges.hpp: 0 activations, 1 gradients).
Direction direction(const MessageName& m) {
  return m.dir == 0 ? Direction::kForward : Direction::kBackward;
}

}  // namespace

constexpr EnumNames<RecordKind, 5> kRecordKindNames{{"F", "B", "W", "BW", "FB"}};
static_assert(kRecordKindNames.ends_at(RecordKind::FB));

const char* record_kind_name(RecordKind k) {
  return kRecordKindNames.name(k).data();  // names are literals: NUL-terminated
}

// --- BufferPool ----------------------------------------------------------------------------

int BufferPool::acquire() {
  if (!free_.empty()) {
    const int id = free_.back();
    free_.pop_back();
    return id;
  }
  buffers_.push_back(backend_->allocate(count_, dtype_));
  // Deterministic content for buffers that synthetic mode sends without computing them.
  backend_->fill(buffers_.back().ptr(), 0.0f, count_);
  return static_cast<int>(buffers_.size() - 1);
}

void BufferPool::clear() {
  if (in_use() != 0) throw std::logic_error("BufferPool::clear: buffers in use");
  buffers_.clear();
  free_.clear();
}

// --- Executor ------------------------------------------------------------------------------

std::size_t activation_count(const ExecutorConfig& config) {
  const std::size_t rows =
      static_cast<std::size_t>(config.mb_size) *
      (config.transformer ? static_cast<std::size_t>(config.transformer->seq) : 1);
  return rows * static_cast<std::size_t>(config.hidden);
}

std::size_t message_bytes(const ExecutorConfig& config) {
  return activation_count(config) * dtype_size(config.dtype);
}

namespace {

// c (a StageConfig or TransformerConfig) with the fields every chunk model takes from `config`:
// hidden, rows (mb_size), the layers of chunk `stage`, seed, recompute, and synthetic mode.
template <class ChunkConfig>
ChunkConfig with_chunk_fields(ChunkConfig c, const ExecutorConfig& config, int stage,
                              int num_stages) {
  c.hidden = config.hidden;
  c.rows = config.mb_size;
  c.first_layer = stage * config.layers;
  c.num_layers = config.layers;
  if (num_stages > 0) {
    const std::vector<int> split = stage_layers(config, num_stages);
    c.first_layer = 0;
    for (int s = 0; s < stage; ++s) c.first_layer += split.at(static_cast<std::size_t>(s));
    c.num_layers = split.at(static_cast<std::size_t>(stage));
  }
  c.seed = config.seed;
  c.recompute = config.recompute;
  c.dtype = config.dtype;
  if (config.synthetic) c.synthetic = SyntheticTimes{};  // accounting only: the executor sleeps
  return c;
}

}  // namespace

int model_stages(const Schedule& schedule) {
  int n = 0;
  for (int s : schedule.chunk_stage) n = std::max(n, s + 1);
  return n;
}

std::vector<int> stage_layers(const ExecutorConfig& config, int num_stages) {
  if (num_stages <= 0) throw std::invalid_argument("stage_layers: no stages");
  const int n = config.model_layers;
  const std::string stages = std::to_string(num_stages) + " chunks along the route";
  if (n <= 0) {
    if (!config.partition.empty()) throw ConfigError("--partition needs --model-layers");
    return std::vector<int>(static_cast<std::size_t>(num_stages), config.layers);
  }
  if (config.partition.empty()) {
    if (n < num_stages)
      throw ConfigError("--model-layers " + std::to_string(n) + " is fewer blocks than the " +
                        stages + " (every chunk needs one)");
    std::vector<int> split(static_cast<std::size_t>(num_stages), n / num_stages);
    for (int s = 0; s < n % num_stages; ++s) ++split[static_cast<std::size_t>(s)];
    return split;
  }
  if (static_cast<int>(config.partition.size()) != num_stages)
    throw ConfigError("--partition has " + std::to_string(config.partition.size()) +
                      " entries, the schedule has " + stages);
  long long sum = 0;
  for (int b : config.partition) {
    if (b < 1) throw ConfigError("--partition: every chunk needs at least one block");
    sum += b;
  }
  if (sum != n)
    throw ConfigError("--partition sums to " + std::to_string(sum) + " blocks, --model-layers is " +
                      std::to_string(n));
  return config.partition;
}

int model_layer_count(const ExecutorConfig& config, int num_stages) {
  return config.model_layers > 0 ? config.model_layers : num_stages * config.layers;
}

ExecutorConfig widest_chunk(ExecutorConfig config, int num_stages) {
  if (config.model_layers > 0) {
    const std::vector<int> split = stage_layers(config, num_stages);
    config.layers = *std::max_element(split.begin(), split.end());
  }
  return config;
}

std::size_t model_param_count(const ExecutorConfig& config, int num_stages) {
  ExecutorConfig one = config;
  one.layers = 1;
  one.model_layers = 0;
  one.partition.clear();
  std::size_t ends = 0;
  if (config.transformer) {
    TransformerConfig tc = transformer_chunk_config(one, 0);
    tc.embed = tc.head = tc.vocab > 0;
    ends = transformer_end_param_count(tc);
  }
  return chunk_param_count(one) * static_cast<std::size_t>(model_layer_count(config, num_stages)) +
         ends;
}

TransformerConfig transformer_chunk_config(const ExecutorConfig& config, int stage,
                                           int num_stages) {
  TransformerConfig tc = with_chunk_fields(config.transformer.value(), config, stage, num_stages);
  tc.embed = tc.vocab > 0 && stage == 0;
  tc.head = tc.vocab > 0 && stage == num_stages - 1;
  return tc;
}

std::size_t chunk_forward_bytes(const ExecutorConfig& config) {
  if (config.recompute) return message_bytes(config);
  const auto L = static_cast<std::size_t>(config.layers);
  if (config.transformer)
    return L * transformer_block_forward_bytes(transformer_chunk_config(config, 0));
  return 9 * L * message_bytes(config);  // Z, A and the next input per block (stage.hpp)
}

std::size_t chunk_param_count(const ExecutorConfig& config) {
  const auto L = static_cast<std::size_t>(config.layers);
  const auto h = static_cast<std::size_t>(config.hidden);
  if (!config.transformer) return 8 * h * h * L;  // W1 (h×4h) and W2 (4h×h) per block (stage.hpp)
  std::size_t per_layer = 0;
  const TransformerConfig tc = transformer_chunk_config(config, 0);
  for (const ParamTensor& t : transformer_param_tensors(tc.hidden, tc.ffn_width()))
    per_layer += t.count;
  return per_layer * L;
}

std::size_t chunk_workspace_bytes(const ExecutorConfig& config) {
  const std::size_t scratch = message_bytes(config);
  if (config.transformer)
    return scratch + transformer_workspace_bytes(transformer_chunk_config(config, 0));
  return scratch + 4 * message_bytes(config);  // dA (stage.hpp)
}

ChunkBuffers chunk_buffers(const ExecutorConfig& config, int stage, int num_stages) {
  if (config.transformer) {
    const TransformerConfig tc = transformer_chunk_config(config, stage, num_stages);
    std::size_t per_layer = 0;
    for (const ParamTensor& t : transformer_param_tensors(tc.hidden, tc.ffn_width()))
      per_layer += t.count;
    const std::size_t params =
        per_layer * static_cast<std::size_t>(tc.num_layers) + transformer_end_param_count(tc);
    return chunk_buffers(chunk_shape(tc, activation_count(config), params), transformer_sizes(tc),
                         transformer_loss_bytes(tc));
  }
  const StageConfig sc = with_chunk_fields(StageConfig{}, config, stage, num_stages);
  const auto h = static_cast<std::size_t>(config.hidden);
  return chunk_buffers(chunk_shape(sc, activation_count(config),
                                   8 * h * h * static_cast<std::size_t>(sc.num_layers)),
                       mlp_sizes(sc), 0);
}

MemoryConfig memory_config(const Schedule& schedule, const ExecutorConfig& config,
                           std::size_t (*block)(std::size_t)) {
  const auto held = [block](std::size_t bytes) {  // what the allocator sets aside
    return static_cast<double>(bytes == 0 || block == nullptr ? bytes : block(bytes));
  };
  const int stages = model_stages(schedule);
  MemoryConfig m;
  m.recompute = config.recompute;
  m.hold_sends = config.hold_sends;
  m.message = held(message_bytes(config));
  m.eager_bytes = std::numeric_limits<double>::infinity();
  const bool adam = config.optimizer.kind == OptimizerConfig::Kind::kAdam;
  for (int chunk = 0; chunk < schedule.num_chunks(); ++chunk) {
    const ChunkBuffers b = chunk_buffers(config, schedule.chunk_stage[chunk], stages);
    ChunkMemory x;
    x.params = held(b.params);
    x.grads = held(b.grads);
    x.optimizer = adam ? 2 * held(b.adam / 2) : 0.0;  // two moments, a buffer each
    x.workspace = held(b.scratch) + held(b.loss) + held(b.workspace);
    x.input = held(b.input);
    x.saved = held(b.saved);
    x.kept = held(b.kept);
    m.chunks.push_back(x);
  }
  return m;
}

std::unique_ptr<ChunkModel> make_chunk(Backend& backend, const ExecutorConfig& config, int stage,
                                       ActivationMeter* meter, int num_stages) {
  if (config.transformer)
    return std::make_unique<TransformerStage>(
        backend, transformer_chunk_config(config, stage, num_stages), meter);
  return std::make_unique<Stage>(
      backend, with_chunk_fields(StageConfig{}, config, stage, num_stages), meter);
}

Executor::Executor(const Schedule& lowered, Backend& backend, Transport& transport,
                   BufferPool& pool, const ExecutorConfig& config)
    : lowered_(lowered), backend_(backend), transport_(transport), pool_(pool), config_(config) {
  if (!lowered.lowered) throw std::invalid_argument("Executor: the schedule is not lowered");
  if (transport.size() != lowered.P)
    throw std::invalid_argument("Executor: transport has " + std::to_string(transport.size()) +
                                " ranks, the schedule " + std::to_string(lowered.P));
  if (config.hidden <= 0 || (config.layers <= 0 && config.model_layers <= 0) || config.mb_size <= 0)
    throw std::invalid_argument("Executor: hidden, layers and mb_size must be positive");
  if (pool.count() != activation_count(config) || pool.dtype() != config.dtype)
    throw std::invalid_argument("Executor: buffer pool of the wrong tensor size or dtype");
  rank_ = transport.rank();
  const int C = lowered.num_chunks();
  num_stages_ = model_stages(lowered);
  (void)stage_layers(config, num_stages_);  // the split fits the schedule

  fractions_ = chunk_shares(lowered);

  // Micro-batches in flight per chunk (F..W, and B..W): reserve the stages' pools.
  std::vector<int> fwd(static_cast<std::size_t>(C), 0), bwd(fwd), max_fwd(fwd), max_bwd(fwd);
  for (const Action& a : lowered.ranks[static_cast<std::size_t>(rank_)]) {
    const auto c = static_cast<std::size_t>(a.chunk);
    if (a.op == Op::F) max_fwd[c] = std::max(max_fwd[c], ++fwd[c]);
    if (a.op == Op::B) max_bwd[c] = std::max(max_bwd[c], ++bwd[c]);
    if (a.op == Op::BW) max_bwd[c] = std::max(max_bwd[c], bwd[c] + 1);
    if (a.op == Op::W) --bwd[c];
    if (a.op == Op::W || a.op == Op::BW) --fwd[c];
  }

  stages_.resize(static_cast<std::size_t>(C));
  for (int c = 0; c < C; ++c) {
    if (lowered.chunk_rank[c] != rank_) continue;
    local_chunks_.push_back(c);
    std::unique_ptr<ChunkModel> st =
        make_chunk(backend, config, lowered.chunk_stage[c], &meter_, num_stages_);
    st->reserve(max_fwd[static_cast<std::size_t>(c)], max_bwd[static_cast<std::size_t>(c)]);
    stages_[static_cast<std::size_t>(c)] = std::move(st);
  }

  const std::size_t table = static_cast<std::size_t>(C) * static_cast<std::size_t>(lowered.M) * 2;
  inputs_.assign(table, Tensor{});
  outputs_.assign(table, -1);

  // DualPipe: the two chunks of one stage are partners.
  std::vector<std::vector<int>> by_stage(static_cast<std::size_t>(num_stages_));
  for (int c = 0; c < C; ++c)
    by_stage[static_cast<std::size_t>(lowered.chunk_stage[c])].push_back(c);
  partner_.assign(static_cast<std::size_t>(C), -1);
  partner_recv_.resize(static_cast<std::size_t>(C));
  for (const auto& chunks : by_stage) {
    if (chunks.size() > 2)
      throw std::invalid_argument("Executor: more than two copies of stage " +
                                  std::to_string(lowered.chunk_stage[chunks[0]]));
    if (chunks.size() < 2) continue;
    for (int k = 0; k < 2; ++k) {
      const int c = chunks[k], p = chunks[1 - k];
      partner_[static_cast<std::size_t>(c)] = p;
      if (!config.synthetic && lowered.chunk_rank[c] == rank_ && lowered.chunk_rank[p] != rank_)
        partner_recv_[static_cast<std::size_t>(c)] = backend.allocate(stage(c).param_count());
    }
  }
  // Long kernels (CPU GEMMs) poll the messages in flight between their slices.
  backend_.set_progress_poll([this] { poll_in_flight(); });
}

Executor::~Executor() {
  backend_.set_progress_poll({});
  for (Tensor& t : inputs_)
    if (t.buffer >= 0 && !t.request.valid()) pool_.release(t.buffer);
  for (int b : outputs_)
    if (b >= 0) pool_.release(b);
}

[[noreturn]] void Executor::missing(const Action& a, const char* what) const {
  throw std::logic_error("rank " + std::to_string(rank_) + ": " + to_string(a) + ": " + what);
}

void Executor::post_recv(const Action& a) {
  const int m = static_cast<int>(a.mb);
  const int peer = peer_rank(lowered_, a);
  if (peer < 0 || peer == rank_) missing(a, "no remote peer for this receive");
  const MessageName msg = comm_message(a, lowered_.routes[static_cast<std::size_t>(m)]);
  const std::size_t slot = key(msg.dir, static_cast<int>(consumer_chunk(msg)), m);
  Tensor& t = inputs_[slot];
  if (t.buffer >= 0) missing(a, "its tensor is already there");
  t.buffer = pool_.acquire();
  t.comm = current_comm_;
  const int tag = message_tag(direction(msg), static_cast<int>(producer_chunk(msg)), m,
                              lowered_.num_chunks(), kMessageTagLimit);
  t.request = transport_.irecv(pool_.data(t.buffer), pool_.count(), peer, tag);
  if (current_comm_ >= 0) comm_tokens_[static_cast<std::size_t>(current_comm_)] = t.request.timing;
  recvs_.push_back(slot);
}

void Executor::post_send(const Action& a) {
  const int m = static_cast<int>(a.mb);
  const int peer = peer_rank(lowered_, a);
  if (peer < 0 || peer == rank_) missing(a, "no remote peer for this send");
  const MessageName msg = comm_message(a, lowered_.routes[static_cast<std::size_t>(m)]);
  const int c = static_cast<int>(producer_chunk(msg));
  int& out = outputs_[key(msg.dir, c, m)];
  if (out < 0) missing(a, "nothing to send (its producer has not run)");
  const int buffer = out;
  out = -1;
  if (config_.drop_sends) {
    pool_.release(buffer);
    return;
  }
  const int tag = message_tag(direction(msg), c, m, lowered_.num_chunks(), kMessageTagLimit);
  const Request r = transport_.isend(pool_.data(buffer), pool_.count(), peer, tag);
  if (current_comm_ >= 0) comm_tokens_[static_cast<std::size_t>(current_comm_)] = r.timing;
  sends_.push_back({buffer, r, a, peer, current_comm_});
  // One progress poll right away: an eager send leaves now rather than after the next
  // compute (MPI moves data only inside MPI calls).
  progress_sends();
}

void Executor::progress_sends() {
  for (std::size_t i = 0; i < sends_.size();) {
    if (transport_.test(sends_[i].request)) {
      if (sends_[i].comm >= 0)
        (*comm_records_)[static_cast<std::size_t>(sends_[i].comm)].end =
            backend_.now() - comm_origin_;
      if (config_.hold_sends)
        held_.push_back(sends_[i].buffer);
      else
        pool_.release(sends_[i].buffer);
      sends_[i] = sends_.back();
      sends_.pop_back();
    } else {
      ++i;
    }
  }
}

void Executor::progress_all() {
  progress_sends();
  for (std::size_t i = 0; i < recvs_.size();) {
    Tensor& t = inputs_[recvs_[i]];
    if (!t.request.valid() || transport_.test(t.request)) {
      recvs_[i] = recvs_.back();
      recvs_.pop_back();
    } else {
      ++i;
    }
  }
}

void Executor::poll_in_flight() {
  if (!sends_.empty() || !recvs_.empty()) progress_all();
}

void Executor::finish_sends() {
  const struct Release {  // the held buffers, also when the wait throws
    std::vector<int>& held;
    BufferPool& pool;
    ~Release() {
      for (int b : held) pool.release(b);
      held.clear();
    }
  } release{held_, pool_};
  wait_until(
      [&] {
        progress_sends();
        return sends_.empty();
      },
      config_.timeout_s,
      [&] {
        const PendingSend& s = sends_.front();
        return "rank " + std::to_string(rank_) + ": waiting " + std::string(op_name(s.action.op)) +
               " " + where(s.action) + " to rank " + std::to_string(s.peer);
      });
}

void Executor::await_input(Tensor& t, const Action& consumer, int dir) {
  if (t.buffer < 0)
    missing(consumer, dir == 0 ? "no input activation (no RECV_F and no local producer)"
                               : "no output gradient (no RECV_B and no local producer)");
  if (!t.request.valid()) return;
  // NCCL: the compute stream waits for the receive on the device; the host goes on.
  if (transport_.consume(t.request)) return;
  wait_until([&] { return transport_.test(t.request); }, [&] { progress_all(); }, config_.timeout_s,
             [&] {
               const MessageName in =
                   message_in(consumer, lowered_.routes[static_cast<std::size_t>(consumer.mb)]);
               const int peer = in.none() ? -1 : producer_rank(lowered_, in);
               return "rank " + std::to_string(rank_) + ": waiting " +
                      (dir == 0 ? "RECV_F " : "RECV_B ") + where(consumer) + " from rank " +
                      std::to_string(peer);
             });
}

void Executor::sample_units() {
  double units = 0;
  for (int c : local_chunks_) units += stage(c).in_flight() * fraction(c);
  peak_units_ = std::max(peak_units_, units);
}

void Executor::reset_peaks() {
  meter_.reset_peak();
  peak_units_ = 0;
  sample_units();
}

void Executor::compute_forward(const Action& a) {
  const int c = a.chunk, m = static_cast<int>(a.mb);
  const Route& route = lowered_.routes[static_cast<std::size_t>(m)];
  ChunkModel& st = stage(c);
  int x;
  if (message_in(a, route).none()) {  // the route's first chunk: the input is made here
    x = pool_.acquire();
    st.make_input(m, pool_.data(x));
  } else {
    Tensor& t = inputs_[key(0, c, m)];
    x = t.buffer;
    t = Tensor{};
  }
  const int y = pool_.acquire();
  st.forward(m, pool_.data(x), pool_.data(y));
  pool_.release(x);
  const MessageName out = message_out(a, route);
  if (out.none()) {  // the route's last chunk: the loss gradient is its backward's input
    st.loss(m, lowered_.M, pool_.data(y), pool_.data(y));
    Tensor& g = inputs_[key(1, c, m)];
    if (g.buffer >= 0) missing(a, "its loss gradient is already there");
    g.buffer = y;
  } else if (consumer_rank(lowered_, out) == rank_) {
    Tensor& next = inputs_[key(0, static_cast<int>(consumer_chunk(out)), m)];
    if (next.buffer >= 0) missing(a, "the next chunk's input is already there");
    next.buffer = y;
  } else {
    int& out = outputs_[key(0, c, m)];
    if (out >= 0) missing(a, "its previous output was never sent");
    out = y;
  }
}

void Executor::compute_backward(const Action& a) {
  const int c = a.chunk, m = static_cast<int>(a.mb);
  const Route& route = lowered_.routes[static_cast<std::size_t>(m)];
  ChunkModel& st = stage(c);
  Tensor& g = inputs_[key(1, c, m)];
  const int dy = g.buffer;
  g = Tensor{};
  const MessageName out = message_out(a, route);
  const int dx = out.none() ? -1 : pool_.acquire();  // none at the route's first chunk
  const TensorPtr dx_ptr = dx >= 0 ? pool_.data(dx) : TensorPtr();
  if (a.op == Op::B)
    st.backward_input(m, pool_.data(dy), dx_ptr);
  else
    st.backward_full(m, pool_.data(dy), dx_ptr);
  pool_.release(dy);
  if (dx < 0) return;
  if (consumer_rank(lowered_, out) == rank_) {
    Tensor& prev = inputs_[key(1, static_cast<int>(consumer_chunk(out)), m)];
    if (prev.buffer >= 0) missing(a, "the previous chunk's gradient is already there");
    prev.buffer = dx;
  } else {
    int& out = outputs_[key(1, c, m)];
    if (out >= 0) missing(a, "its previous input gradient was never sent");
    out = dx;
  }
}

// On CPU: sleeps until shortly before the deadline, then polls the clock with sched_yield()
// in between. A sleep alone overshoots by the kernel's wake-up latency (tens of µs, with a
// tail beyond 100 µs in VMs), which would lengthen every action by a random amount; a plain
// spin instead would keep other ranks sharing the core from waking up on time. The polling
// phase is at most 20% of the action and 300 µs. The sleep is cut into slices of at most
// kProgressSlice with one progress poll of the messages in flight between them, as a real
// device computing while the host drives the transport (without it a message sent or received
// during a long compute would wait for its end). Other backends' sleep_for is exact already
// (a GPU spin kernel).
void Executor::sleep_synthetic(double seconds) {
  if (seconds <= 0) return;
  if (backend_.kind() != BackendKind::kCpu) {
    backend_.sleep_for(seconds);
    return;
  }
  constexpr double kProgressSlice = 100e-6;
  const double deadline = backend_.now() + seconds;
  const double spin_from = deadline - std::min(0.2 * seconds, 300e-6);
  for (double now = backend_.now(); now < spin_from; now = backend_.now()) {
    poll_in_flight();
    backend_.sleep_for(std::min(spin_from - now, kProgressSlice));
  }
  while (backend_.now() < deadline) std::this_thread::yield();
}

double Executor::synthetic_time(const Action* a, std::size_t n) const {
  if (n == 2 && config_.t_fb >= 0) return config_.t_fb * fraction(a[0].chunk);
  double t = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const double f = fraction(a[k].chunk);
    switch (a[k].op) {
      case Op::F:
        t += config_.t_f * f;
        break;
      case Op::B:
        t += config_.t_b * f;
        break;
      case Op::W:
        t += config_.t_w * f;
        break;
      case Op::BW:
        t += (config_.t_b + config_.t_w) * f;
        break;
      default:
        break;
    }
  }
  return t;
}

void Executor::run_step(StepRecord* record) {
  const auto& acts = lowered_.ranks[static_cast<std::size_t>(rank_)];
  std::vector<PendingRecord> pending;
  double origin = 0;
  comm_records_ = nullptr;
  current_comm_ = -1;
  comm_tokens_.clear();
  transport_.begin_timing(record != nullptr);
  if (record != nullptr) {
    backend_.begin_marks();
    origin = backend_.mark_origin();
    pending.reserve(acts.size());
    record->comms.clear();
    record->comms.reserve(acts.size());
    comm_records_ = &record->comms;
    comm_origin_ = origin;
  }
  comm_time_ = 0;
  double comm_at_last_end = 0;  // comm_time_ when the last compute so far ended
  for (std::size_t i = 0; i < acts.size();) {
    const Action& a = acts[i];
    if (is_comm(a.op)) {
      const double t0 = backend_.now();
      if (comm_records_ != nullptr) {
        current_comm_ = static_cast<int>(comm_records_->size());
        comm_records_->push_back({static_cast<std::uint32_t>(i), a.mb,
                                  static_cast<std::uint16_t>(a.chunk), a.op, t0 - origin,
                                  t0 - origin});
        comm_tokens_.push_back(-1);
      }
      if (is_recv(a.op))
        post_recv(a);
      else
        post_send(a);
      comm_time_ += backend_.now() - t0;
      ++i;
      continue;
    }
    const std::size_t n = unit_length(a, acts.size() - i);
    const double ready = backend_.now();
    const std::size_t ready_mark = record != nullptr ? backend_.mark() : 0;
    int received[2] = {-1, -1};  // CommRecords of the receives this compute consumes
    for (std::size_t k = 0; k < n; ++k) {
      const Action& b = acts[i + k];
      const int c = b.chunk, m = static_cast<int>(b.mb);
      Tensor* t = nullptr;
      if (b.op == Op::F && !message_in(b, lowered_.routes[static_cast<std::size_t>(m)]).none())
        await_input(*(t = &inputs_[key(0, c, m)]), b, 0);
      else if (b.op == Op::B || b.op == Op::BW)
        await_input(*(t = &inputs_[key(1, c, m)]), b, 1);
      if (t != nullptr) received[k] = t->comm;
    }
    const double wait_end = backend_.now();
    const double waited = wait_end - ready;
    for (const int rc : received)
      if (rc >= 0) (*comm_records_)[static_cast<std::size_t>(rc)].end = wait_end - origin;
    const std::size_t start_mark = record != nullptr ? backend_.mark() : 0;
    for (std::size_t k = 0; k < n; ++k) {
      const Action& b = acts[i + k];
      if (b.op == Op::F)
        compute_forward(b);
      else if (b.op == Op::W)
        stage(b.chunk).backward_weight(static_cast<int>(b.mb));
      else
        compute_backward(b);
      sample_units();
    }
    if (config_.synthetic || config_.debug_delay_s > 0)
      sleep_synthetic((config_.synthetic ? synthetic_time(&a, n) : 0.0) + config_.debug_delay_s);
    const std::size_t end_mark = record != nullptr ? backend_.mark() : 0;
    comm_at_last_end = comm_time_;
    // One progress poll of every message in flight (a rendezvous receive moves only while
    // this rank polls), not only of the sends.
    poll_in_flight();
    if (record != nullptr) {
      ActionRecord r;
      r.index = static_cast<std::uint32_t>(i);
      r.mb = a.mb;
      r.chunk = a.chunk;
      r.kind = n == 2 ? RecordKind::FB : kind_of(a.op);
      r.fraction = fraction(a.chunk);
      r.wait = waited;
      pending.push_back({r, ready_mark, start_mark, end_mark});
    }
    i += n;
  }
  const double t0 = backend_.now();
  finish_sends();
  comm_time_ += backend_.now() - t0;
  comm_records_ = nullptr;
  current_comm_ = -1;
  recvs_.clear();  // every receive was consumed by its compute
  for (std::size_t k = 0; k < inputs_.size(); ++k)
    if (inputs_[k].buffer >= 0 || outputs_[k] >= 0)
      throw std::logic_error("rank " + std::to_string(rank_) + ": chunk " +
                             std::to_string(k / 2 / static_cast<std::size_t>(lowered_.M)) + " mb " +
                             std::to_string(k / 2 % static_cast<std::size_t>(lowered_.M)) +
                             ": a tensor was left unused at the end of the step");
  // The device may still be working through the step, or waiting for a receive that never
  // completes (NCCL receives the compute stream waits on, with no host wait of their own): a
  // bare synchronize would outlast the watchdog. Poll it under the deadline first.
  wait_until(
      [&] {
        transport_.check_errors();
        return backend_.queue_done();
      },
      config_.timeout_s,
      [&] {
        return "rank " + std::to_string(rank_) +
               ": waiting for the device to finish the step (a receive it waits for never "
               "completed?)";
      });
  if (record == nullptr) return;
  backend_.synchronize();
  finish_record(*record, pending, origin, comm_at_last_end);
}

// After the step, on the device's clock: the compute records from their marks, the waits from
// them, and SEND/RECV from the transport's device timing where it has one (NCCL).
void Executor::finish_record(StepRecord& rec, std::vector<PendingRecord>& pending, double origin,
                             double comm_at_last_end) {
  rec.origin = origin;
  rec.actions.clear();
  rec.busy = 0;
  rec.wait = 0;
  rec.comm = comm_time_;
  rec.comm_tail = comm_time_ - comm_at_last_end;
  rec.first_start = 0;
  rec.last_end = 0;
  rec.num_actions = lowered_.ranks[static_cast<std::size_t>(rank_)].size();
  for (std::size_t k = 0; k < rec.comms.size() && k < comm_tokens_.size(); ++k) {
    double start = 0, end = 0;
    if (comm_tokens_[k] >= 0 && transport_.op_seconds(comm_tokens_[k], &start, &end)) {
      rec.comms[k].start = start;
      rec.comms[k].end = end;
    }
  }
  for (PendingRecord& p : pending) {
    p.rec.ready = backend_.mark_seconds(p.ready_mark);
    p.rec.start = backend_.mark_seconds(p.start_mark);
    p.rec.end = backend_.mark_seconds(p.end_mark);
    rec.busy += p.rec.end - p.rec.start;
    rec.wait += p.rec.start - p.rec.ready;
    rec.last_end = std::max(rec.last_end, p.rec.end);
    rec.actions.push_back(p.rec);
  }
  if (!rec.actions.empty()) rec.first_start = rec.actions.front().start;
}

void Executor::sum_partner_gradients() {
  if (config_.synthetic) return;
  std::vector<int> remote;  // local chunks whose partner copy is on another rank
  for (int c : local_chunks_) {
    const int p = partner_[static_cast<std::size_t>(c)];
    if (p < 0) continue;
    if (lowered_.chunk_rank[p] != rank_) {
      remote.push_back(c);
    } else if (c < p) {  // both copies here: sum once, into both
      backend_.axpy(1.0f, stage(p).grads(), stage(c).grads(), stage(c).param_count());
      backend_.copy(stage(c).grads(), stage(p).grads(), stage(c).param_count());
    }
  }
  if (remote.empty()) return;
  // Both partners post in stage order, so the order agrees on both sides (NCCL matches in
  // order). Float addition commutes: both copies end up bit-identical.
  std::sort(remote.begin(), remote.end(),
            [&](int a, int b) { return lowered_.chunk_stage[a] < lowered_.chunk_stage[b]; });
  std::vector<Request> reqs;
  transport_.group_begin();
  for (int c : remote) {
    const int peer = lowered_.chunk_rank[partner_[static_cast<std::size_t>(c)]];
    const int tag = kGradientTagBase + lowered_.chunk_stage[c] % (32767 - kGradientTagBase);
    ChunkModel& st = stage(c);
    reqs.push_back(transport_.isend(st.grads(), st.param_count(), peer, tag));
    reqs.push_back(transport_.irecv(partner_recv_[static_cast<std::size_t>(c)].data(),
                                    st.param_count(), peer, tag));
  }
  transport_.group_end();
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const int c = remote[i / 2];
    wait_until([&] { return transport_.test(reqs[i]); }, config_.timeout_s,
               [&] {
                 return "rank " + std::to_string(rank_) +
                        ": waiting for the weight gradients of stage " +
                        std::to_string(lowered_.chunk_stage[c]) + " " +
                        (i % 2 == 0 ? "to" : "from") + " rank " +
                        std::to_string(lowered_.chunk_rank[partner_[static_cast<std::size_t>(c)]]);
               });
  }
  for (int c : remote) {
    ChunkModel& st = stage(c);
    backend_.axpy(1.0f, partner_recv_[static_cast<std::size_t>(c)].data(), st.grads(),
                  st.param_count());
  }
}

void Executor::optimizer_step() {
  for (int c : local_chunks_) stage(c).optimizer_step(config_.optimizer);
}

void Executor::zero_grads() {
  for (int c : local_chunks_) stage(c).zero_grads();
}

void Executor::reset_loss() {
  for (int c : local_chunks_) stage(c).reset_loss();
}

double Executor::loss_sum() {
  double sum = 0;
  for (int c : local_chunks_) sum += stage(c).loss_sum();
  return sum;
}

GradientSet Executor::gradients() const {
  GradientSet out;
  for (int c : local_chunks_) {
    bool primary = true;
    for (int p = 0; p < c; ++p)
      primary = primary && lowered_.chunk_stage[p] != lowered_.chunk_stage[c];
    if (primary) append_gradients(*stages_[static_cast<std::size_t>(c)], out);
  }
  return out;
}

std::size_t Executor::param_bytes() const {
  std::size_t total = 0;
  for (int c : local_chunks_) total += stages_[static_cast<std::size_t>(c)]->param_bytes();
  return total;
}

}  // namespace bb
