// The harness room without mpiexec: the sweep's configurations and run keys, the measured
// bubble on constructed records (one definition for `run` and gbench_pipeline, whatever the
// ranks' clocks), and the field table (JSON <-> HDF5 round trip, generated files up to date).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.hpp"
#include "generated_files.hpp"
#include "harness/fields.hpp"
#include "harness/measure.hpp"
#include "harness/output.hpp"
#include "harness/sweep.hpp"
#include "harness/table.hpp"
#include "harness/wire.hpp"
#include "results/hdf5_file.hpp"
#include "runtime/placement.hpp"
#include "schedule/generators.hpp"

namespace bb::harness {
namespace {

namespace fs = std::filesystem;

RunSettings synthetic_settings() {
  RunSettings s;
  s.compute = Compute::kSynthetic;
  s.t_f = 0.001;
  s.t_b = 0.002;
  s.t_w = 0;
  return s;
}

std::vector<NamedSchedule> named(std::initializer_list<const char*> names, int P, int M) {
  std::vector<NamedSchedule> out;
  for (const char* n : names) out.push_back({n, generate(n, ScheduleParams{P, M, 1})});
  return out;
}

TEST(HarnessSweep, CrossesSchedulesWithTheModelListsInOrder) {
  ModelLists lists;
  lists.hidden = {64, 128};
  lists.recompute = {false, true};
  const auto configs = make_configs(named({"gpipe", "1f1b"}, 2, 4), lists, RunSettings{}, 2);
  ASSERT_EQ(configs.size(), 8u);
  EXPECT_EQ(configs[0].schedule, "gpipe");
  EXPECT_EQ(configs[0].hidden, 64);
  EXPECT_FALSE(configs[0].recompute);
  EXPECT_TRUE(configs[1].recompute);
  EXPECT_EQ(configs[2].hidden, 128);
  EXPECT_EQ(configs[4].schedule, "1f1b");
  EXPECT_EQ(configs[0].label, "gpipe P=2 M=4 v=1 h=64 L=1 b=8");
  EXPECT_EQ(configs[1].label, "gpipe P=2 M=4 v=1 h=64 L=1 b=8 recompute");
  ASSERT_TRUE(configs[0].lowered->lowered);
  for (std::size_t i = 0; i < configs.size(); ++i)
    for (std::size_t j = i + 1; j < configs.size(); ++j) EXPECT_NE(configs[i].key, configs[j].key);
}

TEST(HarnessSweep, ASchedulesNamedTwiceRunsOnce) {
  const auto configs = make_configs(named({"1f1b", "1f1b"}, 2, 4), ModelLists{}, RunSettings{}, 2);
  ASSERT_EQ(configs.size(), 1u);
  EXPECT_EQ(configs[0].label, "1f1b P=2 M=4 v=1");  // no model sweep: no h= in the label
}

TEST(HarnessSweep, RunKeyNamesEverySettingThatChangesTheMeasurement) {
  const auto gemm = make_configs(named({"1f1b"}, 2, 8), ModelLists{}, RunSettings{}, 2);
  EXPECT_EQ(gemm.at(0).key,
            "1f1b_P=2_M=8_v=1_cpu_mpi_gemm_h=64_L=1_b=8_fp32_recompute=0_sync=barrier_warmup=1_"
            "iters=5");
  RunSettings syn = synthetic_settings();
  auto configs = make_configs(named({"1f1b"}, 2, 8), ModelLists{}, syn, 2);
  EXPECT_EQ(configs.at(0).key,
            "1f1b_P=2_M=8_v=1_cpu_mpi_synthetic_h=64_L=1_b=8_fp32_recompute=0_sync=barrier_"
            "warmup=1_iters=5_tf=0.001_tb=0.002_tw=0");
  syn.t_fb = 0.0025;
  syn.sync = Sync::kNone;
  configs = make_configs(named({"1f1b"}, 2, 8), ModelLists{}, syn, 2);
  EXPECT_EQ(configs.at(0).key,
            "1f1b_P=2_M=8_v=1_cpu_mpi_synthetic_h=64_L=1_b=8_fp32_recompute=0_sync=none_"
            "warmup=1_iters=5_tf=0.001_tb=0.002_tw=0_tfb=0.0025");
}

TEST(HarnessSweep, FingerprintFollowsTheKeysAndTheirOrder) {
  const auto a = make_configs(named({"gpipe", "1f1b"}, 2, 4), ModelLists{}, RunSettings{}, 2);
  const auto b = make_configs(named({"1f1b", "gpipe"}, 2, 4), ModelLists{}, RunSettings{}, 2);
  const auto c = make_configs(named({"gpipe", "1f1b"}, 2, 4), ModelLists{}, RunSettings{}, 2);
  EXPECT_EQ(sweep_fingerprint(a), sweep_fingerprint(c));
  EXPECT_NE(sweep_fingerprint(a), sweep_fingerprint(b));
  EXPECT_GE(sweep_fingerprint(a), 0);
}

TEST(HarnessSweep, ACsvScheduleMustMatchTheWorldAndIsKeyedByItsContents) {
  char tmpl[] = "/tmp/bb-harness-XXXXXX";
  const fs::path dir = mkdtemp(tmpl);
  const std::string path = (dir / "s.csv").string();
  std::ofstream(path) << "anything\n";
  const std::string h1 = file_hash(path);
  std::ofstream(path) << "something else\n";
  EXPECT_NE(file_hash(path), h1);
  EXPECT_EQ(file_hash(path).size(), 16u);
  std::vector<NamedSchedule> csv;
  csv.push_back({"csv:" + path, generate("1f1b", ScheduleParams{2, 4, 1})});
  EXPECT_THROW(make_configs(std::move(csv), ModelLists{}, RunSettings{}, 4), ConfigError);
  csv.clear();
  csv.push_back({"csv:" + path, generate("1f1b", ScheduleParams{2, 4, 1})});
  const auto configs = make_configs(std::move(csv), ModelLists{}, RunSettings{}, 2);
  EXPECT_NE(configs.at(0).key.find("_hash=" + file_hash(path) + "_P=2"), std::string::npos);
  EXPECT_THROW(file_hash((dir / "missing.csv").string()), ConfigError);
  fs::remove_all(dir);
}

// --- The measured bubble ---------------------------------------------------------------------

StepSummary step(double origin, double first, double last, double busy) {
  return {.origin = origin,
          .first_start = first,
          .last_end = last,
          .busy = busy,
          .actions = 4,
          .bookkeeping = 4e-6};
}

TEST(HarnessMeasure, OneStepOnASharedClock) {
  // Rank 0 computes 3 s in [0, 4], rank 1 2 s in [1.5, 4.5] after leaving the barrier 0.5 s
  // later: T = 4.5, fraction (2·4.5 - 5) / 9.
  const StepBubble b = measure_step({step(100, 0, 4, 3), step(100.5, 1, 4, 2)}, ClockMode::kShared);
  EXPECT_DOUBLE_EQ(b.span_s, 4.5);
  EXPECT_DOUBLE_EQ(b.bubble_fraction, (2 * 4.5 - 5) / 9);
}

TEST(HarnessMeasure, PerRankClocksCountFromEachRanksOwnBarrierExit) {
  // The same records with rank 1's clock 1000 s off: per rank, T = the latest end after a
  // rank's own barrier exit (4), whatever the offset.
  const StepBubble a =
      measure_step({step(100, 0, 4, 3), step(100.5, 1, 4, 2)}, ClockMode::kPerRank);
  const StepBubble b =
      measure_step({step(100, 0, 4, 3), step(1100.5, 1, 4, 2)}, ClockMode::kPerRank);
  EXPECT_DOUBLE_EQ(a.span_s, 4);
  EXPECT_DOUBLE_EQ(a.bubble_fraction, (2 * 4.0 - 5) / 8);
  EXPECT_EQ(a.span_s, b.span_s);
  EXPECT_EQ(a.bubble_fraction, b.bubble_fraction);
  EXPECT_EQ(measure_step({}, ClockMode::kShared).bubble_fraction, 0);
  EXPECT_EQ(measure_step({step(0, 0, 0, 0)}, ClockMode::kShared).bubble_fraction, 0);  // T = 0
}

TEST(HarnessMeasure, ClockFromHosts) {
  EXPECT_EQ(clock_of_hosts({"a", "a"}), ClockMode::kShared);
  EXPECT_EQ(clock_of_hosts({"a", "b"}), ClockMode::kPerRank);
  EXPECT_EQ(clock_of_hosts({}), ClockMode::kShared);
  EXPECT_STREQ(clock_name(ClockMode::kPerRank), "per-rank");
}

// Two ranks, three steps; rank 1's clock starts at OFFSET.
std::vector<RankSummary> records(double offset) {
  std::vector<RankSummary> r(2);
  for (int k = 0; k < 3; ++k) {
    r[0].steps.push_back(step(10.0 * k, 0.001, 5 + 0.25 * k, 4));
    r[1].steps.push_back(step(offset + 10.0 * k + 0.002, 0.75, 5.5, 3.5 + 0.1 * k));
  }
  r[0].durations[0] = {1, 2};
  r[1].events.push_back({0, 1, 0, 0, 0, 0.5, 0.75, 1.5});
  return r;
}

// `run`'s path: each rank's whole record over the wire, then every step at once.
std::vector<double> run_path(const std::vector<RankSummary>& ranks, ClockMode clock) {
  std::vector<RankSummary> got;
  for (const RankSummary& r : ranks) got.push_back(unpack(pack(r)));
  return measure_steps(got, clock).fraction;
}

// gbench_pipeline's path: one step of every rank over the wire per iteration.
std::vector<double> gbench_path(const std::vector<RankSummary>& ranks, ClockMode clock) {
  std::vector<double> out;
  for (std::size_t k = 0; k < ranks[0].steps.size(); ++k) {
    std::vector<StepSummary> step;
    for (const RankSummary& r : ranks) step.push_back(unpack_step(pack_step(r.steps[k])));
    out.push_back(measure_step(step, clock).bubble_fraction);
  }
  return out;
}

TEST(HarnessMeasure, RunAndGbenchGetTheSameNumberAcrossOffsetClocks) {
  const auto same = records(0), offset = records(12345.678);
  const auto want = run_path(same, ClockMode::kPerRank);
  ASSERT_EQ(want.size(), 3u);
  EXPECT_EQ(gbench_path(same, ClockMode::kPerRank), want);
  EXPECT_EQ(run_path(offset, ClockMode::kPerRank), want);
  EXPECT_EQ(gbench_path(offset, ClockMode::kPerRank), want);
  // Step 0 by hand: T = max(5, 5.5) = 5.5 from each rank's barrier exit, busy 7.5.
  EXPECT_DOUBLE_EQ(want[0], (2 * 5.5 - 7.5) / 11);
  // On one host clock both paths agree too (there rank 1's 2 ms later start counts).
  const auto shared = run_path(same, ClockMode::kShared);
  const auto g = gbench_path(same, ClockMode::kShared);
  for (std::size_t k = 0; k < shared.size(); ++k) EXPECT_NEAR(g[k], shared[k], 1e-12);
  EXPECT_DOUBLE_EQ(shared[0], (2 * (5.502 - 0.001) - 7.5) / (2 * (5.502 - 0.001)));
}

TEST(HarnessMeasure, SteadyStatePeriodIsOffsetFree) {
  const StepSeries a = measure_steps(records(0), ClockMode::kPerRank);
  const StepSeries b = measure_steps(records(777), ClockMode::kPerRank);
  ASSERT_EQ(a.period.size(), 2u);
  EXPECT_EQ(a.period, b.period);
  EXPECT_EQ(a.fraction_steady, b.fraction_steady);
  // Ends: rank 1's 5.5 + 10 k: periods of 10.
  EXPECT_DOUBLE_EQ(a.period[0], 10);
  EXPECT_DOUBLE_EQ(a.overhead[0], 1e-6);
}

TEST(HarnessWire, PackUnpackRoundTripsAndRefusesTruncation) {
  const auto r = records(3)[1];
  const auto v = pack(r);
  const RankSummary back = unpack(v);
  EXPECT_EQ(pack(back), v);
  EXPECT_EQ(back.events.size(), 1u);
  EXPECT_THROW(unpack(std::vector<double>(v.begin(), v.end() - 1)), std::out_of_range);
}

// --- The field table ---------------------------------------------------------------------------

RunSummary sample(bool steady) {
  RunSummary s;
  s.run_key = steady ? "k_none" : "k_barrier";
  s.schedule = "1f1b";
  s.P = 2;
  s.M = 4;
  s.v = 1;
  s.recompute = steady;
  s.backend = BackendKind::kCpu;
  s.transport = TransportKind::kMpi;
  s.compute = steady ? Compute::kSynthetic : Compute::kGemm;
  s.dtype = Dtype::kF32;
  s.sync = steady ? Sync::kNone : Sync::kBarrier;
  s.optimizer = OptimizerConfig::Kind::kSgd;
  s.hidden = 64;
  s.layers = 2;
  s.mb_size = 8;
  s.warmup = 1;
  s.iters = 3;
  s.seed = steady ? std::numeric_limits<std::uint64_t>::max() : 7;  // beyond int64 too
  s.lr = 0.001;
  s.synthetic = steady;
  s.synthetic_t_f_s = 0.001;
  s.synthetic_t_b_s = 0.002;
  s.step_time_s = {0.5, 0.25, 0.75};
  s.makespan_s = 0.5;
  if (steady) s.period_s = 0.4;
  s.bubble_fraction_measured = 0.125;
  s.clock = "shared";
  s.overhead_us_per_action = 3.5;
  s.t_f_s = 0.001;
  s.t_b_s = 0.002;
  if (steady) s.t_w_s = 0.0;
  s.bubble_fraction_sim = 0.1;
  if (steady)
    s.model_reason = "no closed form";
  else
    s.bubble_fraction_model = 0.2;
  if (steady) s.attribution = RunSummary::Attribution{0.0625, 0.125, -0.03125, 0.0, 0.25};
  s.check = steady ? CheckStatus::kSkipped : CheckStatus::kPass;
  s.check_max_rel_error = 1e-7;
  s.check_message = steady ? "" : "ok";
  for (int r = 0; r < 2; ++r) {
    RankResult x;
    x.where = {"h" + std::to_string(r), std::to_string(r), 2, -1, false};
    x.busy_s = 0.25 + r;
    x.wait_s = 0.125;
    x.comm_s = 0.0625;
    x.peak_activations = 2 - r;
    x.peak_activations_schedule = 2 - r;
    x.peak_activation_bytes = 4096.0 * (2 - r);
    x.param_bytes = 1024;
    x.peak_device_bytes = 8192;
    x.peak_activation_bytes_model = 4000.4;
    s.ranks.push_back(x);
  }
  return s;
}

TEST(HarnessFields, JsonRecordKeepsItsKeys) {
  const auto j = to_json(sample(false));
  EXPECT_EQ(j["P"], 2);
  EXPECT_EQ(j["recompute"], false);
  EXPECT_FALSE(j.contains("period_s"));
  EXPECT_FALSE(j.contains("model_reason"));
  EXPECT_EQ(j["seed"], 7u);  // in JSON too (issue 30: seeds round-trip through both)
  EXPECT_TRUE(j["t_w_s"].is_null());
  EXPECT_EQ(j["check_message"], "ok");
  EXPECT_EQ(j["busy_s"].size(), 2u);
  const auto k = to_json(sample(true));
  EXPECT_EQ(k["period_s"], 0.4);
  EXPECT_TRUE(k["bubble_fraction_model"].is_null());
  EXPECT_EQ(k["model_reason"], "no closed form");
  EXPECT_FALSE(k.contains("check_max_rel_error"));
  // The attribution: one JSON object, null terms where there is none.
  EXPECT_EQ(k["attribution"]["jitter"], -0.03125);
  EXPECT_EQ(k["attribution"]["residual"], 0.25);
  EXPECT_FALSE(k.contains("attribution_jitter"));
  EXPECT_TRUE(j["attribution"]["schedule"].is_null());
}

TEST(HarnessFields, AttributesKeepTheirForm) {
  const Attrs a = to_attrs(sample(false));
  EXPECT_EQ(std::get<std::int64_t>(*find_attr(a, "recompute")), 0);
  EXPECT_TRUE(std::isnan(std::get<double>(*find_attr(a, "period_s"))));
  EXPECT_EQ(std::get<std::string>(*find_attr(a, "model_reason")), "");
  EXPECT_EQ(find_attr(a, "synthetic_t_f_s"), nullptr);
  EXPECT_EQ(find_attr(a, "status"), nullptr);  // the writer's
  const Attrs b = to_attrs(sample(true));
  EXPECT_TRUE(std::isnan(std::get<double>(*find_attr(b, "synthetic_t_fb_s"))));
  EXPECT_TRUE(std::isnan(std::get<double>(*find_attr(b, "bubble_fraction_model"))));
  EXPECT_EQ(find_attr(b, "check_message"), nullptr);
  const auto ranks = to_rank_records(sample(true));
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(rank_number(ranks[1], "rank"), 1.0);
  EXPECT_EQ(std::get<std::string>(rank_column(ranks[1], "host")), "h1");
  EXPECT_EQ(rank_number(ranks[0], "peak_activation_bytes"), 8192.0);
  EXPECT_EQ(rank_number(ranks[0], "peak_activation_bytes_model"), 4000.0);
  // The columns are the field table's rank columns, in its order: one list, not four.
  std::vector<std::string> want, got;
  for (const Field& f : fields())
    if (f.rank != nullptr && (f.sinks & kRankColumn)) want.emplace_back(f.name);
  for (const auto& [name, v] : ranks[0].columns) got.push_back(name);
  EXPECT_EQ(got, want);
}

TEST(HarnessFields, RoundTripJsonThroughHdf5) {
  char tmpl[] = "/tmp/bb-harness-XXXXXX";
  const fs::path dir = mkdtemp(tmpl);
  const std::string path = (dir / "r.h5").string();
  for (bool steady : {false, true}) {
    const RunSummary s = sample(steady);
    {
      ResultsFile f(path, OpenMode::kForce, {});
      f.write_run(to_record(s));
    }
    nlohmann::json want = to_json(s);
    for (const Field& f : fields()) {
      const bool json_only = ((f.sinks & kJson) && !(f.sinks & (kAttr | kDataset))) ||
                             ((f.sinks & kJsonArray) && !(f.sinks & kRankColumn));
      if (json_only) want.erase(std::string(f.name));
    }
    EXPECT_EQ(json_of_record(read_run(path, s.run_key)), want) << "steady " << steady;
  }
  fs::remove_all(dir);
}

// --seed 18446744073709551615 (2^64 - 1) is a seed like any other: the record's JSON, the
// HDF5 attribute (uint64) and the JSON read back from the file all hold it exactly.
TEST(HarnessFields, TheLargestSeedRoundTrips) {
  char tmpl[] = "/tmp/bb-harness-XXXXXX";
  const fs::path dir = mkdtemp(tmpl);
  const std::string path = (dir / "r.h5").string();
  const RunSummary s = sample(true);
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ(to_json(s)["seed"].get<std::uint64_t>(), max);
  EXPECT_EQ(to_json(s)["seed"].dump(), "18446744073709551615");
  {
    ResultsFile f(path, OpenMode::kForce, {});
    f.write_run(to_record(s));
  }
  const RunRecord back = read_run(path, s.run_key);
  EXPECT_EQ(std::get<std::uint64_t>(*find_attr(back.attrs, "seed")), max);
  EXPECT_EQ(json_of_record(back)["seed"].dump(), "18446744073709551615");
  fs::remove_all(dir);
}

TEST(HarnessFields, FurtherRankColumnsRoundTripThroughHdf5) {
  // A further rank column (with its doc, as the field table gives every column) goes to the
  // ranks table as a column of its own (text, integer or real) and comes back by name.
  char tmpl[] = "/tmp/bb-harness-XXXXXX";
  const fs::path dir = mkdtemp(tmpl);
  const std::string path = (dir / "r.h5").string();
  RunRecord run = to_record(sample(false));
  const std::size_t fields_of_the_table = run.ranks[0].columns.size();
  run.rank_docs.push_back({"numa", "", "NUMA nodes", ColumnType::kText});
  run.rank_docs.push_back({"gpu_mps", "", "", ColumnType::kI64});
  run.rank_docs.push_back({"share", "", "", ColumnType::kF64});
  for (std::size_t r = 0; r < run.ranks.size(); ++r) {
    set_rank_column(run.ranks[r], "numa", std::string(r == 0 ? "0-1" : "2,3"));
    set_rank_column(run.ranks[r], "gpu_mps", std::int64_t{static_cast<std::int64_t>(r)});
    set_rank_column(run.ranks[r], "share", 0.5 * static_cast<double>(r));
  }
  {
    ResultsFile f(path, OpenMode::kForce, {});
    f.write_run(run);
  }
  const RunRecord back = read_run(path, run.key);
  ASSERT_EQ(back.ranks.size(), 2u);
  EXPECT_EQ(std::get<std::string>(rank_column(back.ranks[1], "numa")), "2,3");
  EXPECT_EQ(std::get<std::int64_t>(rank_column(back.ranks[1], "gpu_mps")), 1);
  EXPECT_EQ(std::get<double>(rank_column(back.ranks[1], "share")), 0.5);
  EXPECT_EQ(std::get<std::string>(rank_column(back.ranks[1], "host")), "h1");
  EXPECT_EQ(back.ranks[0].columns.size(), fields_of_the_table + 3);
  // A rank without the columns is refused, and the file keeps what it held.
  run.ranks[1].columns.clear();
  run.key = "other";
  {
    ResultsFile f(path, OpenMode::kResume, {});
    EXPECT_THROW(f.write_run(run), IoError);
  }
  EXPECT_EQ(read_complete_keys(path), (std::set<std::string>{"k_barrier"}));
  fs::remove_all(dir);
}

TEST(HarnessFields, TableColumnsFollowTheSweep) {
  std::vector<RunSummary> runs{sample(false), sample(false)};
  Table t = to_table(runs);
  const std::vector<std::string> cols = {
      "schedule",   "P",       "M",        "v",        "recompute",      "makespan_ms",
      "measured",   "sim",     "model",    "peak_act", "peak_act_sched", "peak_act_MiB",
      "sched",      "imbal",   "jitter",   "comm",     "resid",          "util",
      "comm_share", "GFLOP/s", "peak_MiB", "pred_MiB", "check"};
  EXPECT_EQ(t.headers, cols);
  EXPECT_EQ(t.rows.at(0).at(5), "500");        // ms
  EXPECT_EQ(t.rows.at(0).at(12), "n/a");       // no attribution in the sample
  EXPECT_EQ(t.rows.at(0).at(22), "pass");      // check: the last column
  EXPECT_EQ(t.rows.at(0).at(11), "0.007812");  // 8192 B in MiB, 4 digits
  runs[1].hidden = 128;
  t = to_table(runs);
  EXPECT_EQ(t.headers.at(4), "hidden");
  EXPECT_EQ(t.headers.at(6), "mb_size");
  runs = {sample(true)};
  t = to_table(runs);
  EXPECT_EQ(t.headers.at(5), "period_ms");
  EXPECT_EQ(t.rows.at(0).at(8), "n/a");  // no closed form
  EXPECT_EQ(t.rows.at(0).at(4), "on");
}

// `run`'s table row by row: the context and the column header first (`#` lines), each row
// as it comes, fixed columns, no trailing spaces; CSV with every digit; JSON only at the end.
TEST(HarnessOutput, RunTableRowByRow) {
  const RunSummary a = sample(false);
  RunConfig c;
  c.schedule = "interleaved";  // the widest name sets the first column
  std::ostringstream out;
  RunTable table(out, "table", false, false, {c});
  table.begin({"git_sha: abc", "ranks: 2 ranks on 1 host (vm: 2)"});
  const std::string head = out.str();
  EXPECT_EQ(head.rfind("# git_sha: abc\n# ranks: 2 ranks on 1 host (vm: 2)\n", 0), 0u) << head;
  EXPECT_NE(head.find("\n# schedule" + std::string(3, ' ') + "P "), std::string::npos)
      << head;  // 11 + 2
  table.row(a);
  const std::string one = out.str().substr(head.size());
  EXPECT_EQ(one.rfind("1f1b" + std::string(9, ' ') + "2 ", 0), 0u) << one;  // at once, aligned
  EXPECT_EQ(std::count(one.begin(), one.end(), '\n'), 1);
  table.row(a);
  table.end({a, a});
  std::istringstream lines(out.str());
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    EXPECT_FALSE(!line.empty() && line.back() == ' ') << "trailing space: '" << line << "'";
    rows += line.rfind('#', 0) != 0;
  }
  EXPECT_EQ(rows, 2);

  std::ostringstream csv;
  RunTable t2(csv, "csv", false, false, {c});
  t2.begin({"not on stdout"});
  t2.row(a);
  t2.end({a});
  EXPECT_EQ(csv.str().find('#'), std::string::npos);
  EXPECT_EQ(csv.str().rfind("schedule,P,M,v,recompute,makespan_ms,", 0), 0u) << csv.str();
  EXPECT_NE(csv.str().find("\n1f1b,2,4,"), std::string::npos) << csv.str();
  EXPECT_NE(csv.str().find(",0.0078125,"), std::string::npos);  // every digit (8192 B in MiB)

  std::ostringstream js;
  RunTable t3(js, "json", false, false, {c});
  t3.begin({});
  t3.row(a);
  EXPECT_EQ(js.str(), "");
  t3.end({a});
  EXPECT_EQ(nlohmann::json::parse(js.str()).size(), 1u);
}

TEST(HarnessOutput, TableAndCsvRows) {
  std::ostringstream out;
  print_table(out, {"a", "bb"}, {{"xyz", "1"}, {"x", ""}});
  EXPECT_EQ(out.str(), "a    bb\nxyz  1\nx\n");
  std::ostringstream csv;
  print_csv_row(csv, {"plain", "a,b", "say \"hi\"", ""});
  EXPECT_EQ(csv.str(), "plain,\"a,b\",\"say \"\"hi\"\"\",\n");
}

TEST(HarnessOutput, ContextLines) {
  const std::vector<RankPlacement> ranks{
      {"n1", "0", 2, -1, false}, {"n1", "1", 2, -1, false}, {"n2", "", 2, 0, false}};
  const auto lines = context_lines({{"git_sha", std::string("abc")},
                                    {"slurm_job_id", std::string("")},
                                    {"schema_version", std::int64_t{3}}},
                                   ranks, BackendKind::kCpu, TransportKind::kMpi);
  const std::vector<std::string> want = {
      "git_sha: abc", "schema_version: 3", "ranks: 3 ranks on 2 hosts (n1: 2, n2: 1)",
      "binding: rank 0 cpus 0; rank 1 cpus 1; rank 2 cpus ? gpu 0", "backend: cpu, transport: mpi"};
  EXPECT_EQ(lines, want);
}

TEST(HarnessPlacement, CpuListsAndTheWarning) {
  EXPECT_EQ(cpu_list_text({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(cpu_list_text({}), "");
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_THROW(parse_cpu_list("3-1"), std::invalid_argument);
  const RankPlacement bound0{"vm", "0", 2, -1, false}, bound1{"vm", "1", 2, -1, false},
      all{"vm", "0-1", 2, -1, false};
  EXPECT_EQ(placement_warning({bound0, bound1}), "");
  EXPECT_EQ(placement_warning({all}), "");                                     // one rank
  EXPECT_EQ(placement_warning({bound0, RankPlacement{"other", "0", 2}}), "");  // two hosts
  EXPECT_EQ(placement_warning({all, all})
                .rfind("ranks are not bound (rank 0 may run on CPUs 0-1 "
                       "of vm, like rank 1): bind one core per rank",
                       0),
            0u);
  EXPECT_EQ(placement_warning({bound0, bound1, bound0}).rfind("ranks 0 and 2 share CPU 0 on vm", 0),
            0u);
  const RankPlacement me = this_placement("here", -1);
  EXPECT_EQ(me.host, "here");
  EXPECT_GE(me.host_cpus, 1);
  EXPECT_FALSE(parse_cpu_list(me.cpus).empty());
  EXPECT_FALSE(me.mps);  // no GPU
}

TEST(HarnessFields, PlacementReachesJsonAndTheRanksTable) {
  const RunSummary s = sample(false);
  const auto j = to_json(s);
  EXPECT_EQ(j["cpus"], nlohmann::json::array({"0", "1"}));
  EXPECT_EQ(j["host"], nlohmann::json::array({"h0", "h1"}));
  EXPECT_EQ(j["mps"], nlohmann::json::array({false, false}));
  const auto ranks = to_rank_records(s);
  EXPECT_EQ(std::get<std::string>(rank_column(ranks[1], "cpus")), "1");
  EXPECT_EQ(std::get<std::int64_t>(rank_column(ranks[1], "mps")), 0);
}

TEST(HarnessFields, GeneratedFilesAreUpToDate) {
  // BB_REGENERATE=1 rewrites them.
  test::expect_generated("docs/run-record.md", fields_markdown());
  test::expect_generated("analysis/bbanalysis/run_fields.json", fields_json());
}

TEST(HarnessFields, NamesAreUnique) {
  std::set<std::string> seen;
  for (const Field& f : fields()) EXPECT_TRUE(seen.insert(std::string(f.name)).second) << f.name;
}

}  // namespace
}  // namespace bb::harness
