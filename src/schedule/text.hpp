// Text forms of schedules: the action language (`0F3`, `(0F4;3BW1)FB`, `1SEND_F3`), CSV with
// one row per rank, and a rank x step grid for humans.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "schedule/schedule.hpp"

namespace bb {

// Parses one action token (`0F3`, `12BW0`, `2RECV_B0`). Throws ScheduleError naming the token.
Action parse_action(std::string_view token);
// Comma- or whitespace-separated list; FB pairs as `(cFm;c'Bm')FB` or `(cFm;c'BWm')FB`.
std::vector<Action> parse_actions(std::string_view text);
// Inverse of parse_actions (comma-separated).
std::string format_actions(const std::vector<Action>& actions);
// The token of the action at index i, with an FB pair printed as one token. `consumed` is
// set to the number of actions the token covers (1 or 2).
std::string format_action_at(const std::vector<Action>& actions, std::size_t i,
                             std::size_t* consumed = nullptr);

// CSV: header lines `# key=value` (name, P, M, v, placement=looped|v|dualpipe, lowered),
// then one row per rank: the rank's actions, comma-separated. Round-trips exactly.
void dump_csv(const Schedule& s, std::ostream& out);
std::string dump_csv(const Schedule& s);
// Throws ScheduleError (malformed content) or IoError (unreadable file).
Schedule load_csv(std::istream& in);
Schedule load_csv_file(const std::string& path);

// Rank x step grid. When mark_rank >= 0, the grid shows a window of steps around
// mark_step and marks that action as `>>tok<<`.
std::string format_grid(const Schedule& s, int mark_rank = -1, std::size_t mark_step = 0,
                        std::size_t max_steps = 40);

// "looped", "v" or "dualpipe": the placement the schedule uses (or "custom").
std::string placement_name(const Schedule& s);

}  // namespace bb
