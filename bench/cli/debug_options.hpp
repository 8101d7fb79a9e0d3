// `run`'s hidden testing and diagnostic options, not in --help: every timed action's record on
// stderr (--debug-records); a rank that perturbs the gradients it reports to --check
// (--debug-perturb-grads R), skips its sends (--debug-drop-sends R: the watchdog must fire) or
// sleeps past --timeout before the setup's first collective (--debug-stall-setup R);
// for the attribution (sim/attribution.hpp), a slow rank (--debug-delay-rank R
// --debug-delay-us X: X µs added inside each of R's computes) and a slow link
// (--debug-link-delay SRC:DST:US: runtime/debug_transport.hpp).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "harness/settings.hpp"
#include "runtime/transport.hpp"

namespace bb {

struct DebugOptions {
  bool debug_records = false;   // every timed action's record on stderr
  int perturb_grads_rank = -1;  // testing a failing --check
  int drop_sends_rank = -1;     // testing the watchdog
  int stall_setup_rank = -1;    // testing the watchdog during the setup
  int debug_delay_rank = -1;
  double debug_delay_us = 0;
  std::string debug_link_delay;  // SRC:DST:US
};

void add_debug_options(CLI::App& app, DebugOptions& o);
// s with the options of o. Throws ConfigError (one line) on a bad delay or a rank >= world.
harness::RunSettings apply_debug_options(const DebugOptions& o, harness::RunSettings s, int world);
// T, or on the sending rank of --debug-link-delay T wrapped in a DelayedLinkTransport.
std::unique_ptr<Transport> with_debug_link_delay(std::unique_ptr<Transport> t,
                                                 const harness::RunSettings& s, int rank);

}  // namespace bb
