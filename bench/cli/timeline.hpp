// `sim --timeline`: the simulated step as a Chrome trace (results/chrome_trace.hpp,
// docs/traces.md). One simulated time unit is one µs of the trace.
#pragma once

#include <string>
#include <vector>

#include "schedule/schedule.hpp"
#include "sim/memory.hpp"
#include "sim/sim.hpp"

namespace bb {

// Compute slices (an FB pair as one), the waits for inputs, and each message between two
// ranks as a send on its sender and a receive on its receiver, both from the moment it leaves
// to the moment it arrives (message_time), joined by a flow; MEMORY (rank_memory with samples)
// as each rank's counter track `memory`. R: simulated with record_events.
void write_timeline(const std::string& path, const Schedule& s, const SimResult& r,
                    const SimConfig& cfg, const std::vector<RankMemory>& memory);

// The file of one configuration: BASE itself, or with several configurations
// BASE's stem + "_<schedule>_P<P>_M<M>_v<v>" + BASE's extension.
std::string timeline_path(const std::string& base, const std::string& schedule, const Schedule& s,
                          bool many);
// The names timeline_path gives with several configurations, for the note that says so.
std::string timeline_pattern(const std::string& base);

}  // namespace bb
