#include "cli/timeline.hpp"

#include <algorithm>
#include <vector>

#include "results/chrome_trace.hpp"
#include "schedule/edges.hpp"
#include "schedule/message.hpp"
#include "schedule/text.hpp"

namespace bb {
namespace {

// A message between two ranks: its receive action and when it leaves and arrives.
struct Message {
  int dst;
  Action recv;
  double leaves, arrives;
};

TraceSlice slice(const Schedule& s, int rank, TraceLane lane, const Action& a, std::string name,
                 std::string kind, double start, double end) {
  TraceSlice t{.pid = rank, .lane = lane, .name = std::move(name), .kind = std::move(kind)};
  t.start_us = start;
  t.end_us = end;
  t.chunk = static_cast<int>(a.chunk);
  t.mb = static_cast<int>(a.mb);
  t.stage = s.chunk_stage.empty() ? -1 : s.chunk_stage[a.chunk];
  return t;
}

}  // namespace

void write_timeline(const std::string& path, const Schedule& s, const SimResult& r,
                    const SimConfig& cfg, const std::vector<RankMemory>& memory) {
  ChromeTraceWriter w(path, s.P, s.name + " P=" + std::to_string(s.P) + " M=" + std::to_string(s.M),
                      "1 simulated time unit");
  const int C = s.num_chunks();
  std::vector<Message> receives;
  // Events come by rank, in list order (so in time order on each rank): compute, waits and
  // sends of one rank in order of their start; receives are sorted by their rank afterwards.
  for (const SimEvent& e : r.events) {
    const auto& acts = s.ranks[e.rank];
    const Action& a = acts[e.index];
    const std::string name = format_action_at(acts, e.index);
    w.add(slice(s, e.rank, TraceLane::compute, a, name,
                e.n == 2 ? "FB" : std::string(op_name(a.op)), e.start, e.end));
    if (e.start > e.ready)
      w.add(slice(s, e.rank, TraceLane::wait, a, "wait " + name, "wait", e.ready, e.start));
    for (int k = 0; k < e.n; ++k) {
      // The SEND an action's output needs (F: its output to the next chunk; B, BW: its input
      // gradient to the previous chunk), if the consumer is on another rank.
      const Action& b = acts[e.index + k];
      const RemoteMessage out = remote_out(s, b, s.routes[b.mb]);
      if (out.none()) continue;
      const int dst = out.peer;
      const Action send = send_action(out.msg, b.mb);
      const double arrives = e.end + message_time(cfg, e.rank, dst);
      TraceSlice t = slice(s, e.rank, TraceLane::send, send, to_string(send),
                           std::string(op_name(send.op)), e.end, arrives);
      t.bytes = cfg.msg_bytes;
      t.flow = message_flow_id(message_producer(send), static_cast<int>(send.mb),
                               is_forward_comm(send.op), C);
      w.add(t);
      receives.push_back({dst, recv_action(out.msg, b.mb), e.end, arrives});
    }
  }
  std::stable_sort(receives.begin(), receives.end(), [](const Message& a, const Message& b) {
    return a.dst != b.dst ? a.dst < b.dst : a.leaves < b.leaves;
  });
  for (const Message& m : receives) {
    TraceSlice t = slice(s, m.dst, TraceLane::recv, m.recv, to_string(m.recv),
                         std::string(op_name(m.recv.op)), m.leaves, m.arrives);
    t.bytes = cfg.msg_bytes;
    t.flow = message_flow_id(message_producer(m.recv), static_cast<int>(m.recv.mb),
                             is_forward_comm(m.recv.op), C);
    w.add(t);
  }
  for (const TraceCounter& c : memory_counters(memory, 1.0)) w.add_counter(c, "memory");
  w.close();
}

namespace {
// BASE as stem and extension ("t.json": "t", ".json"; "dir.d/t": "dir.d/t", "").
std::pair<std::string, std::string> split_extension(const std::string& base) {
  const auto dot = base.rfind('.');
  if (dot != std::string::npos && dot > base.rfind('/') + 1)
    return {base.substr(0, dot), base.substr(dot)};
  return {base, ""};
}
}  // namespace

std::string timeline_path(const std::string& base, const std::string& schedule, const Schedule& s,
                          bool many) {
  if (!many) return base;
  std::string name = schedule;
  for (char& ch : name)
    if (ch == '/' || ch == ':') ch = '_';
  const auto [stem, ext] = split_extension(base);
  return stem + "_" + name + "_P" + std::to_string(s.P) + "_M" + std::to_string(s.M) + "_v" +
         std::to_string(s.v) + ext;
}

std::string timeline_pattern(const std::string& base) {
  const auto [stem, ext] = split_extension(base);
  return stem + "_<schedule>_P<P>_M<M>_v<v>" + ext;
}

}  // namespace bb
