// `bubblebench advise --verify K` (docs/advise.md): the top K configurations run for real through
// the harness on every rank, then predicted vs measured with the attribution terms (rank 0).
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/advise_internal.hpp"
#include "cli/table.hpp"
#include "common/error.hpp"
#include "harness/output.hpp"
#include "harness/provenance.hpp"
#include "harness/runner.hpp"
#include "harness/sweep.hpp"
#include "harness/table.hpp"
#include "runtime/factory.hpp"
#include "runtime/mpi_util.hpp"
#include "runtime/placement.hpp"
#include "schedule/generators.hpp"

namespace bb::advise_cli {
namespace {

using json = nlohmann::json;

// The measured per-kind medians' sum (F + B + W of a stage, single actions) over the one the
// prediction used, minus 1: how far the costs moved between the results run (or the flags) and
// this run. NaN where the run has no single F or B.
double cost_drift(const advise::Input& in, const advise::Candidate& c,
                  const harness::RunSummary& m) {
  if (!m.t_f_s || !m.t_b_s) return std::nan("");
  const double assumed = advise::stage_work(in, c);
  const double got = *m.t_f_s + *m.t_b_s + m.t_w_s.value_or(0);
  return assumed > 0 ? got / assumed - 1 : std::nan("");
}

// The prediction with the run's own costs, seconds: its per-kind medians (one stage's F, B or
// the fused BW, W, and its F&B pairs over F + B + W), each rank's scaled by the rank's measured
// busy time over the one they give it (ranks run at different speeds). What remains is the
// simulator's error, not the costs'.
double predicted_at_measured(const advise::Input& in, const advise::Candidate& c,
                             const harness::RunSummary& m) {
  advise::Input x = in;
  const double f = m.t_f_s.value_or(0), b = m.t_b_s.value_or(0);
  x.t_f = {f};
  x.t_b = {c.recompute ? std::max(0.0, b - f) : b};  // the measured B holds the recompute
  x.t_w = {m.t_w_s.value_or(0)};
  const double sum = f + b + m.t_w_s.value_or(0);
  x.fb_factor = m.t_fb_s && sum > 0 ? *m.t_fb_s / sum : 1;
  x.mb_size = static_cast<int>(c.mb_size);
  x.global_batch = 0;
  x.memory_cap = 0;
  // Each rank at its own speed: its measured busy time over the one these medians give it.
  const advise::Candidate uniform = advise::evaluate(x, c.schedule, c.M, c.v, c.recompute);
  if (uniform.busy.size() != m.ranks.size()) return uniform.step_time;
  for (std::size_t r = 0; r < m.ranks.size(); ++r)
    x.rank_speed.push_back(uniform.busy[r] > 0 ? m.ranks[r].busy_s / uniform.busy[r] : 1.0);
  return advise::evaluate(x, c.schedule, c.M, c.v, c.recompute).step_time;
}

// How far a run's step times spread: their median absolute deviation over their median.
double relative_spread(const std::vector<double>& steps) {
  const double mid = median(steps, 0.0);
  std::vector<double> dev;
  for (double x : steps) dev.push_back(std::fabs(x - mid));
  return mid > 0 ? median(dev, 0.0) / mid : 0;
}

// The tie tolerance of the ranking check: 0.5 %, or the largest measured spread if wider.
constexpr double kTieTolerance = 0.005;

}  // namespace

// Runs the top K on every rank (same order everywhere); rank 0 gets the summaries.
std::vector<Verified> verify_top(const AdviseOptions& o, const advise::Input& in,
                                 const advise::Result& r, const VerifyModel& vm, int world) {
  if (world != in.P)
    throw ConfigError("--verify runs P=" + std::to_string(in.P) +
                      " ranks: start it with mpiexec -n " + std::to_string(in.P) +
                      " (world size is " + std::to_string(world) + ")");
  harness::RunSettings base = vm.settings;
  base.warmup = o.warmup;
  base.iters = o.iters;
  base.sync = in.steady ? harness::Sync::kNone : harness::Sync::kBarrier;
  base.timeout = o.timeout;
  base.calibrate = false;
  base.check = false;
  MPI_Comm p2p = mpi::duplicate(MPI_COMM_WORLD, o.timeout);
  MPI_Comm coll = mpi::duplicate(MPI_COMM_WORLD, o.timeout);
  auto backend = make_backend(
      base.backend, base.backend == BackendKind::kCuda ? harness::local_rank() : 0, base.dtype);
  auto transport = make_transport(base.transport, p2p, *backend, o.timeout);
  std::vector<Verified> out;
  for (std::size_t i = 0; i < r.ranked.size() && static_cast<int>(i) < o.verify; ++i) {
    const advise::Candidate& c = r.ranked[i];
    Verified v{&c, static_cast<int>(i + 1), std::nullopt, ""};
    const ScheduleParams p{in.P, c.M, c.v};
    Schedule s = generate(c.schedule, p);
    const double frac = s.chunk_fraction(0);
    harness::RunSettings settings = base;
    const double scale = c.mb_size / in.mb_size;
    int layers = 1;
    if (vm.synthetic_stage_times || settings.synthetic()) {
      if (vm.synthetic_stage_times) {
        if (in.t_f.size() != 1 || in.t_b.size() != 1 || in.t_w.size() != 1)
          throw ConfigError("--verify with per-stage cost lists: run takes one time per kind");
        settings.t_f = in.t_f[0];
        settings.t_b = in.t_b[0];
        settings.t_w = in.t_w[0];
      }
      settings.t_f *= scale;
      settings.t_b *= scale;
      settings.t_w *= scale;
    } else {
      const double chunk_layers = vm.stage_layers * frac;
      if (std::fabs(chunk_layers - std::round(chunk_layers)) > 1e-9 || chunk_layers < 1) {
        v.why = "a chunk would hold " + fmt(chunk_layers) + " blocks (the run's stage has " +
                fmt(vm.stage_layers) + ")";
        out.push_back(std::move(v));
        continue;
      }
      layers = static_cast<int>(std::lround(chunk_layers));
    }
    harness::ModelLists lists;
    lists.hidden = {vm.hidden};
    lists.layers = {layers};
    lists.mb_size = {static_cast<int>(c.mb_size)};
    lists.recompute = {c.recompute};
    std::vector<harness::NamedSchedule> named;
    named.push_back({c.schedule, std::move(s)});
    const auto configs = harness::make_configs(std::move(named), lists, settings, world);
    harness::RunContext ctx(settings, *backend, *transport, coll);
    harness::gather_placement(ctx,
                              this_placement(harness::host_name(), harness::device_of(*backend)));
    harness::SweepOutcome so =
        harness::run_sweep(ctx, configs, std::vector<int>(configs.size(), 0));
    if (!so.runs.empty()) v.measured = std::move(so.runs.front());
    out.push_back(std::move(v));
  }
  transport.reset();
  MPI_Comm_free(&p2p);
  MPI_Comm_free(&coll);
  return out;
}

namespace {
// The --verify table's columns: the attribution's terms after the bubbles.
std::vector<std::string> verify_header() {
  std::vector<std::string> header{"#",      "config",      "pred_ms",    "meas_ms",
                                  "error",  "pred_MiB",    "meas_MiB",   "mem_error",
                                  "meas_#", "bubble_pred", "bubble_meas"};
  for (const harness::AttributionTerm& t : harness::kAttributionTerms)
    header.emplace_back(t.header);
  header.insert(header.end(), {"cost_drift", "at_costs_ms", "sim_error"});
  return header;
}
// Bytes per rank as MiB, "/" between ranks.
std::string per_rank_mib(const std::vector<double>& bytes) {
  std::string out;
  for (std::size_t r = 0; r < bytes.size(); ++r) {
    if (r > 0) out += '/';  // appended piecewise: GCC 12 warns falsely (-Wrestrict)
    out += fmt(bytes[r] / (1 << 20), 4);
  }
  return out;
}

// Peak memory per rank, predicted (the search's model) and measured (peak_memory_bytes): the
// table's cells (MiB, the largest |predicted / measured − 1| over the ranks) and the JSON's
// fields, with the run's own prediction (its model on its simulated step).
struct MemoryCells {
  std::string predicted, measured, error;
  json fields;
};
MemoryCells memory_cells(const advise::Candidate& c, const harness::RunSummary& m) {
  std::vector<double> measured, run_model;
  for (const harness::RankResult& r : m.ranks) {
    measured.push_back(r.peak_memory_bytes);
    run_model.push_back(r.peak_memory_bytes_model);
  }
  double worst = 0;
  for (std::size_t r = 0; r < c.memory_bytes.size() && r < measured.size(); ++r)
    if (measured[r] > 0) worst = std::max(worst, std::fabs(c.memory_bytes[r] / measured[r] - 1));
  return {per_rank_mib(c.memory_bytes), per_rank_mib(measured), fmt(100 * worst, 3) + "%",
          json{{"predicted_peak_memory_bytes", c.memory_bytes},
               {"measured_peak_memory_bytes", measured},
               {"run_model_peak_memory_bytes", run_model},
               {"memory_max_abs_rel_error", worst}}};
}

// The row and JSON of a configuration --verify could not run.
void not_run(const Verified& v, std::vector<std::vector<std::string>>& rows, json& j) {
  const advise::Candidate& c = *v.predicted;
  rows.push_back({std::to_string(v.predicted_rank), config_text(c), fmt(c.step_time * 1e3), "n/a",
                  "n/a", per_rank_mib(c.memory_bytes), "n/a", "n/a", "n/a", "", "", "", "", "", "",
                  "", "", "", "not run: " + v.why});
  j.push_back({{"predicted_rank", v.predicted_rank},
               {"config", config_text(c)},
               {"predicted_s", c.step_time},
               {"predicted_peak_memory_bytes", c.memory_bytes},
               {"not_run", v.why}});
}

}  // namespace

void print_verified(const advise::Input& in, const std::vector<Verified>& vs, bool as_json) {
  const bool steady = in.steady;
  const auto measured_s = [&](const Verified& v) {
    return steady ? v.measured->period_s.value_or(0) : v.measured->makespan_s;
  };
  // The ranking check over the configurations that ran, by time per sample as the search ranks.
  std::vector<const Verified*> ran;
  std::vector<double> pred_per_sample, meas_per_sample;
  double tolerance = kTieTolerance;
  for (const auto& v : vs)
    if (v.measured) {
      const double samples = v.predicted->M * v.predicted->mb_size;
      ran.push_back(&v);
      pred_per_sample.push_back(v.predicted->step_time / samples);
      meas_per_sample.push_back(measured_s(v) / samples);
      tolerance = std::max(tolerance, relative_spread(v.measured->step_time_s));
    }
  const advise::RankingCheck rc =
      advise::check_ranking(pred_per_sample, meas_per_sample, tolerance);
  const auto index_of = [&](const Verified& v) {
    return static_cast<std::size_t>(std::find(ran.begin(), ran.end(), &v) - ran.begin());
  };
  // Measured rank: 1 + the configurations that ran measured faster.
  const auto measured_rank = [&](std::size_t i) {
    return 1 + static_cast<int>(std::count_if(meas_per_sample.begin(), meas_per_sample.end(),
                                              [&](double m) { return m < meas_per_sample[i]; }));
  };
  json j = json::array();
  std::vector<std::vector<std::string>> rows;
  double worst = 0;
  for (const auto& v : vs) {
    const auto& c = *v.predicted;
    const double pred = c.step_time;
    if (!v.measured) {
      not_run(v, rows, j);
      continue;
    }
    const harness::RunSummary& m = *v.measured;
    const double meas = measured_s(v);
    const double err = pred > 0 ? (meas - pred) / pred : 0;
    worst = std::max(worst, std::fabs(err));
    const std::size_t i = index_of(v);
    const int mr = measured_rank(i);
    const auto a = m.attribution.value_or(harness::RunSummary::Attribution{});
    const double drift = cost_drift(in, c, m);
    const double at_costs = predicted_at_measured(in, c, m);
    const double sim_err = at_costs > 0 ? (meas - at_costs) / at_costs : 0;
    const MemoryCells memory = memory_cells(c, m);
    std::vector<std::string> row{std::to_string(v.predicted_rank),
                                 config_text(c),
                                 fmt(pred * 1e3),
                                 fmt(meas * 1e3),
                                 fmt(100 * err, 3) + "%",
                                 memory.predicted,
                                 memory.measured,
                                 memory.error,
                                 std::to_string(mr),
                                 fmt(steady ? c.bubble_fraction_steady : c.bubble_fraction, 3),
                                 fmt(m.bubble_fraction_measured, 3)};
    json attribution = json::object();
    for (const harness::AttributionTerm& t : harness::kAttributionTerms) {
      row.push_back(fmt(a.*t.term, 3));
      attribution[std::string(t.key())] = a.*t.term;
    }
    row.insert(row.end(), {std::isfinite(drift) ? fmt(100 * drift, 3) + "%" : "n/a",
                           fmt(at_costs * 1e3), fmt(100 * sim_err, 3) + "%"});
    rows.push_back(std::move(row));
    j.push_back(
        {{"predicted_rank", v.predicted_rank},
         {"predicted_tie_rank", rc.predicted_rank[i]},
         {"measured_rank", mr},
         {"config", config_text(c)},
         {"predicted_s", pred},
         {"measured_s", meas},
         {"rel_error", err},
         {"measured_spread", relative_spread(m.step_time_s)},
         {"bubble_fraction_predicted", steady ? c.bubble_fraction_steady : c.bubble_fraction},
         {"bubble_fraction_measured", m.bubble_fraction_measured},
         {"cost_drift", std::isfinite(drift) ? json(drift) : json(nullptr)},
         {"predicted_at_measured_costs_s", at_costs},
         {"rel_error_at_measured_costs", sim_err},
         {"attribution", attribution},
         {"run_key", m.run_key}});
    j.back().update(memory.fields);
  }
  json contradictions = json::array();
  std::string contradicted;
  for (const auto& [a, b] : rc.contradictions) {
    contradictions.push_back({config_text(*ran[a]->predicted), config_text(*ran[b]->predicted)});
    contradicted += std::string(contradicted.empty() ? "" : "; ") +
                    config_text(*ran[a]->predicted) + " measured slower than " +
                    config_text(*ran[b]->predicted);
  }
  if (as_json) {
    std::cout << json{{"verify", j},
                      {"ranking_preserved", rc.preserved},
                      {"tie_tolerance", tolerance},
                      {"contradictions", contradictions},
                      {"max_abs_rel_error", worst}}
                     .dump(2)
              << "\n";
    return;
  }
  std::cout << "\nverify: predicted vs measured ("
            << (steady ? "steady-state period" : "step makespan")
            << ", ms; peak memory per rank, MiB, rank 0/rank 1/..., mem_error the largest over "
               "the ranks; bubble and attribution as fractions of P x T; cost_drift: the run's "
               "F+B+W "
               "medians against the costs predicted with; at_costs_ms: the prediction with the "
               "run's own per-kind medians and per-rank speeds, sim_error: measured against it)\n";
  bb::print_table(std::cout, verify_header(), rows);
  std::cout << "ranking " << (rc.preserved ? "preserved" : "NOT preserved") << "; largest |error| "
            << fmt(100 * worst, 3) << "%\n"
            << "ranking rule: time per sample; predictions within " << fmt(100 * tolerance, 3)
            << "% of each other tie (0.5 %, or the largest measured spread of step times if "
               "wider), and the ranking holds unless a configuration predicted faster beyond "
               "that measures slower beyond it"
            << (contradicted.empty() ? "" : ": " + contradicted) << "\n";
}

}  // namespace bb::advise_cli
