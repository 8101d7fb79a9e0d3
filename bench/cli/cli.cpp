#include "cli/cli.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/list.hpp"
#include "cli/run.hpp"
#include "cli/table.hpp"
#include "common/error.hpp"
#include "model/closed_form.hpp"
#include "results/chrome_trace.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/text.hpp"
#include "schedule/validate.hpp"
#include "sim/sim.hpp"

namespace bb {
namespace {

using json = nlohmann::json;

// What the selection flags of sim / model / validate / show ask for.
struct Selection {
  std::string schedules = "1f1b";
  int P = 4;
  std::string M = "8";
  std::string v = "1";
  std::string t_f = "1", t_b = "2", t_w = "0";
  double t_fb = -1;
  double latency = 0, bandwidth = 0, act_bytes = 0, msg_bytes = -1;
  int steps = 4;
  std::string sync = "barrier";
  std::string format = "table";
  std::string timeline;
};

struct Config {
  std::string schedule;  // name, or csv:FILE
  ScheduleParams params;
};

void add_selection(CLI::App* app, Selection& sel, bool costs, bool lists) {
  app->add_option("--schedule,-s", sel.schedules,
                  "Schedule name(s), comma-separated: naive gpipe 1f1b interleaved zb-h1 zb-h2 "
                  "zb-v dualpipe dualpipev (or all), or csv:FILE")
      ->capture_default_str();
  app->add_option("-P", sel.P, "Pipeline ranks")->capture_default_str();
  app->add_option("-M", sel.M,
                  lists ? "Micro-batches per step (LIST: 4,8 or 4:64:x2 or 2:8:2)"
                        : "Micro-batches per step")
      ->capture_default_str();
  app->add_option("-v", sel.v, lists ? "Chunks per rank for interleaved (LIST)" : "Chunks per rank")
      ->capture_default_str();
  if (!costs) return;
  app->add_option("--t-f", sel.t_f, "Forward time of one stage (or one value per chunk)")
      ->capture_default_str();
  app->add_option("--t-b", sel.t_b, "Input-gradient backward time (B)")->capture_default_str();
  app->add_option("--t-w", sel.t_w, "Weight-gradient backward time (W); 0: B is the whole backward")
      ->capture_default_str();
  app->add_option("--t-fb", sel.t_fb, "Overlapped F&B pair time (DualPipe); default F+B+W");
  app->add_option("--latency", sel.latency, "Per-message latency (time units)");
  app->add_option("--bandwidth", sel.bandwidth,
                  "Link bandwidth (bytes per time unit); 0 = infinite");
  app->add_option("--act-bytes", sel.act_bytes,
                  "Activation bytes kept by one micro-batch of one stage");
  app->add_option("--msg-bytes", sel.msg_bytes, "Bytes of one P2P message (default: --act-bytes)");
  app->add_option("--steps", sel.steps, "Back-to-back steps simulated for the steady state (>= 2)")
      ->capture_default_str();
  app->add_option("--sync", sel.sync, "barrier (single-step view first) or none (steady state)")
      ->check(CLI::IsMember({"barrier", "none"}))
      ->capture_default_str();
  app->add_option("--format", sel.format, "table, json or csv")
      ->check(CLI::IsMember({"table", "json", "csv"}))
      ->capture_default_str();
}

std::vector<double> parse_costs(const std::string& text, const char* what) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(parse_duration(item, what, false));
  if (out.empty()) throw ConfigError(std::string(what) + ": needs a value");
  return out;
}

// Every combination of the lists; combinations a schedule does not accept are reported on
// stderr with one line and skipped. Throws ConfigError when nothing is left.
std::vector<std::pair<Config, Schedule>> expand(const Selection& sel, bool lists) {
  if (sel.P < 1 || sel.P > 32767)
    throw ConfigError("-P " + std::to_string(sel.P) + ": must be 1..32767");
  const auto Ms =
      lists ? parse_int_list(sel.M, "-M") : std::vector<int>{parse_int_list(sel.M, "-M").at(0)};
  const auto vs =
      lists ? parse_int_list(sel.v, "-v") : std::vector<int>{parse_int_list(sel.v, "-v").at(0)};
  if (!lists &&
      (parse_int_list(sel.M, "-M").size() != 1 || parse_int_list(sel.v, "-v").size() != 1))
    throw ConfigError("this command takes one -M and one -v value, not a list");
  ScheduleSweep sweep = expand_schedules(sel.schedules, sel.P, Ms, vs);
  if (Ms.size() * vs.size() * parse_name_list(sel.schedules, "--schedule").size() > 1 ||
      sel.schedules == "all")
    for (const auto& why : sweep.skipped) std::cerr << "skip: " << why << "\n";
  std::vector<std::pair<Config, Schedule>> out;
  for (auto& [name, s] : sweep.schedules) {
    if (name.rfind("csv:", 0) == 0 && s.P != sel.P)
      std::cerr << "note: " << name << " has P=" << s.P << " (-P " << sel.P << " ignored)\n";
    Config c{name, {s.P, s.M, s.v}};
    out.emplace_back(c, std::move(s));
  }
  return out;
}

SimConfig sim_config(const Selection& sel) {
  SimConfig c;
  c.t_f = parse_costs(sel.t_f, "--t-f");
  c.t_b = parse_costs(sel.t_b, "--t-b");
  c.t_w = parse_costs(sel.t_w, "--t-w");
  c.t_fb = sel.t_fb;
  if (sel.latency < 0 || sel.bandwidth < 0 || sel.act_bytes < 0)
    throw ConfigError("--latency, --bandwidth and --act-bytes must be >= 0");
  c.latency = sel.latency;
  c.bandwidth = sel.bandwidth;
  c.act_bytes = sel.act_bytes;
  c.msg_bytes = sel.msg_bytes < 0 ? sel.act_bytes : sel.msg_bytes;
  if (sel.steps < 2 || sel.steps > 1000) throw ConfigError("--steps must be 2..1000");
  c.steps = sel.steps;
  return c;
}

ModelInput model_input(const Config& c, const Schedule& s, const SimConfig& sc) {
  ModelInput in;
  in.schedule = c.schedule;
  in.P = s.P;
  in.M = s.M;
  in.v = s.v;
  in.t_f = sc.t_f[0];
  in.t_b = sc.t_b[0];
  in.t_w = sc.t_w[0];
  in.t_fb = sc.t_fb;
  return in;
}

void put_metrics(json& j, const BubbleMetrics& single, const BubbleMetrics& steady) {
  j["makespan"] = single.span;
  j["idle_total"] = single.idle_total;
  j["bubble_fraction"] = single.bubble_fraction;
  j["bubble_ratio"] = single.bubble_ratio;
  j["bubble_time"] = single.bubble_time;
  j["period"] = steady.span;
  j["idle_total_steady"] = steady.idle_total;
  j["bubble_fraction_steady"] = steady.bubble_fraction;
  j["bubble_ratio_steady"] = steady.bubble_ratio;
  j["bubble_time_steady"] = steady.bubble_time;
}

json model_json(const ModelResult& m) {
  json j;
  j["applies"] = m.applies;
  j["formula"] = m.formula;
  j["conditions"] = m.conditions;
  j["source"] = m.source;
  if (m.applies) {
    put_metrics(j, m.single, m.steady);
    j["t_ideal"] = m.t_ideal;
  } else {
    j["reason"] = m.reason;
  }
  j["peak_activations"] = m.peak_activations;
  j["peak_formula"] = m.peak_formula;
  return j;
}

void write_timeline(const std::string& path, const Schedule& s, const SimResult& r) {
  std::vector<TraceSlice> slices;
  slices.reserve(r.events.size() * 2);
  constexpr double kUs = 1000.0;  // one simulated time unit shows as 1 ms
  for (const SimEvent& e : r.events) {
    const auto& acts = s.ranks[e.rank];
    const Action& a = acts[e.index];
    std::string cat = e.n == 2 ? "FB" : std::string(op_name(a.op));
    slices.push_back(
        {e.rank, 0, format_action_at(acts, e.index), cat, e.start * kUs, (e.end - e.start) * kUs});
    if (e.start > e.ready)
      slices.push_back({e.rank, 2, "wait", "wait", e.ready * kUs, (e.start - e.ready) * kUs});
  }
  write_chrome_trace(path, slices, s.P,
                     s.name + " P=" + std::to_string(s.P) + " M=" + std::to_string(s.M));
}

std::string timeline_path(const std::string& base, const Config& c, bool many) {
  if (!many) return base;
  std::string stem = base, ext;
  const auto dot = base.rfind('.');
  if (dot != std::string::npos && dot > base.rfind('/') + 1) {
    stem = base.substr(0, dot);
    ext = base.substr(dot);
  }
  std::string name = c.schedule;
  for (char& ch : name)
    if (ch == '/' || ch == ':') ch = '_';
  return stem + "_" + name + "_P" + std::to_string(c.params.P) + "_M" + std::to_string(c.params.M) +
         "_v" + std::to_string(c.params.v) + ext;
}

int cmd_sim_or_model(const Selection& sel, bool simulate_too) {
  const SimConfig sc = sim_config(sel);
  auto configs = expand(sel, true);
  json out = json::array();
  for (auto& [c, s] : configs) {
    const ModelResult m = closed_form(model_input(c, s, sc));
    json j;
    j["schedule"] = c.schedule;
    j["P"] = s.P;
    j["M"] = s.M;
    j["v"] = s.v;
    if (simulate_too) {
      validate_or_throw(s);
      SimConfig run_cfg = sc;
      run_cfg.record_events = !sel.timeline.empty();
      const SimResult r = simulate(s, run_cfg);
      put_metrics(j, r.single, r.steady);
      j["t_ideal"] = r.t_ideal;
      std::vector<double> peaks, peak_bytes;
      for (const auto& rs : r.ranks) {
        peaks.push_back(rs.peak_activations);
        peak_bytes.push_back(rs.peak_activation_bytes);
      }
      j["peak_activations"] = peaks;
      if (sc.act_bytes > 0) j["peak_activation_bytes"] = peak_bytes;
      j["p2p_messages"] = r.p2p_messages;
      j["model"] = model_json(m);
      if (!sel.timeline.empty())
        write_timeline(timeline_path(sel.timeline, c, configs.size() > 1), s, r);
    } else {
      j.update(model_json(m));
    }
    out.push_back(j);
  }
  const bool steady_first = sel.sync == "none";
  if (sel.format == "json") {
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  const char* cols_sim[] = {"schedule",
                            "P",
                            "M",
                            "v",
                            "makespan",
                            "idle_total",
                            "bubble_fraction",
                            "bubble_time",
                            "period",
                            "bubble_fraction_steady",
                            "model_bubble_fraction",
                            "peak_act_rank0",
                            "p2p_messages"};
  const char* cols_model[] = {"schedule",
                              "P",
                              "M",
                              "v",
                              "makespan",
                              "bubble_fraction",
                              "bubble_ratio",
                              "bubble_time",
                              "period",
                              "bubble_fraction_steady",
                              "peak_act_rank0",
                              "formula"};
  std::vector<std::string> cols;
  if (simulate_too)
    cols.assign(std::begin(cols_sim), std::end(cols_sim));
  else
    cols.assign(std::begin(cols_model), std::end(cols_model));
  std::vector<std::vector<std::string>> rows;
  for (const auto& j : out) {
    std::vector<std::string> row;
    const json& mm = simulate_too ? j["model"] : j;
    const bool ok = !mm.contains("applies") || mm["applies"].get<bool>();
    for (const auto& col : cols) {
      if (col == "schedule")
        row.push_back(j["schedule"].get<std::string>());
      else if (col == "formula")
        row.push_back(j["formula"].get<std::string>());
      else if (col == "model_bubble_fraction")
        row.push_back(
            j["model"]["applies"].get<bool>()
                ? fmt(j["model"][steady_first ? "bubble_fraction_steady" : "bubble_fraction"]
                          .get<double>())
                : "n/a");
      else if (col == "peak_act_rank0")
        row.push_back(j["peak_activations"].empty() ? "n/a"
                                                    : fmt(j["peak_activations"][0].get<double>()));
      else if (!ok && !simulate_too && col != "P" && col != "M" && col != "v")
        row.push_back("n/a");
      else
        row.push_back(fmt(j[col].get<double>()));
    }
    rows.push_back(std::move(row));
  }
  if (sel.format == "csv") {
    for (std::size_t i = 0; i < cols.size(); ++i) std::cout << (i ? "," : "") << cols[i];
    std::cout << "\n";
    for (const auto& row : rows) {
      for (std::size_t i = 0; i < row.size(); ++i) {
        const bool quote = row[i].find(',') != std::string::npos;
        std::cout << (i ? "," : "") << (quote ? "\"" + row[i] + "\"" : row[i]);
      }
      std::cout << "\n";
    }
    return kExitOk;
  }
  print_table(std::cout, cols, rows);
  for (const auto& j : out) {
    const json& mm = simulate_too ? j["model"] : j;
    if (!mm["applies"].get<bool>())
      std::cout << "note: " << j["schedule"].get<std::string>() << " M=" << j["M"]
                << " v=" << j["v"] << ": no closed form: " << mm["reason"].get<std::string>()
                << "\n";
  }
  return kExitOk;
}

Schedule load_one(const Selection& sel, const std::string& csv) {
  if (!csv.empty()) return load_csv_arg(csv);
  auto configs = expand(sel, false);
  if (configs.size() != 1) throw ConfigError("this command takes one schedule");
  return std::move(configs.front().second);
}

int cmd_validate(const Selection& sel, const std::string& csv) {
  Schedule s = load_one(sel, csv);
  ValidationReport rep = validate(s);
  if (!rep.ok()) {
    std::cout << rep.describe(s);
    return kExitCheckFailed;
  }
  std::size_t compute = s.compute_size();
  if (s.lowered) {
    DryRunResult dr = dry_run(s);
    if (!dr.ok) {
      std::cout << "schedule '" << s.name << "' fails its dry run:\n" << dr.message;
      return kExitCheckFailed;
    }
  } else {
    s = lower(std::move(s));
  }
  std::cout << "ok: " << s.name << " P=" << s.P << " M=" << s.M << " v=" << s.v << ": " << compute
            << " compute actions, " << (s.size() - compute)
            << " send/recv actions; dry run without deadlock\n";
  return kExitOk;
}

int cmd_show(const Selection& sel, const std::string& csv, bool lowered,
             const std::string& format) {
  Schedule s = load_one(sel, csv);
  validate_or_throw(s);
  if (lowered && !s.lowered) s = lower(std::move(s));
  if (format == "csv") {
    dump_csv(s, std::cout);
  } else if (format == "grid") {
    std::cout << format_grid(s, -1, 0, static_cast<std::size_t>(-1));
  } else {
    std::cout << "# " << s.name << " P=" << s.P << " M=" << s.M << " v=" << s.v
              << " placement=" << placement_name(s) << (s.lowered ? " (lowered)" : "") << "\n";
    for (int r = 0; r < s.P; ++r)
      std::cout << "rank " << r << ": " << format_actions(s.ranks[r]) << "\n";
  }
  return kExitOk;
}

}  // namespace

int cli_main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "run") return run_main(argc, argv);
  CLI::App app{"bubblebench: pipeline-parallel schedules, simulated, modelled and run end to end"};
  app.require_subcommand(1);
  app.set_version_flag("--version",
                       std::string("bubblebench ") + BB_VERSION + " (" + BB_GIT_SHA + ")");

  Selection sim_sel, model_sel, val_sel, show_sel;
  auto* sim =
      app.add_subcommand("sim", "Timed simulation of schedules (with the closed forms beside)");
  add_selection(sim, sim_sel, true, true);
  sim->add_option("--timeline", sim_sel.timeline,
                  "Write a Chrome-trace JSON of the simulated step");
  auto* model = app.add_subcommand("model", "Closed-form bubble models only");
  add_selection(model, model_sel, true, true);
  std::string val_csv, show_csv, show_format = "text";
  bool show_lowered = false;
  auto* val = app.add_subcommand("validate", "Validate a schedule and dry-run its lowering");
  add_selection(val, val_sel, false, false);
  val->add_option("--csv", val_csv, "Validate a schedule CSV instead");
  auto* show = app.add_subcommand("show", "Print a schedule's action lists per rank");
  add_selection(show, show_sel, false, false);
  show->add_option("--csv", show_csv, "Show a schedule CSV instead");
  show->add_flag("--lowered", show_lowered, "Insert the SEND/RECV actions");
  show->add_option("--format", show_format, "text, grid or csv")
      ->check(CLI::IsMember({"text", "grid", "csv"}))
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "bubblebench: error: " << e.what() << " (see --help)\n";
    return kExitConfig;
  }
  try {
    if (*sim) return cmd_sim_or_model(sim_sel, true);
    if (*model) return cmd_sim_or_model(model_sel, false);
    if (*val) return cmd_validate(val_sel, val_csv);
    if (*show) return cmd_show(show_sel, show_csv, show_lowered, show_format);
  } catch (const ConfigError& e) {
    std::cerr << "bubblebench: error: " << e.what() << "\n";
    return kExitConfig;
  } catch (const ScheduleError& e) {
    std::cerr << "bubblebench: invalid schedule: " << e.what() << "\n";
    return kExitCheckFailed;
  } catch (const IoError& e) {
    std::cerr << "bubblebench: I/O error: " << e.what() << "\n";
    return kExitIo;
  } catch (const std::bad_alloc&) {
    std::cerr << "bubblebench: error: out of memory for this configuration\n";
    return kExitConfig;
  } catch (const std::exception& e) {
    std::cerr << "bubblebench: internal error: " << e.what() << "\n";
    return kExitCheckFailed;
  }
  return kExitConfig;
}

}  // namespace bb
