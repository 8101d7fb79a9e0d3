#include "results/links_io.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/error.hpp"
#include "results/hdf5_file.hpp"
#include "results/hdf5_io.hpp"
#include "results/links_h5.hpp"

namespace bb {
namespace {

using json = nlohmann::json;

using h5::ColType;
using h5::Column;
using h5::Handle;

// The three tables' columns (values added by the writer, read back by read_links).
std::vector<Column> sample_columns() {
  return {{"src", ColType::kI32, "", "the sending rank"},
          {"dst", ColType::kI32, "", "the receiving rank"},
          {"bytes", ColType::kF64, "bytes", "the message size"},
          {"time_s", ColType::kF64, "s", "the median one-way time of the size"}};
}
std::vector<Column> fit_columns() {
  return {
      {"src", ColType::kI32, "", "the sending rank"},
      {"dst", ColType::kI32, "", "the receiving rank"},
      {"alpha_s", ColType::kF64, "s", "the single line's latency"},
      {"beta_bytes_per_s", ColType::kF64, "bytes/s", "the single line's bandwidth (0: infinite)"},
      {"max_rel_error", ColType::kF64, "", "the single line's largest relative error"},
      {"median_rel_error", ColType::kF64, "", "the single line's median relative error"},
      {"regimes_max_rel_error", ColType::kF64, "", "the piecewise fit's largest relative error"},
      {"regimes_median_rel_error", ColType::kF64, "", "the piecewise fit's median relative error"},
      {"regimes", ColType::kI32, "", "rows of the pair in the regimes table"},
      {"wake_s", ColType::kF64, "s",
       "what a receiver that has waited long adds to a hop (0: not measured)"}};
}
std::vector<Column> regime_columns() {
  return {{"src", ColType::kI32, "", "the sending rank"},
          {"dst", ColType::kI32, "", "the receiving rank"},
          {"lo_bytes", ColType::kF64, "bytes", "the smallest size of the regime"},
          {"hi_bytes", ColType::kF64, "bytes", "the largest size of the regime"},
          {"alpha_s", ColType::kF64, "s", "the regime's latency"},
          {"beta_bytes_per_s", ColType::kF64, "bytes/s", "the regime's bandwidth (0: infinite)"}};
}

// Appends a row of numbers to COLS (integer columns take the value rounded).
void add_row(std::vector<Column>& cols, std::initializer_list<double> row) {
  std::size_t i = 0;
  for (const double x : row) {
    Column& c = cols[i++];
    if (c.type == ColType::kF64)
      c.reals.push_back(x);
    else
      c.ints.push_back(static_cast<std::int64_t>(x));
  }
}

// The columns of table NAME under GROUP (of one length). Columns from index `required` on
// may be missing (files written before they existed): they read as zeros.
std::vector<Column> read_table(hid_t group, const char* name, std::vector<Column> cols,
                               const std::string& path, std::size_t required = SIZE_MAX) {
  if (H5Lexists(group, name, H5P_DEFAULT) <= 0)
    throw IoError(path + ": /links has no '" + name + "' table");
  Handle ds(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) throw IoError(path + ": HDF5 failed to open the table " + name + " (/links)");
  const std::size_t n = h5::dataset_length(ds.get());
  for (std::size_t i = 0; i < cols.size(); ++i) {
    Column& c = cols[i];
    c = h5::read_column(ds.get(), c.name, c.type, path);
    if (c.size() == 0 && n > 0 && i >= required) c.reals.assign(n, 0.0);
    if (c.size() != n) throw IoError(path + ": /links table " + name + " has no column " + c.name);
  }
  return cols;
}

double number(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number())
    throw ConfigError(where + ": needs a number '" + key + "'");
  const double x = j[key].get<double>();
  if (!std::isfinite(x) || x < 0)
    throw ConfigError(where + ": '" + key + "' must be finite and >= 0");
  return x;
}

int rank_of(const json& j, const char* key, const std::string& where) {
  const double x = number(j, key, where);
  if (x != std::floor(x) || x > 32767) throw ConfigError(where + ": '" + key + "' is not a rank");
  return static_cast<int>(x);
}

// A LinkFit from what a file holds: samples, the line and the regimes; errors recomputed.
LinkFit assemble(int src, int dst, std::vector<LinkSample> samples, AlphaBeta line,
                 std::vector<LinkRegime> regimes, const std::string& where) {
  LinkFit f;
  f.src = src;
  f.dst = dst;
  std::sort(samples.begin(), samples.end(),
            [](const LinkSample& a, const LinkSample& b) { return a.bytes < b.bytes; });
  for (const LinkSample& x : samples)
    if (!(x.seconds > 0)) throw ConfigError(where + ": a measured time must be > 0");
  f.samples = std::move(samples);
  f.line = line;
  std::sort(regimes.begin(), regimes.end(),
            [](const LinkRegime& a, const LinkRegime& b) { return a.lo_bytes < b.lo_bytes; });
  for (std::size_t i = 0; i < regimes.size(); ++i)
    if (regimes[i].hi_bytes < regimes[i].lo_bytes ||
        (i > 0 && regimes[i].lo_bytes <= regimes[i - 1].hi_bytes))
      throw ConfigError(where + ": regimes overlap or are out of order");
  f.regimes = regimes.empty() ? std::vector<LinkRegime>{{0, 0, line}} : std::move(regimes);
  f.line_error = fit_error(f.samples, f.line);
  f.regimes_error = regimes_error(f);
  return f;
}

bool is_hdf5(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char sig[8] = {};
  in.read(sig, sizeof sig);
  return in.gcount() == 8 && std::memcmp(sig, "\x89HDF\r\n\x1a\n", 8) == 0;
}

}  // namespace

json links_to_json(const std::vector<LinkFit>& fits) {
  json out = json::array();
  for (const LinkFit& f : fits) {
    json j;
    j["src"] = f.src;
    j["dst"] = f.dst;
    j["alpha_s"] = f.line.alpha;
    j["beta_bytes_per_s"] = f.line.beta;
    j["max_rel_error"] = f.line_error.max_rel;
    j["median_rel_error"] = f.line_error.median_rel;
    j["regimes"] = json::array();
    for (const LinkRegime& r : f.regimes)
      j["regimes"].push_back({{"lo_bytes", r.lo_bytes},
                              {"hi_bytes", r.hi_bytes},
                              {"alpha_s", r.line.alpha},
                              {"beta_bytes_per_s", r.line.beta}});
    j["regimes_max_rel_error"] = f.regimes_error.max_rel;
    j["regimes_median_rel_error"] = f.regimes_error.median_rel;
    j["wake_s"] = f.wake_s;
    j["samples"] = json::array();
    for (const LinkSample& x : f.samples)
      j["samples"].push_back({{"bytes", x.bytes}, {"time_s", x.seconds}});
    out.push_back(std::move(j));
  }
  return out;
}

std::vector<LinkFit> links_from_json(const json& j) {
  if (!j.is_array()) throw ConfigError("links: expected an array of fits");
  std::vector<LinkFit> out;
  for (const json& f : j) {
    const std::string where = "links";
    const int src = rank_of(f, "src", where), dst = rank_of(f, "dst", where);
    const std::string pair = where + " " + std::to_string(src) + "->" + std::to_string(dst);
    const AlphaBeta line{number(f, "alpha_s", pair), number(f, "beta_bytes_per_s", pair)};
    std::vector<LinkRegime> regimes;
    if (f.contains("regimes")) {
      if (!f["regimes"].is_array()) throw ConfigError(pair + ": 'regimes' must be an array");
      for (const json& r : f["regimes"])
        regimes.push_back({number(r, "lo_bytes", pair),
                           number(r, "hi_bytes", pair),
                           {number(r, "alpha_s", pair), number(r, "beta_bytes_per_s", pair)}});
    }
    std::vector<LinkSample> samples;
    if (f.contains("samples")) {
      if (!f["samples"].is_array()) throw ConfigError(pair + ": 'samples' must be an array");
      for (const json& x : f["samples"])
        samples.push_back({number(x, "bytes", pair), number(x, "time_s", pair)});
    }
    out.push_back(assemble(src, dst, std::move(samples), line, std::move(regimes), pair));
    if (f.contains("wake_s")) out.back().wake_s = number(f, "wake_s", pair);
  }
  LinkModel check(out);  // one fit per pair
  return out;
}

void write_links(hid_t parent, const std::vector<LinkFit>& fits, const Attrs& attrs,
                 const std::string& path) {
  if (H5Lexists(parent, "links", H5P_DEFAULT) > 0 && H5Ldelete(parent, "links", H5P_DEFAULT) < 0)
    throw IoError(path + ": HDF5 failed to replace /links");
  Handle g(H5Gcreate2(parent, "links", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!g.ok()) throw IoError(path + ": HDF5 failed to create /links");
  std::vector<Column> samples = sample_columns(), rows = fit_columns(), regimes = regime_columns();
  for (const LinkFit& f : fits) {
    for (const LinkSample& x : f.samples)
      add_row(samples, {1. * f.src, 1. * f.dst, x.bytes, x.seconds});
    add_row(rows, {1. * f.src, 1. * f.dst, f.line.alpha, f.line.beta, f.line_error.max_rel,
                   f.line_error.median_rel, f.regimes_error.max_rel, f.regimes_error.median_rel,
                   1. * f.regimes.size(), f.wake_s});
    for (const LinkRegime& r : f.regimes)
      add_row(regimes, {1. * f.src, 1. * f.dst, r.lo_bytes, r.hi_bytes, r.line.alpha, r.line.beta});
  }
  h5::write_table(g.get(), "samples", samples,
                  "one message size of one directed pair: its median one-way time", {}, path);
  h5::write_table(g.get(), "fits", rows, "one directed pair: its alpha-beta fits", {}, path);
  h5::write_table(g.get(), "regimes", regimes,
                  "one size range of one directed pair's piecewise alpha-beta fit", {}, path);
  for (const auto& [name, value] : attrs) h5::write_attr(g.get(), name, value, path);
}

std::vector<LinkFit> read_links(hid_t parent, const std::string& path) {
  if (H5Lexists(parent, "links", H5P_DEFAULT) <= 0) throw IoError(path + ": no /links group");
  Handle g(H5Gopen2(parent, "links", H5P_DEFAULT), H5Gclose);
  if (!g.ok()) throw IoError(path + ": HDF5 failed to open /links");
  const auto samples = read_table(g.get(), "samples", sample_columns(), path);
  const auto rows = read_table(g.get(), "fits", fit_columns(), path, 9);  // wake_s optional
  const auto regimes = read_table(g.get(), "regimes", regime_columns(), path);
  auto pair = [](const std::vector<Column>& t, std::size_t i) {
    return std::pair<int, int>(static_cast<int>(t[0].ints[i]), static_cast<int>(t[1].ints[i]));
  };
  std::map<std::pair<int, int>, std::vector<LinkSample>> by_pair;
  for (std::size_t i = 0; i < samples[0].size(); ++i)
    by_pair[pair(samples, i)].push_back({samples[2].reals[i], samples[3].reals[i]});
  std::map<std::pair<int, int>, std::vector<LinkRegime>> regimes_by_pair;
  for (std::size_t i = 0; i < regimes[0].size(); ++i)
    regimes_by_pair[pair(regimes, i)].push_back(
        {regimes[2].reals[i], regimes[3].reals[i], {regimes[4].reals[i], regimes[5].reals[i]}});
  std::vector<LinkFit> out;
  for (std::size_t i = 0; i < rows[0].size(); ++i) {
    const auto [src, dst] = pair(rows, i);
    const std::string where = path + ": /links " + std::to_string(src) + "->" + std::to_string(dst);
    try {
      out.push_back(assemble(src, dst, by_pair[{src, dst}], {rows[2].reals[i], rows[3].reals[i]},
                             regimes_by_pair[{src, dst}], where));
      out.back().wake_s = rows[9].reals[i];
    } catch (const ConfigError& e) {
      throw IoError(e.what());
    }
  }
  return out;
}

void write_links_file(const std::string& path, const std::vector<LinkFit>& fits,
                      const Attrs& attrs) {
  WriterLock lock(path);
  h5::commit_change(path, [&](hid_t file) { write_links(file, fits, attrs, path); });
}

std::vector<LinkFit> read_links_file(const std::string& path) {
  std::ifstream probe(path, std::ios::binary);
  if (!probe) throw ConfigError("--links " + path + ": cannot read the file");
  probe.close();
  if (is_hdf5(path)) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) throw ConfigError("--links " + path + ": HDF5 cannot open the file");
    Handle file(f, H5Fclose);
    try {
      return read_links(file.get(), path);
    } catch (const IoError& e) {
      throw ConfigError(std::string("--links ") + e.what());
    }
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  json j;
  try {
    j = json::parse(text.str());
  } catch (const json::exception&) {
    throw ConfigError("--links " + path + ": neither HDF5 nor JSON");
  }
  // calibrate --json: an object with "links"; run --format json: an array of records.
  if (j.is_array())
    for (const json& rec : j)
      if (rec.is_object() && rec.contains("links")) {
        j = rec;
        break;
      }
  if (!j.is_object() || !j.contains("links"))
    throw ConfigError("--links " + path + ": no \"links\" in the JSON");
  try {
    return links_from_json(j["links"]);
  } catch (const ConfigError& e) {
    throw ConfigError("--links " + path + ": " + e.what());
  }
}

}  // namespace bb
