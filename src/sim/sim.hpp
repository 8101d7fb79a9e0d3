// Timed discrete-event simulation of a schedule: per-chunk F/B/W (and FB) costs, an α-β link
// per point-to-point message, live-activation accounting per rank. Every action starts as
// soon as its rank is free and its inputs have arrived; sends do not block (compute and
// communication overlap).
#pragma once

#include <memory>
#include <vector>

#include "common/bubble_metrics.hpp"
#include "schedule/periodic.hpp"
#include "schedule/schedule.hpp"
#include "sim/links.hpp"

namespace bb {

struct SimConfig {
  // Per-stage times of one micro-batch (a chunk takes its share, e.g. F/v), or, with one entry
  // per chunk, each chunk's own time.
  std::vector<double> t_f{1.0}, t_b{2.0}, t_w{0.0};
  // Time of one overlapped F & B pair of a stage (DualPipe); < 0: F + the backward's time.
  double t_fb = -1;
  double latency = 0;          // seconds (units) per message
  double bandwidth = 0;        // bytes per unit time; 0: infinite
  double msg_bytes = 0;        // bytes of one activation / gradient message
  double act_bytes = 0;        // bytes kept for backward by one micro-batch of one stage
  double optimizer_time = 0;   // between steps, per rank
  int steps = 4;               // back-to-back steps for the steady-state period (>= 2)
  bool record_events = false;  // keep the single-step timeline
  // automatic: the periodic engine (periodic_engine.hpp) on large schedules it fits, else the
  // plain one; periodic: try it whatever the size; plain: never. Results are the same.
  enum class Engine { automatic, plain, periodic } engine = Engine::automatic;
  // Fitted per-pair costs (sim/links.hpp, seconds): a message between a pair it covers costs
  // links->cost(src, dst, msg_bytes) instead of latency + msg_bytes / bandwidth (and the
  // periodic engine is not used).
  std::shared_ptr<const LinkModel> links;
};

struct SimEvent {
  int rank;
  std::size_t index;  // in the rank's action list
  int n;              // 2 for an FB pair
  double ready;       // rank free (start - ready = waiting for input)
  double start, end;
};

struct RankStats {
  double busy = 0, first_start = 0, last_end = 0;
  double peak_activations = 0;  // micro-batch-stage units
  double peak_activation_bytes = 0;
};

struct SimResult {
  double t_ideal = 0;  // M*(F+B+W) (uniform) or the busiest rank's work (per-chunk)
  double busy_sum = 0;
  BubbleMetrics single;  // one step on its own: span = makespan
  BubbleMetrics steady;  // back-to-back steps: span = period
  std::vector<RankStats> ranks;
  std::size_t p2p_messages = 0;  // per step
  std::vector<SimEvent> events;  // single step, when asked; by rank, then list order
  std::size_t jumped_units = 0;  // compute units the periodic engine skipped (0: not used)
};

// Time of one message from rank src to rank dst: the pair's fit where cfg.links has one, else
// latency + msg_bytes / bandwidth (what the simulator charges).
double message_time(const SimConfig& cfg, int src, int dst);

// Peak live activations per rank (micro-batch-stage units) from the action order alone.
std::vector<double> peak_activations(const Schedule& s);
// Point-to-point messages of one step (as SimResult::p2p_messages), from the action lists alone.
std::size_t p2p_messages(const Schedule& s);

// Throws ScheduleError if the schedule gets stuck (a cyclic wait), ConfigError for bad costs.
SimResult simulate(const Schedule& s, const SimConfig& cfg);
// The same on lists in periodic form (the periodic engine, where it fits; else on the flat
// lists): the same result.
SimResult simulate(const PeriodicSchedule& s, const SimConfig& cfg);

}  // namespace bb
