// The Python module `bubblebench` (pybind11): the schedule registry, schedules as per-rank
// action lists, and what `sim`, `model`, `validate` and `advise --format json` print, as
// dicts with the same keys and numbers (README "From Python"). Keyword arguments become the
// command line's option text (a float through repr(), so it parses back to the same double; a
// list or range joined by commas) and take the CLI's own code path (query/query.hpp); errors
// raise ValueError with the CLI's one-line message. The GIL is released while the core works.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/list.hpp"
#include "common/error.hpp"
#include "query/query.hpp"
#include "schedule/lower.hpp"
#include "schedule/schedule_info.hpp"
#include "schedule/text.hpp"
#include "schedule/validate.hpp"

namespace py = pybind11;
using json = nlohmann::json;

namespace bb::python {
namespace {

// --- Python values <-> the CLI's option text and JSON --------------------------------------

bool is_list_like(py::handle x) {
  return !py::isinstance<py::str>(x) && !py::isinstance<py::bytes>(x) && py::hasattr(x, "__iter__");
}

// One value or a sequence of them as the command line writes it: "8", "1.5", "4,8,16".
std::string option_text(py::handle x, const char* what) {
  if (py::isinstance<py::str>(x)) return x.cast<std::string>();
  if (py::isinstance<py::bool_>(x))
    throw ConfigError(std::string(what) + ": takes a number, not " +
                      py::repr(x).cast<std::string>());
  if (py::hasattr(x, "__index__")) return py::str(py::int_(x.attr("__index__")()));
  if (is_list_like(x)) {
    std::string out;
    for (py::handle item : py::iter(x)) {
      if (is_list_like(item)) throw ConfigError(std::string(what) + ": a list of lists");
      out += (out.empty() ? "" : ",") + option_text(item, what);
    }
    return out;
  }
  if (py::hasattr(x, "__float__"))
    return py::repr(py::float_(py::reinterpret_borrow<py::object>(x))).cast<std::string>();
  throw ConfigError(std::string(what) + ": takes a number or a list of numbers, not " +
                    py::repr(x).cast<std::string>());
}

// The option's text, or "" for None (the command line's "not given").
std::string optional_text(py::handle x, const char* what) {
  return x.is_none() ? std::string() : option_text(x, what);
}

// An option's default text as a Python value for the signature: 8, 1.5, "4:64:x2", None.
py::object default_value(const std::string& text) {
  if (text.empty()) return py::none();
  std::size_t used = 0;
  try {
    const long long n = std::stoll(text, &used);
    if (used == text.size()) return py::int_(n);
    const double d = std::stod(text, &used);
    if (used == text.size()) return py::float_(d);
  } catch (const std::exception&) {
  }
  return py::str(text);
}

// JSON -> Python. A whole number below 2^53 comes back as int (33, as the table prints it).
py::object to_python(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return py::none();
    case json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case json::value_t::number_integer:
      return py::int_(j.get<long long>());
    case json::value_t::number_unsigned:
      return py::int_(j.get<unsigned long long>());
    case json::value_t::number_float: {
      const double x = j.get<double>();
      if (std::isfinite(x) && x == std::trunc(x) && std::fabs(x) < 0x1p53)
        return py::int_(static_cast<long long>(x));
      return py::float_(x);
    }
    case json::value_t::string:
      return py::str(j.get<std::string>());
    case json::value_t::array: {
      py::list out;
      for (const auto& x : j) out.append(to_python(x));
      return out;
    }
    case json::value_t::object: {
      py::dict out;
      for (const auto& [k, x] : j.items()) out[py::str(k)] = to_python(x);
      return out;
    }
    default:
      throw std::runtime_error("unexpected JSON value");
  }
}

// Skip and note lines of a sweep, held while the GIL is released, then warnings.
struct Said {
  std::vector<std::string> lines;
  SweepSay say() {
    return [this](std::string_view kind, const std::string& line) {
      lines.push_back(std::string(kind) + ": " + line);
    };
  }
  void warn() const {
    for (const auto& line : lines) PyErr_WarnEx(PyExc_UserWarning, line.c_str(), 1);
  }
};

// --- Schedules ------------------------------------------------------------------------------

py::list rank_actions(const Schedule& s, int r) {
  py::list out;
  const auto& actions = s.ranks[static_cast<std::size_t>(r)];
  for (std::size_t i = 0; i < actions.size();) {
    std::size_t used = 1;
    out.append(format_action_at(actions, i, &used));
    i += used;
  }
  return out;
}

int rank_index(const Schedule& s, long long r) {
  if (r < 0) r += s.P;
  if (r < 0 || r >= s.P) throw py::index_error("rank out of range (P=" + std::to_string(s.P) + ")");
  return static_cast<int>(r);
}

// The selection flags of sim / model / validate / show from keyword arguments.
// zb-auto's memory limit and what a micro-batch between its B and W counts towards it.
struct MemLimit {
  int limit;
  double w;
};

query::Options selection(py::handle schedule, int P, py::handle M, py::handle v, MemLimit mem) {
  query::Options o;
  o.schedules = option_text(schedule, "--schedule");
  o.P = P;
  o.M = option_text(M, "-M");
  o.v = option_text(v, "-v");
  o.mem_limit = mem.limit;
  o.mem_w = mem.w;
  o.P_given = o.M_given = o.v_given = true;
  return o;
}

// Several configurations asked for: a list of names, all, or a list or range of M or v.
bool asks_many(const query::Options& o, py::handle M, py::handle v) {
  const auto listed = [](const std::string& t) {
    return t.find(',') != std::string::npos || t.find(':') != std::string::npos;
  };
  return o.schedules == "all" || o.schedules.find(',') != std::string::npos || listed(o.M) ||
         listed(o.v) || is_list_like(M) || is_list_like(v);
}

Schedule one_schedule(const query::Options& o, Said& said) {
  py::gil_scoped_release free;
  return query::load_one(o, std::nullopt, said.say());
}

// --- sim and model --------------------------------------------------------------------------

struct Costs {
  py::object t_f, t_b, t_w, t_fb, latency, bandwidth, act_bytes, msg_bytes, static_bytes;
  int steps;
};

py::object sim_or_model(py::object schedule, int P, py::object M, py::object v, const Costs& c,
                        MemLimit mem, bool simulate_too) {
  const bool object = py::isinstance<Schedule>(schedule);
  query::Options o = selection(object ? py::object(py::str("")) : schedule, P, M, v, mem);
  o.t_f = option_text(c.t_f, "--t-f");
  o.t_b = option_text(c.t_b, "--t-b");
  o.t_w = option_text(c.t_w, "--t-w");
  o.t_fb = optional_text(c.t_fb, "--t-fb");
  o.latency = option_text(c.latency, "--latency");
  o.bandwidth = option_text(c.bandwidth, "--bandwidth");
  o.act_bytes = option_text(c.act_bytes, "--act-bytes");
  o.msg_bytes = optional_text(c.msg_bytes, "--msg-bytes");
  o.static_bytes = option_text(c.static_bytes, "--static-bytes");
  o.steps = c.steps;
  Said said;
  json out;
  if (object) {
    Schedule s = schedule.cast<const Schedule&>();
    py::gil_scoped_release free;
    const SimConfig sc = query::sim_config(o);
    const std::string name = s.name;
    if (s.lowered) dry_run_or_throw(s, name);
    out = query::evaluate(o, sc, name, std::move(s), simulate_too, true);
  } else {
    py::gil_scoped_release free;
    query::check_P(o);
    out = query::sim_or_model(o, query::sim_config(o), simulate_too, said.say());
  }
  said.warn();
  if (object || (!asks_many(o, M, v) && out.size() == 1)) return to_python(object ? out : out[0]);
  return to_python(out);
}

// --- advise ---------------------------------------------------------------------------------

py::dict advise_dict(const py::kwargs& kw) {
  query::AdviseOptions o;
  const auto text = [&](const char* key, std::string& to, const char* flag) {
    if (kw.contains(key)) to = optional_text(kw[key], flag);
  };
  const auto integer = [&](const char* key, int& to) {
    if (kw.contains(key) && !kw[key].is_none()) to = kw[key].cast<int>();
  };
  const std::vector<std::string> keys = {
      "schedules",  "P",       "M",         "v",         "recompute",   "global_batch", "mb_size",
      "t_f",        "t_b",     "t_w",       "act_bytes", "input_bytes", "param_bytes",  "optimizer",
      "memory_cap", "latency", "bandwidth", "fb_factor", "sync",        "top"};
  for (const auto& [k, _] : kw)
    if (std::find(keys.begin(), keys.end(), k.cast<std::string>()) == keys.end())
      throw py::type_error("advise() got an unexpected keyword argument '" + k.cast<std::string>() +
                           "'");
  text("schedules", o.schedules, "--schedule");
  integer("P", o.P);
  text("M", o.M, "-M");
  text("v", o.v, "-v");
  text("recompute", o.recompute, "--recompute");
  integer("global_batch", o.global_batch);
  integer("mb_size", o.mb_size);
  text("t_f", o.t_f, "--t-f");
  text("t_b", o.t_b, "--t-b");
  text("t_w", o.t_w, "--t-w");
  text("act_bytes", o.act_bytes, "--act-bytes");
  text("input_bytes", o.input_bytes, "--input-bytes");
  text("param_bytes", o.param_bytes, "--param-bytes");
  text("optimizer", o.optimizer, "--optimizer");
  text("memory_cap", o.memory_cap, "--memory-cap");
  text("latency", o.latency, "--latency");
  text("bandwidth", o.bandwidth, "--bandwidth");
  if (kw.contains("fb_factor") && !kw["fb_factor"].is_none())
    o.fb_factor = kw["fb_factor"].cast<double>();
  text("sync", o.sync, "--sync");
  integer("top", o.top);
  json out;
  {
    py::gil_scoped_release free;
    const advise::Input in = query::advise_input(o, query::advise_defaults());
    out = query::advise_json(in, advise::search(in, o.top, 0));
  }
  return to_python(out);
}

// A schedule object: a sequence of per-rank action lists, its CSV forms, its lowering.
void bind_schedule(py::module_& m) {
  py::class_<Schedule>(m, "Schedule",
                       "A schedule: one action list per rank (len() is P), actions as text "
                       "(`0F3`, `1B2`, `0W2`, `2BW0`, `(0F4;3BW1)FB`).")
      .def("__len__", [](const Schedule& s) { return s.P; })
      .def("__getitem__",
           [](const Schedule& s, long long r) { return rank_actions(s, rank_index(s, r)); })
      .def("__iter__",
           [](const Schedule& s) {
             py::list ranks;
             for (int r = 0; r < s.P; ++r) ranks.append(rank_actions(s, r));
             return py::iter(ranks);
           })
      .def_readonly("name", &Schedule::name)
      .def_readonly("P", &Schedule::P)
      .def_readonly("M", &Schedule::M)
      .def_readonly("v", &Schedule::v)
      .def_readonly("lowered", &Schedule::lowered)
      .def_property_readonly("placement", [](const Schedule& s) { return placement_name(s); })
      .def(
          "to_csv", [](const Schedule& s) { return dump_csv(s); },
          "bubblebench's CSV (`show --format csv`; docs/csv.md)")
      .def(
          "to_pytorch_csv", [](const Schedule& s) { return dump_pytorch_csv(s); },
          "PyTorch's pipelining CSV (`show --format pytorch-csv`), compute actions only")
      .def(
          "lower",
          [](const Schedule& s) {
            validate_or_throw(s);
            py::gil_scoped_release free;
            return s.lowered ? s : lower_by_periodic_form(Schedule(s));
          },
          "The lists with SEND/RECV inserted (`show --lowered`)")
      .def_static(
          "from_csv",
          [](const std::string& text) {
            std::istringstream in(text);
            return load_csv(in);
          },
          py::arg("text"), "A schedule from CSV text, either dialect (docs/csv.md)")
      .def("__repr__", [](const Schedule& s) {
        return "<bubblebench.Schedule " + s.name + " P=" + std::to_string(s.P) +
               " M=" + std::to_string(s.M) + " v=" + std::to_string(s.v) +
               " placement=" + placement_name(s) + (s.lowered ? " lowered" : "") + ">";
      });
}

// The registry, one schedule, and the dicts of sim / model / validate / advise.
void bind_queries(py::module_& m) {
  const query::Options d;  // the command line's defaults, shown in the signatures
  m.def(
      "schedules",
      [] {
        std::vector<std::string> names;
        for (const ScheduleInfo& i : schedule_infos()) names.emplace_back(i.name);
        return names;
      },
      "The built-in schedules' names, in the registry's order (`bubblebench list`).");
  m.def(
      "schedule",
      [](py::object name, int P, py::object M, py::object v, int mem_limit, double mem_w) {
        Said said;
        Schedule s = one_schedule(selection(name, P, M, v, {mem_limit, mem_w}), said);
        said.warn();
        return s;
      },
      py::arg("name"), py::arg("P") = d.P, py::arg("M") = default_value(d.M),
      py::arg("v") = default_value(d.v), py::arg("mem_limit") = d.mem_limit,
      py::arg("mem_w") = d.mem_w,
      "The schedule NAME generates for P ranks and M micro-batches (v chunks per rank where "
      "it takes v), or csv:FILE: what `bubblebench show` prints.");
  m.def(
      "load_csv", [](const std::string& path) { return load_csv_arg(path); }, py::arg("path"),
      "A schedule CSV file, either dialect (docs/csv.md).");

  const auto def_costs = [&](const char* fn, bool simulate_too, const char* doc) {
    m.def(
        fn,
        [simulate_too](py::object schedule, int P, py::object M, py::object v, py::object t_f,
                       py::object t_b, py::object t_w, py::object t_fb, py::object latency,
                       py::object bandwidth, py::object act_bytes, py::object msg_bytes,
                       py::object static_bytes, int steps, int mem_limit, double mem_w) {
          const Costs c{t_f,       t_b,       t_w,       t_fb,         latency,
                        bandwidth, act_bytes, msg_bytes, static_bytes, steps};
          return sim_or_model(std::move(schedule), P, std::move(M), std::move(v), c,
                              {mem_limit, mem_w}, simulate_too);
        },
        py::arg("schedule"), py::arg("P") = d.P, py::arg("M") = default_value(d.M),
        py::arg("v") = default_value(d.v), py::kw_only(), py::arg("t_f") = default_value(d.t_f),
        py::arg("t_b") = default_value(d.t_b), py::arg("t_w") = default_value(d.t_w),
        py::arg("t_fb") = py::none(), py::arg("latency") = default_value(d.latency),
        py::arg("bandwidth") = default_value(d.bandwidth),
        py::arg("act_bytes") = default_value(d.act_bytes), py::arg("msg_bytes") = py::none(),
        py::arg("static_bytes") = default_value(d.static_bytes), py::arg("steps") = d.steps,
        py::arg("mem_limit") = d.mem_limit, py::arg("mem_w") = d.mem_w, doc);
  };
  def_costs("simulate", true,
            "The timed simulation of SCHEDULE (a name, a comma-separated list or `all`, "
            "csv:FILE, or a Schedule) with the closed form beside it: the dict of `bubblebench "
            "sim --format json` (a list of them when several configurations are asked for: "
            "several names, or a list or range of M or v). Times per stage and micro-batch; a "
            "cost may be a list with one value per chunk.");
  def_costs("model", false,
            "The closed-form model of SCHEDULE: the dict of `bubblebench model --format json` "
            "(a list for several configurations, as simulate).");
  m.def(
      "validate",
      [](py::object schedule, int P, py::object M, py::object v, int mem_limit, double mem_w) {
        Said said;
        Schedule s = py::isinstance<Schedule>(schedule)
                         ? schedule.cast<Schedule>()
                         : one_schedule(selection(schedule, P, M, v, {mem_limit, mem_w}), said);
        said.warn();
        json j;
        {
          py::gil_scoped_release free;
          j = query::validate(std::move(s));
        }
        return to_python(j);
      },
      py::arg("schedule"), py::arg("P") = d.P, py::arg("M") = default_value(d.M),
      py::arg("v") = default_value(d.v), py::arg("mem_limit") = d.mem_limit,
      py::arg("mem_w") = d.mem_w,
      "Validation and the lowering's dry run: the dict of `bubblebench validate --format json` "
      "(ok, the action counts, or the report).");
  m.def("advise", &advise_dict,
        "The advisor (docs/advise.md) on costs given as keywords (schedules='all', P=4, M="
        "'4:64:x2', v='1,2,3,4', recompute='both', global_batch, mb_size, t_f/t_b/t_w in "
        "seconds (default 1 ms), act_bytes, input_bytes, param_bytes, optimizer, memory_cap, "
        "latency, bandwidth, fb_factor, sync='barrier', top=5): the dict of `bubblebench "
        "advise --format json`.");
}

}  // namespace
}  // namespace bb::python

PYBIND11_MODULE(bubblebench, m) {
  using namespace bb;
  m.doc() =
      "bubblebench: pipeline-parallel schedules (the registry, per-rank action lists), their "
      "timed simulation, closed forms, validation and the advisor, as the command line computes "
      "them: simulate/model/validate/advise return the dicts of `bubblebench sim|model|validate|"
      "advise --format json`.";
  m.attr("__version__") = BB_VERSION;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ConfigError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const ScheduleError& e) {
      PyErr_SetString(PyExc_ValueError, (std::string("invalid schedule: ") + e.what()).c_str());
    } catch (const IoError& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    }
  });
  bb::python::bind_schedule(m);
  bb::python::bind_queries(m);
}
