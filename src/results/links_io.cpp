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

namespace bb {
namespace {

using json = nlohmann::json;

// An HDF5 identifier closed on scope exit.
struct Id {
  hid_t id;
  herr_t (*close)(hid_t);
  Id(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  ~Id() {
    if (id >= 0) close(id);
  }
};

// In-memory rows of the three tables.
struct SampleRow {
  std::int32_t src, dst;
  double bytes, time_s;
};
struct FitRow {
  std::int32_t src, dst;
  double alpha_s, beta_bytes_per_s, max_rel_error, median_rel_error, regimes_max_rel_error,
      regimes_median_rel_error;
  std::int32_t regimes;
};
struct RegimeRow {
  std::int32_t src, dst;
  double lo_bytes, hi_bytes, alpha_s, beta_bytes_per_s;
};

hid_t sample_type() {
  const hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(SampleRow));
  H5Tinsert(t, "src", HOFFSET(SampleRow, src), H5T_NATIVE_INT32);
  H5Tinsert(t, "dst", HOFFSET(SampleRow, dst), H5T_NATIVE_INT32);
  H5Tinsert(t, "bytes", HOFFSET(SampleRow, bytes), H5T_NATIVE_DOUBLE);
  H5Tinsert(t, "time_s", HOFFSET(SampleRow, time_s), H5T_NATIVE_DOUBLE);
  return t;
}
hid_t fit_type() {
  const hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(FitRow));
  H5Tinsert(t, "src", HOFFSET(FitRow, src), H5T_NATIVE_INT32);
  H5Tinsert(t, "dst", HOFFSET(FitRow, dst), H5T_NATIVE_INT32);
  H5Tinsert(t, "alpha_s", HOFFSET(FitRow, alpha_s), H5T_NATIVE_DOUBLE);
  H5Tinsert(t, "beta_bytes_per_s", HOFFSET(FitRow, beta_bytes_per_s), H5T_NATIVE_DOUBLE);
  H5Tinsert(t, "max_rel_error", HOFFSET(FitRow, max_rel_error), H5T_NATIVE_DOUBLE);
  H5Tinsert(t, "median_rel_error", HOFFSET(FitRow, median_rel_error), H5T_NATIVE_DOUBLE);
  H5Tinsert(t, "regimes_max_rel_error", HOFFSET(FitRow, regimes_max_rel_error), H5T_NATIVE_DOUBLE);
  H5Tinsert(t, "regimes_median_rel_error", HOFFSET(FitRow, regimes_median_rel_error),
            H5T_NATIVE_DOUBLE);
  H5Tinsert(t, "regimes", HOFFSET(FitRow, regimes), H5T_NATIVE_INT32);
  return t;
}
hid_t regime_type() {
  const hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(RegimeRow));
  H5Tinsert(t, "src", HOFFSET(RegimeRow, src), H5T_NATIVE_INT32);
  H5Tinsert(t, "dst", HOFFSET(RegimeRow, dst), H5T_NATIVE_INT32);
  H5Tinsert(t, "lo_bytes", HOFFSET(RegimeRow, lo_bytes), H5T_NATIVE_DOUBLE);
  H5Tinsert(t, "hi_bytes", HOFFSET(RegimeRow, hi_bytes), H5T_NATIVE_DOUBLE);
  H5Tinsert(t, "alpha_s", HOFFSET(RegimeRow, alpha_s), H5T_NATIVE_DOUBLE);
  H5Tinsert(t, "beta_bytes_per_s", HOFFSET(RegimeRow, beta_bytes_per_s), H5T_NATIVE_DOUBLE);
  return t;
}

void must(herr_t rc, const std::string& path, const char* what) {
  if (rc < 0) throw IoError(path + ": HDF5 failed to " + what + " (/links)");
}

template <class Row>
void write_table(hid_t group, const char* name, hid_t (*type)(), const std::vector<Row>& rows,
                 const std::string& path) {
  Id t(type(), H5Tclose);
  const hsize_t n = rows.size();
  Id space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Id ds(H5Dcreate2(group, name, t.id, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  must(ds.id, path, "create a table");
  if (n > 0)
    must(H5Dwrite(ds.id, t.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), path, "write a table");
}

template <class Row>
std::vector<Row> read_table(hid_t group, const char* name, hid_t (*type)(),
                            const std::string& path) {
  if (H5Lexists(group, name, H5P_DEFAULT) <= 0)
    throw IoError(path + ": /links has no '" + name + "' table");
  Id ds(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose);
  must(ds.id, path, "open a table");
  Id space(H5Dget_space(ds.id), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(space.id);
  must(n < 0 ? -1 : 0, path, "size a table");
  std::vector<Row> rows(static_cast<std::size_t>(n));
  Id t(type(), H5Tclose);
  if (n > 0)
    must(H5Dread(ds.id, t.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), path, "read a table");
  return rows;
}

void write_attr(hid_t obj, const std::string& name, const AttrValue& value,
                const std::string& path) {
  Id space(H5Screate(H5S_SCALAR), H5Sclose);
  if (const auto* i = std::get_if<std::int64_t>(&value)) {
    Id a(H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space.id, H5P_DEFAULT, H5P_DEFAULT),
         H5Aclose);
    must(a.id < 0 ? -1 : H5Awrite(a.id, H5T_NATIVE_INT64, i), path, "write an attribute");
  } else if (const auto* d = std::get_if<double>(&value)) {
    Id a(H5Acreate2(obj, name.c_str(), H5T_IEEE_F64LE, space.id, H5P_DEFAULT, H5P_DEFAULT),
         H5Aclose);
    must(a.id < 0 ? -1 : H5Awrite(a.id, H5T_NATIVE_DOUBLE, d), path, "write an attribute");
  } else {
    Id t(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(t.id, H5T_VARIABLE);
    H5Tset_cset(t.id, H5T_CSET_UTF8);
    Id a(H5Acreate2(obj, name.c_str(), t.id, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    const char* s = std::get<std::string>(value).c_str();
    must(a.id < 0 ? -1 : H5Awrite(a.id, t.id, &s), path, "write an attribute");
  }
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
  }
  LinkModel check(out);  // one fit per pair
  return out;
}

void write_links(hid_t parent, const std::vector<LinkFit>& fits, const Attrs& attrs,
                 const std::string& path) {
  if (H5Lexists(parent, "links", H5P_DEFAULT) > 0)
    must(H5Ldelete(parent, "links", H5P_DEFAULT), path, "replace");
  Id g(H5Gcreate2(parent, "links", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  must(g.id, path, "create the group");
  std::vector<SampleRow> samples;
  std::vector<FitRow> rows;
  std::vector<RegimeRow> regimes;
  for (const LinkFit& f : fits) {
    for (const LinkSample& x : f.samples) samples.push_back({f.src, f.dst, x.bytes, x.seconds});
    rows.push_back({f.src, f.dst, f.line.alpha, f.line.beta, f.line_error.max_rel,
                    f.line_error.median_rel, f.regimes_error.max_rel, f.regimes_error.median_rel,
                    static_cast<std::int32_t>(f.regimes.size())});
    for (const LinkRegime& r : f.regimes)
      regimes.push_back({f.src, f.dst, r.lo_bytes, r.hi_bytes, r.line.alpha, r.line.beta});
  }
  write_table(g.id, "samples", sample_type, samples, path);
  write_table(g.id, "fits", fit_type, rows, path);
  write_table(g.id, "regimes", regime_type, regimes, path);
  for (const auto& [name, value] : attrs) write_attr(g.id, name, value, path);
}

std::vector<LinkFit> read_links(hid_t parent, const std::string& path) {
  if (H5Lexists(parent, "links", H5P_DEFAULT) <= 0) throw IoError(path + ": no /links group");
  Id g(H5Gopen2(parent, "links", H5P_DEFAULT), H5Gclose);
  must(g.id, path, "open the group");
  const auto samples = read_table<SampleRow>(g.id, "samples", sample_type, path);
  const auto rows = read_table<FitRow>(g.id, "fits", fit_type, path);
  const auto regimes = read_table<RegimeRow>(g.id, "regimes", regime_type, path);
  std::map<std::pair<int, int>, std::vector<LinkSample>> by_pair;
  for (const SampleRow& x : samples) by_pair[{x.src, x.dst}].push_back({x.bytes, x.time_s});
  std::map<std::pair<int, int>, std::vector<LinkRegime>> regimes_by_pair;
  for (const RegimeRow& r : regimes)
    regimes_by_pair[{r.src, r.dst}].push_back(
        {r.lo_bytes, r.hi_bytes, {r.alpha_s, r.beta_bytes_per_s}});
  std::vector<LinkFit> out;
  for (const FitRow& r : rows) {
    const std::string where =
        path + ": /links " + std::to_string(r.src) + "->" + std::to_string(r.dst);
    try {
      out.push_back(assemble(r.src, r.dst, by_pair[{r.src, r.dst}], {r.alpha_s, r.beta_bytes_per_s},
                             regimes_by_pair[{r.src, r.dst}], where));
    } catch (const ConfigError& e) {
      throw IoError(e.what());
    }
  }
  return out;
}

void write_links_file(const std::string& path, const std::vector<LinkFit>& fits,
                      const Attrs& attrs) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  WriterLock lock(path);
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  if (exists && !is_hdf5(path))
    throw IoError(path + ": exists and is not an HDF5 file (not replaced)");
  const hid_t f = exists ? H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)
                         : H5Fcreate(path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) throw IoError(path + ": cannot " + (exists ? "open" : "create") + " the file");
  Id file(f, H5Fclose);
  write_links(file.id, fits, attrs, path);
  must(H5Fflush(file.id, H5F_SCOPE_GLOBAL), path, "flush");
  const hid_t id = file.id;
  file.id = -1;
  if (H5Fclose(id) < 0) throw IoError(path + ": HDF5 failed to close the file");
}

std::vector<LinkFit> read_links_file(const std::string& path) {
  std::ifstream probe(path, std::ios::binary);
  if (!probe) throw ConfigError("--links " + path + ": cannot read the file");
  probe.close();
  if (is_hdf5(path)) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) throw ConfigError("--links " + path + ": HDF5 cannot open the file");
    Id file(f, H5Fclose);
    try {
      return read_links(file.id, path);
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
