// The schedule advisor (docs/advise.md): every accepted configuration (schedule x M x v x
// recompute) of a pipeline of P ranks simulated with the given costs, each one's peak memory
// per rank, those over a memory cap excluded, the rest ranked by predicted time per sample.
// Pure: no MPI, no files (the command line reads the costs: bench/cli/advise.cpp).
//
// The model, per configuration:
//   * costs: T_F, T_B, T_W of one stage for one micro-batch of `mb_size` samples (one value, or
//     a profile of N values in stage units: the model cut into N equal parts, e.g. one per
//     stage, chunk c taking the time of the part its model stage lies in times its chunk
//     fraction). With a global batch G, a configuration with M micro-batches runs
//     micro-batches of G/M samples and every time and activation size scales by
//     (G/M) / mb_size (linear in the micro-batch size).
//   * recompute: every B also re-runs the chunk's forward (T_B + T_F); a micro-batch keeps only
//     its chunk input (input_bytes per chunk) between F and B, and the chunk being recomputed
//     holds its full activations (act_bytes x chunk fraction) once more.
//   * memory of rank r: the memory model (sim/memory.hpp, memory_config below) on the order of
//     the rank's list: per chunk its share of static_factor x param_bytes (parameters,
//     gradients, optimizer state) and of workspace_bytes; per micro-batch in flight its input
//     (input_bytes) and saved tensors (saved_bytes x chunk share; with recompute from B to W
//     only); message buffers of input_bytes (sends complete when posted: the order alone, no
//     times); DualPipe's partner gradients.
//   * time: the simulator (sim/sim.hpp) on the periodic form, single step (makespan) and
//     steady state (period); messages cost latency + bytes / bandwidth.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "sim/memory.hpp"

namespace bb::advise {

struct Input {
  int P = 4;
  std::vector<std::string> schedules;  // built-in names (bb::sweep_names of "all" for every one)
  std::vector<int> Ms{8};              // micro-batch counts to consider
  std::vector<int> vs{1};              // chunks per rank, for schedules that take v
  std::vector<bool> recompute{false};  // settings to consider
  // Seconds of one stage for one micro-batch of mb_size samples: 1 value or a profile.
  std::vector<double> t_f{1.0}, t_b{1.0}, t_w{1.0};
  // An overlapped F & B pair (DualPipe's: an F and a whole backward) costs fb_factor x
  // (F + B + W) of the mean stage; 1: the sum, as the simulator's default.
  double fb_factor = 1;
  // Per rank, a factor on every F, B and W of its chunks (a rank slower or faster than the
  // costs say; F&B pairs keep fb_factor's time); empty: 1 for every rank.
  std::vector<double> rank_speed{};
  // > 0: the model is fixed, a stage holds this many blocks (a results file's run); a
  // configuration whose chunks would hold a fractional number of blocks is refused.
  double stage_blocks = 0;
  int mb_size = 1;         // samples of the micro-batch the costs and bytes were measured at
  int global_batch = 0;    // > 0: M x (micro-batch size) = global_batch, M must divide it
  double act_bytes = 0;    // bytes one micro-batch keeps on one stage from F to B (no recompute)
  double input_bytes = 0;  // bytes of one chunk's input (the P2P message; recompute keeps it)
  // Bytes a micro-batch's saved tensors take on one stage from F to W as allocated (forward and
  // backward areas); 0: act_bytes less a chunk's input.
  double saved_bytes = 0;
  double workspace_bytes = 0;  // a stage's scratch and work areas (not per micro-batch)
  double param_bytes = 0;      // parameter bytes of one stage (a rank of a looped v=1 pipeline)
  double static_factor = 2;    // bytes per parameter byte: 2 params+grads (SGD), 4 with Adam
  double memory_cap = 0;       // bytes per rank; 0: no cap
  double latency = 0;          // seconds per message
  double bandwidth = 0;        // bytes per second; 0: infinite
  bool steady = false;         // rank by the steady-state period instead of the single step
  int steps = 4;               // simulated back-to-back steps for the steady state
};

// One configuration and what the simulator predicts for it.
struct Candidate {
  std::string schedule;
  int M = 0, v = 1;
  bool recompute = false;
  double mb_size = 0;  // samples per micro-batch
  // Excluded: "refused" (the generator does not accept it) or "memory" (over the cap); else "".
  std::string excluded;
  std::string reason;               // why, in words
  double makespan = 0, period = 0;  // seconds: single step, steady-state period
  double bubble_fraction = 0, bubble_fraction_steady = 0;
  double step_time = 0;   // the ranking view's (makespan, or period with steady)
  double throughput = 0;  // samples per second in that view
  // Terms of step_time, seconds: the busiest rank's compute (work), its recompute share,
  // communication (the step time above a run with free messages) and bubble (the rest).
  double t_compute = 0, t_recompute = 0, t_communication = 0, t_bubble = 0;
  std::string dominant;  // "compute", "recompute", "communication" or "bubble"
  // Per rank, the memory model's peak: its activations and messages (their pools' peaks), its
  // static bytes (weights, optimizer state, workspaces) and their sum (memory_bytes); peak_bytes
  // = the largest rank's.
  std::vector<double> activation_bytes, static_bytes, memory_bytes;
  std::vector<double> busy;  // per rank: its compute in the single step, seconds
  double peak_bytes = 0;
  int peak_rank = 0;
};

// A family: one schedule with one v and one recompute setting, over every M.
struct Family {
  std::string schedule;
  int v = 1;
  bool recompute = false;
  // "" when one of its configurations is ranked in the top K; else "refused", "memory",
  // "dominated" (its best is slower and not smaller than a ranked configuration) or
  // "outranked" (neither: just not among the best K).
  std::string excluded;
  std::string reason;
};

struct Result {
  std::vector<Candidate> ranked;    // accepted and under the cap, best first
  std::vector<Candidate> excluded;  // refused or over the cap, in search order
  std::vector<Family> families;     // in search order
  std::size_t simulations = 0;
};

// Checks the input (ConfigError naming the field), then searches. top_k sets which families
// count as ranked (<= 0: all). Configurations are evaluated on `threads` threads (0: the
// hardware's); the result does not depend on it.
Result search(const Input& in, int top_k = 5, unsigned threads = 0);

// One configuration (excluded is set, never thrown).
Candidate evaluate(const Input& in, const std::string& schedule, int M, int v, bool recompute);
// The same for each recompute setting, on one generated schedule (the search's unit).
std::vector<Candidate> evaluate(const Input& in, const std::string& schedule, int M, int v,
                                const std::vector<bool>& recompute);

// The memory model's inputs (sim/memory.hpp) of schedule S with recompute RECOMPUTE at
// micro-batches SCALE times the costs' (see the model above).
MemoryConfig memory_config(const Input& in, const Schedule& s, double scale, bool recompute);

// The work of the mean stage for one micro-batch of c's size as the prediction takes it, seconds:
// F (twice with recompute) + B + W. --verify's cost drift compares a run's medians with it.
double stage_work(const Input& in, const Candidate& c);

// --verify's ranking check. Predictions closer than `tolerance` (relative: b <= a x (1 + tol))
// are a tie; every other pair is a strict predicted order, a < b. The ranking is preserved
// when no measured pair contradicts a strict predicted order: measured a > measured b x
// (1 + tol). Ties may come out in either order. Entries are times per sample, any order.
struct RankingCheck {
  bool preserved = true;
  // Per entry: 1 + the number of entries predicted strictly faster (ties share a rank).
  std::vector<int> predicted_rank;
  // Pairs (faster predicted, slower predicted) whose measured order contradicts it.
  std::vector<std::pair<std::size_t, std::size_t>> contradictions;
};
RankingCheck check_ranking(const std::vector<double>& predicted,
                           const std::vector<double>& measured, double tolerance);

}  // namespace bb::advise
