// The configurations of a `run` sweep: every lowered schedule crossed with the stage-model
// lists, each with its run_key (the HDF5 group name and the trace file's name), and the
// fingerprint that tells ranks which built the same sweep apart.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "harness/settings.hpp"
#include "model/partition.hpp"  // partition_text
#include "schedule/schedule.hpp"

namespace bb::harness {

// One configuration of the sweep.
struct RunConfig {
  std::string schedule;  // name or csv:FILE
  std::shared_ptr<const Schedule> lowered;
  bool recompute = false;
  int hidden = 64, layers = 1, mb_size = 8;
  std::string csv_hash;  // csv:FILE: its contents' FNV-1a 64 in hex (part of the key)
  std::string key;       // run_key
  std::string label;     // for progress lines: "1f1b P=2 M=8 v=1"
};

// The stage-model lists of a sweep (each value already checked).
struct ModelLists {
  std::vector<int> hidden{64}, layers{1}, mb_size{8};
  std::vector<bool> recompute{false};
};

// A named schedule of the sweep (built-in name or csv:FILE), generated, not yet lowered.
struct NamedSchedule {
  std::string name;
  Schedule schedule;
};

// FNV-1a (64 bits): h carried over n more bytes (start with kFnvBasis).
inline constexpr std::uint64_t kFnvBasis = 0xcbf29ce484222325ull;
std::uint64_t fnv1a(std::uint64_t h, const char* bytes, std::size_t n);

// 16 lower-case hex digits.
std::string hex16(std::uint64_t h);

// FNV-1a of a file's bytes as 16 hex digits. Throws ConfigError when it cannot be read.
std::string file_hash(const std::string& path);

// Seconds as a short exact-enough decimal ("0.001", "0.0025", "0").
std::string seconds_text(double x);

// The run_key: every setting that changes what a run measures, as `name=value` items joined
// with '_', sanitized for HDF5 (bb::sanitize_key), e.g.
// 1f1b_P=2_M=8_v=1_cpu_mpi_synthetic_h=64_L=1_b=8_fp32_recompute=0_sync=barrier_warmup=1_
// iters=5_tf=0.001_tb=0.002_tw=0 (the synthetic times, in seconds, only with synthetic compute).
// A CSV schedule adds its contents' hash after its name: csv_dp.csv_hash=0123456789abcdef_P=4_…
std::string run_key(const RunConfig& c, const RunSettings& s);

// The sweep's run_keys in order, hashed into 31 bits: ranks that built the same sweep agree.
int sweep_fingerprint(const std::vector<RunConfig>& configs);

// Every schedule (validated, then lowered unless it is already) crossed with every stage
// model, in order, with keys and labels; a key seen before (a schedule named twice) is
// dropped. A csv: schedule whose P differs from WORLD is a ConfigError.
std::vector<RunConfig> make_configs(std::vector<NamedSchedule> schedules, const ModelLists& lists,
                                    const RunSettings& settings, int world);

}  // namespace bb::harness
