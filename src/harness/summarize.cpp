#include "harness/summarize.hpp"

#include <cmath>
#include <memory>

#include "harness/memory.hpp"
#include "harness/metrics.hpp"
#include "model/closed_form.hpp"
#include "model/layout.hpp"
#include "model/partition.hpp"
#include "runtime/executor.hpp"
#include "sim/attribution.hpp"
#include "sim/links.hpp"
#include "sim/sim.hpp"

namespace bb::harness {
namespace {

// Per-kind medians (stage units) over every rank's timed actions.
struct KindTimes {
  std::optional<double> f, b, w, fb;  // b: B, or the fused BW where the backward is not split
};

KindTimes kind_times(const std::vector<RankSummary>& ranks) {
  double m[kKinds];
  for (int k = 0; k < kKinds; ++k) {
    std::vector<double> d;
    for (const RankSummary& r : ranks)
      d.insert(d.end(), r.durations[k].begin(), r.durations[k].end());
    m[k] = median(d);
  }
  auto get = [&](RecordKind k) {
    const double x = m[static_cast<int>(k)];
    return std::isnan(x) ? std::nullopt : std::optional<double>(x);
  };
  KindTimes t;
  t.f = get(RecordKind::F);
  if (const auto b = get(RecordKind::B)) {
    t.b = b;
    t.w = get(RecordKind::W).value_or(0);
  } else {
    t.b = get(RecordKind::BW);
  }
  t.fb = get(RecordKind::FB);
  return t;
}

void set_configuration(RunSummary& s, const RunConfig& c, const RunSettings& o) {
  const Schedule& sched = *c.lowered;
  s.run_key = c.key;
  s.schedule = c.schedule;
  s.P = sched.P;
  s.M = sched.M;
  s.v = sched.v;
  s.recompute = c.recompute;
  s.hold_sends = o.hold_sends;
  s.backend = o.backend;
  s.transport = o.transport;
  s.compute = o.compute;
  s.dtype = o.dtype;
  s.sync = o.sync;
  s.optimizer = o.optimizer;
  s.hidden = c.hidden;
  s.layers = c.layers;
  s.mb_size = c.mb_size;
  s.stage = o.stage;
  s.seq = o.seq;
  s.heads = o.heads;
  s.ffn = o.ffn;
  s.causal = o.causal;
  s.vocab = o.vocab;
  const ExecutorConfig ec = executor_config(o, c.hidden, c.layers, c.mb_size);
  const int stages = model_stages(sched);
  s.model = o.model;
  s.model_layers = model_layer_count(ec, stages);
  s.partition = partition_text(stage_layers(ec, stages));
  s.partition_layout = layout_text(stage_layers(ec, stages));
  s.model_params = static_cast<std::int64_t>(model_param_count(ec, stages));
  s.message_bytes = static_cast<std::int64_t>(message_bytes(ec));
  s.warmup = o.warmup;
  s.iters = o.iters;
  s.seed = o.seed;
  s.lr = o.lr;
  s.synthetic = o.synthetic();
  s.synthetic_t_f_s = o.t_f;
  s.synthetic_t_b_s = o.t_b;
  s.synthetic_t_w_s = o.t_w;
  if (o.t_fb >= 0) s.synthetic_t_fb_s = o.t_fb;
}

// The attribution of the measured bubble (sim/attribution.hpp): every rank's compute events,
// the measured span of every step (the makespan, or with --sync none the period) and the link
// costs. Links: the known delay of --debug-link-delay (testing); otherwise the launch's
// calibrated fits of the run's pairs; free when there are none (--no-calibrate).
std::optional<RunSummary::Attribution> attribution(const RunConfig& c, const RunSettings& o,
                                                   const std::vector<RankSummary>& ranks,
                                                   const StepSeries& m,
                                                   const std::vector<LinkFit>& links) {
  const std::size_t n = ranks.empty() ? 0 : ranks[0].steps.size();
  AttributionInput in;
  in.lowered = c.lowered.get();
  in.back_to_back = !o.barrier();
  in.records.assign(ranks.size(), std::vector<std::vector<MeasuredUnit>>(n));
  for (std::size_t r = 0; r < ranks.size(); ++r)
    for (const EventSummary& e : ranks[r].events)
      if (static_cast<int>(e.kind) < kFirstCommKind && static_cast<std::size_t>(e.iter) < n)
        in.records[r][static_cast<std::size_t>(e.iter)].push_back(
            {static_cast<std::uint32_t>(e.index), e.start, e.end});
  if (o.barrier()) {
    in.span = m.step_time;
  } else {  // the first step has no period
    in.span.assign(1, 0.0);
    in.span.insert(in.span.end(), m.period.begin(), m.period.end());
  }
  // One activation message: mb_size x hidden (x seq for transformer stages) elements of dtype.
  in.message_bytes =
      static_cast<double>(message_bytes(executor_config(o, c.hidden, c.layers, c.mb_size)));
  if (o.debug_link_src >= 0)
    in.link = [src = o.debug_link_src, dst = o.debug_link_dst, d = o.debug_link_delay_s](
                  int a, int b, double) { return a == src && b == dst ? d : 0.0; };
  else if (!links.empty())
    in.link = [model = std::make_shared<const LinkModel>(links)](int a, int b, double bytes) {
      return model->cost(a, b, bytes);
    };
  const Attribution at = attribute(in);
  if (at.steps.empty()) return std::nullopt;
  const AttributionTerms& t = at.median;
  return RunSummary::Attribution{t.schedule, t.imbalance, t.jitter, t.communication, t.residual};
}

}  // namespace

RunSummary summarize(const RunConfig& c, const RunSettings& o,
                     const std::vector<RankSummary>& ranks, const Placement& where,
                     const CheckOutcome& check, const std::vector<LinkFit>& links) {
  const Schedule& sched = *c.lowered;
  RunSummary s;
  set_configuration(s, c, o);
  const StepSeries m = measure_steps(ranks, where.clock);
  s.step_time_s = m.step_time;
  s.makespan_s = median(m.step_time);
  s.bubble_fraction_measured = o.barrier() ? median(m.fraction) : median(m.fraction_steady);
  if (!o.barrier()) s.period_s = median(m.period);
  s.clock = clock_name(where.clock);
  s.overhead_us_per_action = median(m.overhead) * 1e6;

  const KindTimes k = kind_times(ranks);
  s.t_f_s = k.f;
  s.t_b_s = k.b;
  s.t_w_s = k.w;
  s.t_fb_s = k.fb;
  // Stage-unit times for the simulator and the closed form: B and W where the backward is
  // split somewhere in the schedule, else the fused BW as B with W = 0.
  const double t_f = k.f.value_or(0), t_b = k.b.value_or(0), t_w = k.w.value_or(0);
  const double t_fb = k.fb.value_or(-1);
  // The model's activation bytes of one micro-batch-stage: the F-time footprint of a chunk
  // (chunk_forward_bytes: 9·L·b·h elements for the MLP, the chunk input with recompute),
  // divided by the chunk's fraction of a stage. (After B a chunk holds more until W: the
  // runtime's peak lies between.)
  ExecutorConfig ec =
      widest_chunk(executor_config(o, c.hidden, c.layers, c.mb_size), model_stages(sched));
  ec.recompute = c.recompute;
  const double chunk_bytes = static_cast<double>(chunk_forward_bytes(ec));
  SimConfig sc;
  sc.t_f = {t_f};
  sc.t_b = {t_b};
  sc.t_w = {t_w};
  sc.t_fb = t_fb;
  sc.act_bytes = chunk_bytes / sched.chunk_fraction(0);
  if (o.partition_costs && o.model_layers > 0) {  // --partition auto: the profile's chunks
    const ChunkCosts cc =
        partition_chunk_costs(*o.partition_costs, sched, stage_layers(ec, model_stages(sched)));
    sc.t_f = cc.f;
    sc.t_b = cc.b;
    sc.t_w = cc.w;
    sc.t_fb = -1;
  }
  sc.record_events = true;  // the memory model's times
  const SimResult sim = simulate(sched, sc);
  const std::vector<RankMemory> memory =
      rank_memory(sched, memory_config(c, o), {&sim.events, &sc});
  const ModelResult model =
      closed_form({c.schedule, sched.P, sched.M, sched.v, t_f, t_b, t_w, t_fb});
  s.bubble_fraction_sim = o.barrier() ? sim.single.bubble_fraction : sim.steady.bubble_fraction;
  if (model.applies)
    s.bubble_fraction_model =
        o.barrier() ? model.single.bubble_fraction : model.steady.bubble_fraction;
  else
    s.model_reason = model.reason;
  s.attribution = attribution(c, o, ranks, m, links);
  s.check = check.status;
  s.check_max_rel_error = check.max_rel_error;
  s.check_message = check.message;
  s.loss_step0 = check.loss;

  const std::vector<double> schedule_peaks = peak_activations(sched);
  // FLOPs with each stage's own blocks (ec is the widest chunk's, for the estimates above).
  const std::vector<double> flops =
      step_flops(sched, executor_config(o, c.hidden, c.layers, c.mb_size));
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const RankSummary& x = ranks[r];
    std::vector<double> b, w, cm;
    for (const StepSummary& st : x.steps) {
      b.push_back(st.busy);
      w.push_back(st.wait);
      cm.push_back(st.comm);
    }
    RankResult rr;
    if (r < where.ranks.size()) rr.where = where.ranks[r];
    rr.busy_s = median(b);
    rr.wait_s = median(w);
    rr.comm_s = median(cm);
    rr.peak_activations = x.peak_units;
    rr.peak_activations_schedule = r < schedule_peaks.size() ? schedule_peaks[r] : 0;
    rr.peak_activation_bytes = x.peak_bytes;
    rr.param_bytes = x.param_bytes;
    rr.peak_device_bytes = x.peak_device_bytes;
    rr.runtime_bytes = x.runtime_bytes;
    rr.comm_device_bytes = x.comm_device_bytes;
    rr.pinned_host_bytes = x.pinned_host_bytes;
    rr.device_used_peak_bytes = x.device_used_peak_bytes;
    rr.peak_activation_bytes_model = sim.ranks.at(r).peak_activation_bytes;
    RankMemory predicted = memory.at(r);
    add_runtime_bytes(predicted, x.runtime_bytes + x.comm_device_bytes);
    rr.memory_model_bytes = predicted.peak_bytes;
    rr.peak_memory_bytes_model = predicted.peak;
    rr.flops = r < flops.size() ? flops[r] : 0;
    s.ranks.push_back(std::move(rr));
  }
  return s;
}

}  // namespace bb::harness
