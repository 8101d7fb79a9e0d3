#include "cli/debug_options.hpp"

#include "common/error.hpp"
#include "runtime/debug_transport.hpp"

namespace bb {

void add_debug_delay_options(CLI::App& app, DebugDelayOptions& o) {
  app.add_option("--debug-delay-rank", o.debug_delay_rank,
                 "Testing: this rank's computes take --debug-delay-us longer")
      ->group("");  // hidden
  app.add_option("--debug-delay-us", o.debug_delay_us,
                 "Testing: microseconds added to every compute of --debug-delay-rank")
      ->group("");  // hidden
  app.add_option("--debug-link-delay", o.debug_link_delay,
                 "Testing: SRC:DST:US, every message from rank SRC to DST leaves US later")
      ->group("");  // hidden
}

harness::RunSettings apply_debug_delay_options(const DebugDelayOptions& o, harness::RunSettings s,
                                               int world) {
  if (o.debug_delay_rank < -1 || o.debug_delay_rank >= world || !(o.debug_delay_us >= 0))
    throw ConfigError("--debug-delay-rank must be a rank below " + std::to_string(world) +
                      " and --debug-delay-us >= 0");
  s.debug_delay_rank = o.debug_delay_rank;
  s.debug_delay_s = o.debug_delay_us * 1e-6;
  if (!o.debug_link_delay.empty()) {
    const LinkDelay d = parse_link_delay(o.debug_link_delay);
    if (d.src >= world || d.dst >= world)
      throw ConfigError("--debug-link-delay: ranks must be below the world size " +
                        std::to_string(world));
    s.debug_link_src = d.src;
    s.debug_link_dst = d.dst;
    s.debug_link_delay_s = d.seconds;
  }
  return s;
}

std::unique_ptr<Transport> with_debug_link_delay(std::unique_ptr<Transport> t,
                                                 const harness::RunSettings& s, int rank) {
  if (s.debug_link_src != rank || !t) return t;
  return std::make_unique<DelayedLinkTransport>(std::move(t), s.debug_link_dst,
                                                s.debug_link_delay_s);
}

}  // namespace bb
