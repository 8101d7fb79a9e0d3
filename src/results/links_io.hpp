// Link fits (sim/links.hpp) in the results formats: a `links` group in an HDF5 file and a JSON
// object. Written by `bubblebench calibrate` and `run`; read by `sim --links FILE`.
//
// HDF5, group `links` (at the file's root, or under a run's group):
//   samples  compound table (src int32, dst int32, bytes float64, time_s float64): the median
//            one-way time of each measured size, per directed pair
//   fits     compound table (src, dst, alpha_s, beta_bytes_per_s, max_rel_error,
//            median_rel_error, regimes_max_rel_error, regimes_median_rel_error, regimes int32):
//            the single α-β line of each pair and both fits' errors (beta 0: infinite)
//   regimes  compound table (src, dst, lo_bytes, hi_bytes, alpha_s, beta_bytes_per_s): the
//            piecewise fit, by pair then size
//   attributes: the calibration's settings (method, transport, reps, warmup, max_bytes, ...);
//   each table has `row` and each column `<name>_unit`, `<name>_meaning` attributes
// JSON: {"links": [{"src", "dst", "alpha_s", "beta_bytes_per_s", "max_rel_error",
//   "median_rel_error", "regimes": [{"lo_bytes", "hi_bytes", "alpha_s", "beta_bytes_per_s"}],
//   "regimes_max_rel_error", "regimes_median_rel_error", "samples": [{"bytes", "time_s"}]}],
//   ...settings}
//
// This header names no HDF5 type (callers above results/ see files, not handles); the group
// readers and writers the results file uses are in results/links_h5.hpp.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "results/run_record.hpp"
#include "sim/links.hpp"

namespace bb {

nlohmann::json links_to_json(const std::vector<LinkFit>& fits);
// Throws ConfigError naming what is missing or wrong.
std::vector<LinkFit> links_from_json(const nlohmann::json& j);

// calibrate --out: adds /links to FILE.h5 (creating the file, or replacing an earlier /links
// in it) as one commit of the file (h5::commit_change: a copy changed, synced and renamed over
// it), holding the results file's writer lock meanwhile. Throws IoError / ConfigError.
void write_links_file(const std::string& path, const std::vector<LinkFit>& fits,
                      const Attrs& attrs);

// sim --links FILE: an HDF5 file with /links, or JSON with a "links" array (calibrate --json),
// or the JSON array of `run --format json` whose first record has one. Throws ConfigError.
std::vector<LinkFit> read_links_file(const std::string& path);

}  // namespace bb
