// Every built-in schedule at P = 4, M = 8 (F = 1, B = 1, W = 1 per stage; 1F1B's B the whole
// backward): generated from the registry, validated, simulated, and its closed form beside it.
// Built against an installed bubblebench by ctest install.consumer (examples/cpp/CMakeLists.txt).
#include <bubblebench/model/closed_form.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "schedule/schedule_info.hpp"
#include "schedule/validate.hpp"
#include "sim/sim.hpp"

int main() {
  std::printf("%-12s %3s %10s %16s %14s\n", "schedule", "v", "makespan", "bubble_fraction",
              "closed_form");
  for (const bb::ScheduleInfo& info : bb::schedule_infos()) {
    bb::ScheduleParams p;
    p.P = 4;
    p.M = 8;
    p.v = 2;  // for the schedules that take v
    try {
      const bb::Schedule s = bb::generate(info, p);
      bb::validate_or_throw(s);
      bb::SimConfig cfg;  // the closed forms' unit costs: F = B = W = 1 where B and W split
      cfg.t_f = {1.0};
      cfg.t_b = {info.splits_backward ? 1.0 : 2.0};
      cfg.t_w = {info.splits_backward ? 1.0 : 0.0};
      const bb::SimResult r = bb::simulate(s, cfg);
      bb::ModelInput in;
      in.schedule = std::string(info.name);
      in.P = s.P;
      in.M = s.M;
      in.v = s.v;
      in.t_f = cfg.t_f[0];
      in.t_b = cfg.t_b[0];
      in.t_w = cfg.t_w[0];
      const bb::ModelResult m = bb::closed_form(in);
      std::printf("%-12s %3d %10g %16.4f ", std::string(info.name).c_str(), s.v, r.single.span,
                  r.single.bubble_fraction);
      if (m.applies)
        std::printf("%14.4f\n", m.single.bubble_fraction);
      else
        std::printf("%14s\n", "-");
    } catch (const std::exception& e) {
      std::printf("%-12s refused: %s\n", std::string(info.name).c_str(), e.what());
    }
  }
  return 0;
}
