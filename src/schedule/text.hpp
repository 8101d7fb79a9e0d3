// Text forms of schedules: the action language (`0F3`, `(0F4;3BW1)FB`, `1SEND_F3`), CSV with
// one row per rank (bubblebench's and PyTorch's), and a rank x step grid for humans.
#pragma once

#include <cstdint>
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

// CSV, in two dialects (docs/csv.md). bubblebench's own: header lines `# key=value` (name, P,
// M, v, placement=looped|v|dualpipe, lowered), then one row per rank: the rank's actions,
// comma-separated. Round-trips exactly.
void dump_csv(const Schedule& s, std::ostream& out);
std::string dump_csv(const Schedule& s);

// PyTorch's (torch.distributed.pipelining, PipelineScheduleMulti._dump_csv/_load_csv): no
// header, one row per rank, `I` the input gradient, `B` the full backward (bubblebench's BW),
// `W` the weight gradient, an overlapped pair `(0F1;1B0)OVERLAP_F_B`, and tokens without
// compute (UNSHARD, RESHARD, REDUCE_GRAD, SEND_F, RECV_F, SEND_B, RECV_B).
enum class CsvFormat : std::uint8_t { native, pytorch };
std::string_view csv_format_name(CsvFormat f);  // "bubblebench", "PyTorch"

struct CsvSchedule {
  Schedule schedule;
  CsvFormat format = CsvFormat::native;
  // One line when something in the file was left out (PyTorch's tokens without compute: a
  // lowered bubblebench schedule carries its own communication), else empty.
  std::string note;
};

// Reads either dialect, told apart by the content (docs/csv.md, "Which dialect"). A UTF-8
// byte-order mark is skipped; a control byte (other than tab) is refused. PyTorch's placement
// (looped or V) comes from its stage -> rank map. Throws ScheduleError (malformed content, one
// line, bytes escaped) or IoError (unreadable file; read_csv_file names the path in either,
// and in the note).
CsvSchedule read_csv(std::istream& in);
CsvSchedule read_csv_file(const std::string& path);
Schedule load_csv(std::istream& in);
Schedule load_csv_file(const std::string& path);

// The compute actions in PyTorch's dialect, exactly as its _dump_csv writes them (`\r\n` line
// ends): what PyTorch's _load_csv accepts. SEND/RECV of a lowered schedule are left out
// (PyTorch adds its own). Throws ConfigError for a placement PyTorch cannot express (DualPipe's
// two model copies, where a stage sees half of the micro-batches; any custom placement).
void dump_pytorch_csv(const Schedule& s, std::ostream& out);
std::string dump_pytorch_csv(const Schedule& s);

// Rank x step grid. When mark_rank >= 0, the grid shows a window of steps around
// mark_step and marks that action as `>>tok<<`.
std::string format_grid(const Schedule& s, int mark_rank = -1, std::size_t mark_step = 0,
                        std::size_t max_steps = 40);

// "looped", "v" or "dualpipe": the placement the schedule uses (or "custom").
std::string placement_name(const Schedule& s);

}  // namespace bb
