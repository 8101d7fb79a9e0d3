// `run`'s hidden testing options for the attribution (sim/attribution.hpp): a slow rank
// (--debug-delay-rank R --debug-delay-us X: X µs added inside each of R's computes) and a slow
// link (--debug-link-delay SRC:DST:US: runtime/debug_transport.hpp). Not in --help.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "harness/settings.hpp"
#include "runtime/transport.hpp"

namespace bb {

struct DebugDelayOptions {
  int debug_delay_rank = -1;
  double debug_delay_us = 0;
  std::string debug_link_delay;  // SRC:DST:US
};

void add_debug_delay_options(CLI::App& app, DebugDelayOptions& o);
// s with the delays of o. Throws ConfigError (one line) on a bad value or a rank >= world.
harness::RunSettings apply_debug_delay_options(const DebugDelayOptions& o, harness::RunSettings s,
                                               int world);
// T, or on the sending rank of --debug-link-delay T wrapped in a DelayedLinkTransport.
std::unique_ptr<Transport> with_debug_link_delay(std::unique_ptr<Transport> t,
                                                 const harness::RunSettings& s, int rank);

}  // namespace bb
