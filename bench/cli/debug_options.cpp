#include "cli/debug_options.hpp"

#include "common/error.hpp"
#include "runtime/debug_transport.hpp"

namespace bb {

void add_debug_options(CLI::App& app, DebugOptions& o) {
  // Hidden from --help (group ""), hence no descriptions: debug_options.hpp has them.
  for (CLI::Option* opt : {app.add_flag("--debug-records", o.debug_records),
                           app.add_option("--debug-perturb-grads", o.perturb_grads_rank),
                           app.add_option("--debug-drop-sends", o.drop_sends_rank),
                           app.add_option("--debug-stall-setup", o.stall_setup_rank),
                           app.add_option("--debug-delay-rank", o.debug_delay_rank),
                           app.add_option("--debug-delay-us", o.debug_delay_us),
                           app.add_option("--debug-link-delay", o.debug_link_delay)})
    opt->group("");
}

harness::RunSettings apply_debug_options(const DebugOptions& o, harness::RunSettings s, int world) {
  s.drop_sends_rank = o.drop_sends_rank;
  s.perturb_grads_rank = o.perturb_grads_rank;
  s.debug_records = o.debug_records;
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
