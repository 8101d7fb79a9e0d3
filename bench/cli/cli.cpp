#include "cli/cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <future>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "cli/advise.hpp"
#include "cli/build_info.hpp"
#include "cli/calibrate.hpp"
#include "cli/list.hpp"
#include "cli/options.hpp"
#include "cli/run.hpp"
#include "cli/schedule_table.hpp"
#include "cli/stage_options.hpp"
#include "cli/table.hpp"
#include "cli/timeline.hpp"
#include "common/error.hpp"
#include "model/closed_form.hpp"
#include "query/query.hpp"
#include "results/links_io.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/parallel.hpp"
#include "schedule/periodic.hpp"
#include "schedule/text.hpp"
#include "schedule/validate.hpp"
#include "sim/sim.hpp"

namespace bb {
namespace {

using json = nlohmann::json;

// What the selection flags of sim / model / validate / show ask for (query::Options: the
// flags as text, shared with the Python module), and what only the command line has.
struct Selection : query::Options {
  std::string sync = "barrier";
  std::string format = "table";
  std::string timeline;
  CLI::Option *P_opt = nullptr, *M_opt = nullptr, *v_opt = nullptr;  // given or not
};

// A file name option may not be empty (rather than meaning "none").
const CLI::Validator kFileName(
    [](std::string& s) { return s.empty() ? std::string("needs a file name") : std::string(); },
    "FILE");

void add_selection(CLI::App* app, Selection& sel, bool costs, bool lists) {
  add_with_default(*app, "--schedule,-s", sel.schedules, schedule_option_help(lists));
  sel.P_opt = add_with_default(*app, "-P", sel.P, "Pipeline ranks");
  sel.M_opt = add_with_default(
      *app, "-M", sel.M,
      lists ? "Micro-batches per step (LIST: 4,8 or 4:64:x2 or 2:8:2)" : "Micro-batches per step");
  sel.v_opt = add_with_default(
      *app, "-v", sel.v,
      lists ? "Chunks per rank for " + schedules_taking_v() + " (LIST)" : "Chunks per rank");
  app->add_option("--mem-limit", sel.mem_limit,
                  schedules_ordered_by_costs() +
                      ": live micro-batches per rank (stage units; 0: P, as 1F1B)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--mem-w", sel.mem_w,
                  "zb-auto: what a micro-batch between its B and its W counts towards "
                  "--mem-limit (1: a whole one, as the peak counts; 0.5: the zero-bubble "
                  "paper's scheduler)")
      ->check(CLI::Range(0.0, 1.0));
  if (!costs) return;
  add_with_default(*app, "--t-f", sel.t_f, "Forward time of one stage (or one value per chunk)");
  add_with_default(*app, "--t-b", sel.t_b, "Input-gradient backward time (B)");
  add_with_default(*app, "--t-w", sel.t_w,
                   "Weight-gradient backward time (W); 0: B is the whole backward");
  app->add_option("--t-fb", sel.t_fb, "Overlapped F&B pair time (DualPipe); default F+B+W");
  app->add_option("--latency", sel.latency, "Per-message latency (time units)");
  app->add_option("--bandwidth", sel.bandwidth,
                  "Link bandwidth (bytes per time unit); 0 = infinite");
  app->add_option("--act-bytes", sel.act_bytes,
                  "Activation bytes kept by one micro-batch of one stage");
  app->add_option("--msg-bytes", sel.msg_bytes, "Bytes of one P2P message (default: --act-bytes)");
  app->add_option("--static-bytes", sel.static_bytes,
                  "Bytes a stage holds for the whole step (parameters, gradients, optimizer "
                  "state, workspaces): with --act-bytes/--msg-bytes the memory model's "
                  "peak_memory_bytes per rank (docs/memory.md)");
  add_with_default(*app, "--steps", sel.steps,
                   "Back-to-back steps simulated for the steady state (>= 2)");
  add_choice(*app, "--sync", sel.sync, "barrier (single-step view first) or none (steady state)",
             {"barrier", "none"});
  add_choice(*app, "--format", sel.format, "table, json or csv", {"table", "json", "csv"});
}

void say_stderr(std::string_view kind, const std::string& line) {
  std::cerr << kind << ": " << line << "\n";
}

// The options CLI11 filled, with what the parse tells: which of -P, -M, -v were given.
const Selection& parsed(Selection& sel) {
  sel.P_given = sel.P_opt->count() > 0;
  sel.M_given = sel.M_opt->count() > 0;
  sel.v_given = sel.v_opt->count() > 0;
  sel.record_events = !sel.timeline.empty();
  return sel;
}

int cmd_sim_or_model(const Selection& sel, bool simulate_too) {
  query::check_P(sel);
  SimConfig sc = query::sim_config(sel);
  if (!sel.links.empty()) sc.links = std::make_shared<const LinkModel>(read_links_file(sel.links));
  const bool many = sweep_combinations(sel.schedules, parse_int_list(sel.M, "-M"),
                                       parse_int_list(sel.v, "-v")) > 1;
  if (many && !sel.timeline.empty())
    say_stderr("note", "--timeline " + sel.timeline + ": several configurations, one trace each: " +
                           timeline_pattern(sel.timeline));
  // skip:/note: lines wait until every configuration is through: an error (e.g. a cost list
  // that does not fit a later configuration) is then the only line.
  std::vector<std::pair<std::string, std::string>> held;
  const SweepSay hold = [&](std::string_view kind, const std::string& line) {
    held.emplace_back(kind, line);
  };
  const json out = query::sim_or_model(
      sel, sc, simulate_too, hold,
      [&](const std::string& name, const Schedule& s, const SimResult& r,
          const std::vector<RankMemory>& memory) {
        write_timeline(timeline_path(sel.timeline, name, s, many), s, r, sc, memory);
      });
  for (const auto& [kind, line] : held) say_stderr(kind, line);
  const bool steady_first = sel.sync == "none";
  if (sel.format == "json") {
    // Names come from files and command lines: bytes that are not UTF-8 print as U+FFFD.
    std::cout << out.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
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
  // CSV carries every digit; the table rounds what is not an integer.
  const auto num = [&](const json& x) {
    return sel.format == "csv" ? fmt_exact(x.get<double>()) : fmt(x.get<double>());
  };
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
                ? num(j["model"][steady_first ? "bubble_fraction_steady" : "bubble_fraction"])
                : "n/a");
      else if (col == "peak_act_rank0")
        row.push_back(j["peak_activations"].empty() ? "n/a" : num(j["peak_activations"][0]));
      else if (!ok && !simulate_too && col != "P" && col != "M" && col != "v")
        row.push_back("n/a");
      else
        row.push_back(num(j[col]));
    }
    rows.push_back(std::move(row));
  }
  if (sel.format == "csv") {
    print_csv_row(std::cout, cols);
    for (const auto& row : rows) print_csv_row(std::cout, row);
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

// The lists are validated and lowered (query::validate); text: "ok: ..." or the report,
// json: the object itself. Exit 1 when they are not valid or deadlock.
int cmd_validate(const Selection& sel, const std::optional<std::string>& csv) {
  const json j = query::validate(query::load_one(sel, csv, say_stderr));
  const bool ok = j["ok"].get<bool>();
  if (sel.format == "json")
    std::cout << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  else if (!ok)
    std::cout << j["report"].get<std::string>();
  else
    std::cout << "ok: " << j["schedule"].get<std::string>() << " P=" << j["P"] << " M=" << j["M"]
              << " v=" << j["v"] << ": " << j["compute_actions"] << " compute actions, "
              << j["send_recv_actions"] << " send/recv actions; dry run without deadlock\n";
  return ok ? kExitOk : kExitCheckFailed;
}

int cmd_show(const Selection& sel, const std::optional<std::string>& csv, bool lowered,
             const std::string& format, const std::string& partition) {
  if (lowered && format == "pytorch-csv")
    throw ConfigError(
        "--format pytorch-csv holds compute actions only (PyTorch adds its own communication): "
        "drop --lowered");
  Schedule s = query::load_one(sel, csv, say_stderr);
  validate_or_throw(s);
  const std::string layout = partition.empty() ? "" : partition_report(s, partition);
  if (lowered && !s.lowered) s = lower_by_periodic_form(std::move(s));
  if (format == "csv") {
    dump_csv(s, std::cout);
  } else if (format == "pytorch-csv") {
    dump_pytorch_csv(s, std::cout);
  } else if (format == "grid") {
    std::cout << format_grid(s, -1, 0, static_cast<std::size_t>(-1));
  } else {
    std::cout << "# " << s.name << " P=" << s.P << " M=" << s.M << " v=" << s.v
              << " placement=" << placement_name(s) << (s.lowered ? " (lowered)" : "") << "\n";
    std::cout << layout;
    for (int r = 0; r < s.P; ++r)
      std::cout << "rank " << r << ": " << format_actions(s.ranks[r]) << "\n";
  }
  return kExitOk;
}

int commands(int argc, char** argv) {
  CLI::App app{"bubblebench: pipeline-parallel schedules, simulated, modelled and run end to end"};
  app.require_subcommand(1);
  // A flag given twice takes its last value (so a job's extra arguments can override a line's).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_version_flag("--version",
                       std::string("bubblebench ") + BB_VERSION + " (" + build_git_sha() + ")");

  Selection sim_sel, model_sel, val_sel, show_sel;
  auto* sim =
      app.add_subcommand("sim", "Timed simulation of schedules (with the closed forms beside)");
  add_selection(sim, sim_sel, true, true);
  sim->add_option("--timeline", sim_sel.timeline, "Write a Chrome-trace JSON of the simulated step")
      ->check(kFileName);
  sim->add_option("--links", sim_sel.links,
                  "Per-pair message costs fitted by `calibrate` (its --out HDF5 or --json "
                  "output), in seconds: give --t-f/--t-b/--t-w and --msg-bytes to match")
      ->check(kFileName);
  auto* model = app.add_subcommand("model", "Closed-form bubble models only");
  add_selection(model, model_sel, true, true);
  std::string val_csv, show_csv, show_format = "text", show_partition;
  bool show_lowered = false;
  auto* val = app.add_subcommand("validate", "Validate a schedule and dry-run its lowering");
  add_selection(val, val_sel, false, false);
  auto* val_csv_opt =
      val->add_option("--csv", val_csv, "Validate a schedule CSV instead")->check(kFileName);
  val_sel.format = "text";
  add_choice(*val, "--format", val_sel.format, "text or json", {"text", "json"});
  auto* show = app.add_subcommand("show", "Print a schedule's action lists per rank");
  add_selection(show, show_sel, false, false);
  auto* show_csv_opt =
      show->add_option("--csv", show_csv, "Show a schedule CSV instead")->check(kFileName);
  show->add_flag("--lowered", show_lowered, "Insert the SEND/RECV actions");
  show->add_option("--partition", show_partition,
                   "Blocks per stage along the route (3,2) or a Megatron-LM layout string "
                   "(Et*3|t*2,L): printed both ways with the chunks and ranks of each stage");
  add_choice(*show, "--format", show_format,
             "text, grid, csv (bubblebench's CSV) or pytorch-csv (PyTorch's pipelining "
             "CSV, compute actions only; docs/csv.md)",
             {"text", "grid", "csv", "pytorch-csv"});
  std::string list_format = "text";
  auto* lst = app.add_subcommand(
      "list", "The built-in schedules: placement, chunks per rank, backward, what each accepts");
  add_choice(*lst, "--format", list_format,
             "text, markdown (also the closed forms: docs/schedules.md's table) or json (every "
             "fact)",
             {"text", "markdown", "json"});
  // `run` and `calibrate` are dispatched before this parser (cli_main); listed for --help.
  app.add_subcommand("run",
                     "Every schedule end to end over MPI: mpiexec -n P bubblebench run ... "
                     "(see bubblebench run --help)");
  app.add_subcommand("advise",
                     "Rank schedule, M, v and recompute by simulated time under a memory cap; "
                     "--verify K runs the top K under mpiexec (see bubblebench advise --help)");
  app.add_subcommand("calibrate",
                     "Message time per rank pair and size, fitted alpha + bytes/beta: mpiexec -n "
                     "P bubblebench calibrate ... (see bubblebench calibrate --help)");
  const auto known = [&](const std::string& name) {
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      if (sub->get_name() == name) return true;
    return false;
  };
  if (argc > 1 && argv[1][0] != '-' && !known(argv[1])) {
    std::cerr
        << "bubblebench: error: unknown command '" << argv[1]
        << "' (commands: sim, model, validate, show, list, run, calibrate, advise; see --help)\n";
    return kExitConfig;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "bubblebench: error: " << e.what() << " (see --help)\n";
    return kExitConfig;
  }
  try {
    if (*sim) return cmd_sim_or_model(parsed(sim_sel), true);
    if (*model) return cmd_sim_or_model(parsed(model_sel), false);
    const auto given = [](const CLI::Option* opt, const std::string& value) {
      return opt->count() ? std::optional<std::string>(value) : std::nullopt;
    };
    if (*val) return cmd_validate(parsed(val_sel), given(val_csv_opt, val_csv));
    if (*show)
      return cmd_show(parsed(show_sel), given(show_csv_opt, show_csv), show_lowered, show_format,
                      show_partition);
    if (*lst) {
      std::cout << (list_format == "json"       ? schedules_json()
                    : list_format == "markdown" ? schedules_markdown()
                                                : schedules_text());
      return kExitOk;
    }
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

}  // namespace

int cli_main(int argc, char** argv) {
  const std::string first = argc > 1 ? argv[1] : "";
  // A closed pipe (`bubblebench show --lowered | head -1`) is an I/O error, exit 4 with one
  // line (below), not death by SIGPIPE (141). Not for the MPI commands: MPI owns signals.
  if (first != "run" && first != "calibrate") std::signal(SIGPIPE, SIG_IGN);
  const int code = first == "run"         ? run_main(argc, argv)
                   : first == "calibrate" ? calibrate_main(argc, argv)
                   : first == "advise"    ? advise_main(argc, argv)
                                          : commands(argc, argv);
  // Whatever the command printed must have reached standard output (a full disk, a closed
  // pipe): otherwise the results are lost, and that is an I/O error.
  errno = 0;
  std::cout.flush();
  const bool flushed = std::fflush(stdout) == 0;
  const int err = errno;
  if (flushed && std::cout && !std::ferror(stdout)) return code;
  std::cerr << "bubblebench: I/O error: cannot write standard output"
            << (err ? std::string(" (") + std::strerror(err) + ")" : std::string()) << "\n";
  return kExitIo;
}

}  // namespace bb
