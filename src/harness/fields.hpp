// THE field table of a run: one entry per field (name, unit, one-line meaning, type, where it
// goes, getter). The JSON record (`run --format json`), the HDF5 run attributes and ranks
// table, the text table's columns, docs/run-record.md and the Python loader's field list
// (analysis/bbanalysis/run_fields.json) are all produced from it. Adding a field to the run
// record: a member in RunSummary (or RankResult) and one entry in kFields (fields.cpp).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "harness/summary.hpp"
#include "results/run_record.hpp"

namespace bb::harness {

// A getter's answer. Omit: the field is not written at all; Null: written as JSON null, as
// NaN (real) or "" (text) in HDF5.
struct Omit {};
struct Null {};
using FieldValue = std::variant<Omit, Null, bool, std::int64_t, std::uint64_t, double, std::string,
                                std::vector<double>>;

enum class FieldType { kInt, kReal, kText, kBool, kReals, kU32, kI32, kU64 };

// Where a field goes (bits).
enum Sink : unsigned {
  kJson = 1,           // the JSON record
  kAttr = 2,           // an attribute of the run's HDF5 group
  kJsonOmitsNull = 4,  // JSON leaves the key out where the value is Null
  kSummary = 8,        // the loader shows it first (in table order)
  kJsonArray = 16,     // per rank: one JSON array over the ranks
  kRankColumn = 32,    // per rank: a column of the HDF5 ranks table
  kDataset = 64,       // written as its own HDF5 dataset (documentation only)
  kWriterOwned = 128,  // written by the results file, not from the summary (documentation)
  kJsonGroup = 256,    // JSON: inside an object named by the part of the name before its first
                       // '_', under the rest (attribution_jitter: "attribution": {"jitter"})
};

// When a table column is shown.
// kGpu: on a GPU backend only (MFU: a CPU has no peak in the table).
enum class Show { kNever, kAlways, kIfVaried, kBarrier, kSyncNone, kGpu };

struct Column {
  std::string_view header;  // "" = no column
  int order = 0;            // left to right
  Show show = Show::kNever;
  double scale = 1;  // reals: shown times this
};

struct Field {
  std::string_view name, unit, meaning;
  FieldType type;
  unsigned sinks;
  FieldValue (*run)(const RunSummary&) = nullptr;                     // a run's field
  FieldValue (*rank)(const RankResult&, std::size_t rank) = nullptr;  // a rank's field
  Column column{};
};

std::span<const Field> fields();

// The JSON record of a run.
nlohmann::json to_json(const RunSummary& s);
// The HDF5 run attributes (not `status`, which the results file sets).
Attrs to_attrs(const RunSummary& s);
// The HDF5 ranks table, one row per rank.
std::vector<RankRecord> to_rank_records(const RunSummary& s);
// The whole RunRecord but its events.
RunRecord to_record(const RunSummary& s);
// Back from a results file: the JSON record of the fields both sides hold (the round trip).
nlohmann::json json_of_record(const RunRecord& r);

// The text table of RUNS: headers and one row of cells per run.
struct Table {
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;
};
Table to_table(const std::vector<RunSummary>& runs);
// The same column by column, for a table printed row by row: the columns shown with the sync
// mode (steady: --sync none) and whether the stage model (hidden, layers, mb_size) varies in
// the sweep; their headers; one run's row (EXACT: every digit, for CSV).
std::vector<const Field*> table_columns(bool steady, bool model_varies, bool gpu = false);
std::vector<std::string> table_headers(const std::vector<const Field*>& cols);
std::vector<std::string> table_row(const std::vector<const Field*>& cols, const RunSummary& s,
                                   bool exact);

// docs/run-record.md and analysis/bbanalysis/run_fields.json, generated from the table.
std::string fields_markdown();
std::string fields_json();

}  // namespace bb::harness
