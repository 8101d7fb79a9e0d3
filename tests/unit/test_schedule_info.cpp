// The schedule table (schedule/schedule_info.hpp): every schedule's facts agree with what its
// generator builds, refusals carry their reasons, --schedule lists expand, and the closed
// forms reached through the table give the values the name-compared forms gave.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "cli/list.hpp"
#include "cli/schedule_table.hpp"
#include "common/error.hpp"
#include "generated_files.hpp"
#include "model/closed_form.hpp"
#include "schedule/edges.hpp"
#include "schedule/generators.hpp"
#include "schedule/lower.hpp"
#include "schedule/message.hpp"
#include "schedule/schedule_info.hpp"
#include "schedule/text.hpp"
#include "schedule_cases.hpp"

namespace bb {
namespace {

std::string thrown(const std::string& name, int P, int M, int v) {
  try {
    generate(name, {P, M, v});
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ScheduleInfo, TableInIdOrderWithUniqueNames) {
  const auto infos = schedule_infos();
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < infos.size(); ++i) {
    EXPECT_EQ(&schedule_info(static_cast<ScheduleId>(i)), &infos[i]);
    EXPECT_EQ(find_schedule(infos[i].name), &infos[i]);
    EXPECT_TRUE(names.insert(infos[i].name).second) << infos[i].name;
    EXPECT_NE(infos[i].build, nullptr);
    EXPECT_FALSE(infos[i].accepts.empty());
    // A published form has its text and its numbers (a schedule may have none).
    EXPECT_EQ(infos[i].form.bubble != nullptr, !infos[i].form.formula.empty()) << infos[i].name;
  }
  // The schedules of this issue first, in the order of design §5.1 (later ones after them).
  const std::vector<std::string> expected = {"naive",     "gpipe",  "1f1b", "interleaved",
                                             "zb-h1",     "zb-h2",  "zb-v", "dualpipe",
                                             "dualpipev", "zb-auto"};
  ASSERT_GE(schedule_names().size(), expected.size());
  EXPECT_EQ(std::vector<std::string>(schedule_names().begin(),
                                     schedule_names().begin() + expected.size()),
            expected);
  EXPECT_EQ(find_schedule("csv:x.csv"), nullptr);
  EXPECT_EQ(find_schedule("1F1B"), nullptr);
}

// Help texts, docs/schedules.md's table and the analysis package's list of schedules come from
// the table (BB_REGENERATE=1 rewrites the two files).
TEST(ScheduleInfo, GeneratedFilesAreUpToDate) {
  test::expect_generated("analysis/bbanalysis/schedules.json", schedules_json());
  test::expect_generated_section(
      "docs/schedules.md",
      "<!-- generated: bubblebench list --format markdown (tests/unit/test_schedule_info.cpp) -->",
      "<!-- end of the generated table -->", schedules_markdown());
  for (const ScheduleInfo& i : schedule_infos()) {
    EXPECT_NE(schedule_option_help(true).find(std::string(" ") + std::string(i.name) + " "),
              std::string::npos)
        << i.name;
    EXPECT_NE(schedules_text().find(std::string(i.name) + " "), std::string::npos) << i.name;
  }
  // The help's lists of schedules that take v and that order by costs: exactly those rows.
  std::string takes_v, by_costs;
  for (const ScheduleInfo& i : schedule_infos()) {
    if (i.takes_v()) takes_v += (takes_v.empty() ? "" : ", ") + std::string(i.name);
    if (i.orders_by_costs) by_costs += (by_costs.empty() ? "" : ", ") + std::string(i.name);
  }
  EXPECT_EQ(schedules_taking_v(), takes_v);
  EXPECT_EQ(schedules_ordered_by_costs(), by_costs);
  EXPECT_NE(takes_v.find("interleaved"), std::string::npos);
  EXPECT_NE(by_costs.find("zb-auto"), std::string::npos);
}

TEST(ScheduleInfo, Facts) {
  using enum ScheduleId;
  struct Want {
    ScheduleId id;
    Placement placement;
    int fixed_v;
    bool splits;
  };
  for (const Want& w :
       {Want{naive, Placement::looped, 1, false}, Want{gpipe, Placement::looped, 1, false},
        Want{one_f_one_b, Placement::looped, 1, false},
        Want{interleaved, Placement::looped, 0, false}, Want{zb_h1, Placement::looped, 1, true},
        Want{zb_h2, Placement::looped, 1, true}, Want{zb_v, Placement::v, 2, true},
        Want{dualpipe, Placement::dualpipe, 2, true}, Want{dualpipev, Placement::v, 2, true},
        Want{zb_auto, Placement::looped, 1, true}}) {
    const ScheduleInfo& i = schedule_info(w.id);
    EXPECT_EQ(i.placement, w.placement) << i.name;
    EXPECT_EQ(i.fixed_v, w.fixed_v) << i.name;
    EXPECT_EQ(i.takes_v(), w.fixed_v == 0) << i.name;
    EXPECT_EQ(schedule_takes_v(std::string(i.name)), i.takes_v()) << i.name;
    EXPECT_EQ(i.splits_backward, w.splits) << i.name;
  }
  EXPECT_FALSE(schedule_takes_v("bogus"));
}

// What each generator builds matches its row: name, v, placement, B/W split, the estimate.
TEST(ScheduleInfo, GeneratorsBuildWhatTheTableSays) {
  for (const ScheduleInfo& i : schedule_infos())
    for (int P : {2, 4})
      for (int v : {1, 2, 3}) {
        const ScheduleParams p{P, 4 * P, v};
        if (!refusal(i, p).empty()) continue;
        const Schedule s = generate(i, p);
        const std::string what =
            std::string(i.name) + " P=" + std::to_string(P) + " v=" + std::to_string(v);
        EXPECT_EQ(s.name, i.name) << what;
        EXPECT_EQ(s.v, chunks_per_rank(i, v)) << what;
        EXPECT_EQ(placement_of(s), i.placement) << what;
        EXPECT_EQ(placement_name(s), placement_name(i.placement)) << what;
        bool has_w = false, has_bw = false;
        for (const auto& r : s.ranks)
          for (const Action& a : r) {
            has_w = has_w || a.op == Op::W;
            has_bw = has_bw || a.op == Op::BW;
          }
        EXPECT_EQ(has_w, i.splits_backward) << what;
        if (!i.splits_backward) {
          EXPECT_TRUE(has_bw) << what;
        }
        // An upper bound, exact where every micro-batch visits every chunk with separate
        // actions (DualPipe's micro-batches visit half the chunks; both DualPipes merge some
        // B and W into BW).
        const double est = estimated_actions(i, P, 4 * P, v);
        const double n = static_cast<double>(s.compute_size());
        if (i.name == "dualpipe" || i.name == "dualpipev") {
          EXPECT_GE(est, n) << what;
        } else {
          EXPECT_DOUBLE_EQ(est, n) << what;
        }
      }
}

TEST(ScheduleInfo, PlacementNames) {
  for (Placement p : {Placement::looped, Placement::v, Placement::dualpipe})
    EXPECT_EQ(find_placement(placement_name(p)), p);
  EXPECT_EQ(find_placement("custom"), std::nullopt);
  Schedule s = generate("1f1b", {2, 2, 1});
  s.chunk_rank = {1, 0};
  EXPECT_EQ(placement_of(s), std::nullopt);
}

// Every refusal names the schedule and why; the generator (by name or directly) throws the
// same line, and accepted configurations build.
TEST(ScheduleInfo, RefusalsWithReasons) {
  struct Case {
    const char* name;
    int P, M, v;
    const char* why;  // empty: accepted
  };
  const Case cases[] = {
      {"naive", 3, 5, 1, ""},
      {"1f1b", 0, 4, 1, "1f1b: P=0, M=4, v=1 is out of range"},
      {"gpipe", 2, 0, 1, "gpipe: P=2, M=0, v=1 is out of range"},
      {"zb-h1", 2, 2, 0, "zb-h1: P=2, M=2, v=0 is out of range"},
      {"interleaved", 4, 8, 1, "interleaved: needs v >= 2 chunks per rank (got v=1; v=1 is 1f1b)"},
      {"interleaved", 1, 4, 2, "interleaved: needs P >= 2 (got P=1)"},
      {"interleaved", 4, 6, 2, ""},
      {"interleaved", 4, 2, 2, ""},
      {"interleaved", 4, 9, 2,
       "interleaved: M must split into max(1, M/P) equal rounds, as in PyTorch (got M=9, P=4)"},
      {"interleaved", 2, 2, 40000, "interleaved: too many chunks"},
      {"interleaved", 4, 8, 2, ""},
      {"zb-v", 1, 1, 1, ""},
      {"zb-v", 40000, 1, 1, "zb-v: P must be in [1, 32767] (got P=40000)"},
      {"dualpipe", 3, 6, 1, "dualpipe: P must be even and >= 2 (got P=3)"},
      {"dualpipe", 4, 7, 1, "dualpipe: M must be even and >= 2P (M/2 from each end; got M=7, P=4)"},
      {"dualpipe", 4, 6, 1, "dualpipe: M must be even and >= 2P (M/2 from each end; got M=6, P=4)"},
      {"dualpipe", 2, 4, 1, ""},
      {"dualpipev", 1, 4, 1, "dualpipev: P must be in [2, 32767] (got P=1)"},
      {"dualpipev", 3, 5, 1, "dualpipev: M must be >= 2P (got M=5, P=3)"},
      {"dualpipev", 3, 6, 1, ""},
  };
  for (const Case& c : cases) {
    const ScheduleInfo& i = schedule_info_or_throw(c.name);
    const ScheduleParams p{c.P, c.M, c.v};
    const std::string why = refusal(i, p);
    const std::string what = std::string(c.name) + " P=" + std::to_string(c.P) +
                             " M=" + std::to_string(c.M) + " v=" + std::to_string(c.v);
    if (std::string(c.why).empty()) {
      EXPECT_EQ(why, "") << what;
      EXPECT_NO_THROW(generate(i, p)) << what;
      EXPECT_NO_THROW(require_accepted(i, p)) << what;
    } else {
      EXPECT_EQ(why.rfind(c.why, 0), 0u) << what << ": " << why;
      EXPECT_EQ(thrown(c.name, c.P, c.M, c.v), why) << what;
      EXPECT_THROW(generate(i, p), ConfigError) << what;
      EXPECT_THROW(require_accepted(i, p), ConfigError) << what;
    }
  }
}

TEST(ScheduleInfo, UnknownNameListsTheKnownOnes) {
  EXPECT_EQ(find_schedule("bogus"), nullptr);
  try {
    schedule_info_or_throw("bogus");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "unknown schedule 'bogus' (known: " + joined_schedule_names() + ", csv:FILE)");
    EXPECT_EQ(std::string(e.what()).rfind("unknown schedule 'bogus' (known: naive gpipe 1f1b "
                                          "interleaved zb-h1 zb-h2 zb-v dualpipe dualpipev zb-auto",
                                          0),
              0u);
  }
  EXPECT_EQ(thrown("bogus", 2, 2, 1).rfind("unknown schedule 'bogus'", 0), 0u);
}

TEST(ScheduleInfo, SweepNames) {
  EXPECT_EQ(sweep_names("all"), schedule_names());
  EXPECT_EQ(sweep_names("1f1b"), std::vector<std::string>{"1f1b"});
  EXPECT_EQ(sweep_names("zb-v,1f1b,csv:a.csv"),
            (std::vector<std::string>{"zb-v", "1f1b", "csv:a.csv"}));
  // `all` stands for every schedule only on its own; names are not checked here.
  EXPECT_EQ(sweep_names("all,1f1b"), (std::vector<std::string>{"all", "1f1b"}));
  EXPECT_EQ(sweep_names("bogus"), std::vector<std::string>{"bogus"});
  for (const char* bad : {"", ",", "1f1b,", ",1f1b", "1f1b,,zb-v"})
    EXPECT_THROW(sweep_names(bad), ConfigError) << bad;
  try {
    sweep_names("1f1b,", "--bb_schedules");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "--bb_schedules: '1f1b,' has an empty item");
  }
  // The sweep counts configurations from the same expansion: v only where it is taken.
  std::size_t takes_v = 0;
  for (const ScheduleInfo& i : schedule_infos()) takes_v += i.takes_v() ? 1 : 0;
  EXPECT_EQ(sweep_combinations("all", {4, 8}, {1, 2, 4}),
            2 * (schedule_infos().size() - takes_v) + 2 * 3 * takes_v);
  EXPECT_EQ(sweep_combinations("1f1b,interleaved", {4, 8}, {1, 2, 4}), 2u + 2u * 3);
}

struct Golden {
  const char* name;
  int P, M, v;
  double f, b, w, fb;
  bool applies;
  const char* reason;
  double single_bt, steady_bt;
  std::vector<double> peaks;
};

// Values of the forms as they were written before the table (name-compared if-chains).
TEST(ScheduleInfo, ClosedFormsThroughTheTableKeepTheirValues) {
  // One case a row.
  // clang-format off
  const Golden golden[] = {
      {"naive", 4, 8, 2, 1, 1, 1, -1, true, "", 72, 72, {1, 1, 1, 1}},
      {"gpipe", 4, 8, 2, 1, 1, 1, -1, true, "", 9, 9, {8, 8, 8, 8}},
      {"1f1b", 4, 8, 2, 1, 1, 1, -1, true, "", 9, 9, {4, 3, 2, 1}},
      {"interleaved", 4, 8, 2, 1, 1, 1, -1, true, "", 4.5, 4.5, {5.5, 4.5, 3.5, 2.5}},
      {"zb-h1", 4, 8, 2, 1, 1, 1, -1, true, "", 3, 3, {4, 4, 4, 4}},
      {"zb-h2", 4, 8, 2, 1, 1, 1, -1, true, "", 3, 0, {7, 7, 7, 7}},
      {"zb-v", 4, 8, 2, 1, 1, 1, -1, true, "", 1.5, 0, {4, 4, 4, 4}},
      {"dualpipe", 4, 8, 2, 1, 1, 1, -1, true, "", 2, 2, {5, 5, 5, 5}},
      {"dualpipev", 4, 8, 2, 1, 1, 1, -1, true, "", 3, 3, {4.5, 4.5, 4.5, 4.5}},
      {"naive", 4, 9, 2, 1, 2, 1, -1, true, "", 108, 108, {1, 1, 1, 1}},
      {"1f1b", 4, 9, 2, 1, 2, 1, -1, true, "", 12, 12, {4, 3, 2, 1}},
      {"interleaved", 4, 9, 2, 1, 2, 1, -1, false,
       "interleaved's closed form needs P >= 2 and M in max(1, M/P) equal rounds", 0, 0, {5.5, 4.5, 3.5, 2.5}},
      {"interleaved", 4, 8, 1, 1, 1, 1, -1, false, "interleaved needs v >= 2", 0, 0, {7, 5, 3, 1}},
      {"zb-h1", 4, 3, 1, 1, 1, 1, -1, false,
       "zb-h1's closed form needs M >= P", 0, 0, {3, 3, 3, 3}},
      {"zb-h1", 4, 9, 1, 1, 2, 1, -1, false,
       "zb-h1's closed form needs F = B = W", 0, 0, {4, 4, 4, 4}},
      {"zb-h2", 4, 6, 1, 1, 1, 1, -1, false,
       "zb-h2's closed form needs M >= 2P-1", 0, 0, {6, 6, 6, 6}},
      {"zb-v", 4, 6, 2, 1, 1, 1, -1, false, "zb-v's closed form needs M >= 2P-1", 0, 0, {}},
      {"dualpipe", 4, 6, 2, 1, 1, 1, -1, false,
       "dualpipe's closed form needs M >= 2P", 0, 0, {5, 5, 5, 5}},
      {"dualpipev", 4, 8, 2, 1, 1, 1, 2.5, false,
       "dualpipev's closed form is exact only without overlap gain (FB = F+B+W); with a gain the "
       "ranks' work differs and the form gives T minus the least-busy rank's work",
       0, 0, {4.5, 4.5, 4.5, 4.5}},
      {"bogus", 4, 8, 2, 1, 1, 1, -1, false, "no closed form for schedule 'bogus'", 0, 0, {}},
  };
  // clang-format on
  for (const Golden& g : golden) {
    const ModelResult r = closed_form({g.name, g.P, g.M, g.v, g.f, g.b, g.w, g.fb});
    const std::string what = test::case_name(g.name, g.P, g.M, g.v);
    EXPECT_EQ(r.applies, g.applies) << what;
    EXPECT_EQ(r.reason, g.reason) << what;
    EXPECT_DOUBLE_EQ(r.t_ideal, g.M * (g.f + g.b + g.w)) << what;
    if (g.applies) {
      EXPECT_DOUBLE_EQ(r.single.bubble_time, g.single_bt) << what;
      EXPECT_DOUBLE_EQ(r.steady.bubble_time, g.steady_bt) << what;
      EXPECT_DOUBLE_EQ(r.single.span, r.t_ideal + g.single_bt) << what;
    }
    EXPECT_EQ(r.peak_activations, g.peaks) << what;
  }
  // The conditions every form shares still apply after the table's form.
  ModelInput in{"1f1b", 4, 8, 1, 1, 1, 1, -1};
  in.uniform_stages = false;
  EXPECT_FALSE(closed_form(in).applies);
  in.uniform_stages = true;
  in.message_time = 0.5;
  EXPECT_FALSE(closed_form(in).applies);
}

// The edge rule (schedule/edges.hpp) on every lowered schedule: each SEND/RECV carries a
// message a compute action of its rank produces/consumes, its peer is the rank at the other
// end (Schedule::prev_rank/next_rank), and compute actions' messages are named alike.
TEST(Edges, CommMessagesMatchTheComputeActions) {
  for (const ScheduleInfo& i : schedule_infos())
    for (int P : {2, 3, 4})
      for (int v : {1, 2}) {
        const ScheduleParams p{P, 4 * P, v};
        if (!refusal(i, p).empty()) continue;
        const Schedule s = lower(generate(i, p));
        const std::string what = std::string(i.name) + " P=" + std::to_string(P);
        for (int r = 0; r < s.P; ++r) {
          std::set<std::tuple<int, std::uint32_t, std::uint32_t>> in, out;  // dir, chunk, mb
          for (const Action& a : s.ranks[r]) {
            if (!is_compute(a.op)) continue;
            const Route& rt = s.routes[a.mb];
            const MessageName mi = message_in(a, rt), mo = message_out(a, rt);
            if (!mi.none()) {
              EXPECT_EQ(consumer_chunk(mi), a.chunk) << what;
              in.insert({mi.dir, mi.chunk, a.mb});
            }
            if (!mo.none()) {
              EXPECT_EQ(producer_chunk(mo), a.chunk) << what;
              out.insert({mo.dir, mo.chunk, a.mb});
            }
            if (a.op == Op::F) {
              EXPECT_EQ(mi.none(), route_first(rt, a.chunk)) << what;
              EXPECT_EQ(mo.none(), route_last(rt, a.chunk)) << what;
            }
          }
          for (const Action& a : s.ranks[r]) {
            if (!is_comm(a.op)) continue;
            const MessageName m = comm_message(a, s.routes[a.mb]);
            ASSERT_FALSE(m.none()) << what << " " << to_string(a);
            const int c = a.chunk;
            const Route& rt = s.routes[a.mb];
            const bool to_prev = a.op == Op::RECV_F || a.op == Op::SEND_B;
            EXPECT_EQ(toward_next(a.op), !to_prev) << to_string(a);
            EXPECT_EQ(peer_rank(s, a), to_prev ? prev_rank(s, rt, c) : next_rank(s, rt, c))
                << what << " " << to_string(a);
            EXPECT_NE(peer_rank(s, a), r) << what << " " << to_string(a);
            EXPECT_EQ(prev_rank(s, rt, c), c > rt.first ? s.chunk_rank[c - 1] : -1) << what;
            EXPECT_EQ(next_rank(s, rt, c), c < rt.last ? s.chunk_rank[c + 1] : -1) << what;
            EXPECT_EQ(is_send(a.op) ? send_action(m, a.mb) : recv_action(m, a.mb), a) << what;
            EXPECT_EQ(static_cast<std::uint32_t>(message_producer(a)), producer_chunk(m)) << what;
            auto& side = is_send(a.op) ? out : in;
            EXPECT_EQ(side.count({m.dir, m.chunk, a.mb}), 1u) << what << " " << to_string(a);
            EXPECT_EQ(is_send(a.op) ? producer_rank(s, m) : consumer_rank(s, m), r) << what;
          }
        }
      }
  // No message at a route's ends.
  const Schedule s = generate("1f1b", {2, 2, 1});
  const Route& rt = s.routes[0];
  EXPECT_TRUE(comm_message(make_action(Op::RECV_F, 0, 0), rt).none());
  EXPECT_TRUE(comm_message(make_action(Op::SEND_B, 0, 0), rt).none());
  EXPECT_TRUE(comm_message(make_action(Op::SEND_F, 1, 0), rt).none());
  EXPECT_TRUE(comm_message(make_action(Op::RECV_B, 1, 0), rt).none());
  EXPECT_EQ(peer_rank(s, make_action(Op::RECV_F, 0, 0)), -1);
  EXPECT_TRUE(comm_message(make_action(Op::F, 1, 0), rt).none());
}

}  // namespace
}  // namespace bb
