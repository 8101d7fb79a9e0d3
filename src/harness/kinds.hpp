// The choices of a `run` sweep as enums, named once (common/enum_names.hpp: name_of, enum_of);
// with the runtime's (runtime/kinds.hpp: backend, transport), Dtype and OptimizerConfig::Kind
// they are every setting that used to travel as text. Text lives at the edges only: the command
// line, the record's sinks (JSON, HDF5, the table) and the files `advise` reads.
#pragma once

#include <cstdint>

#include "common/enum_names.hpp"
#include "runtime/chunk_model.hpp"
#include "runtime/dtype.hpp"
#include "runtime/kinds.hpp"

namespace bb::harness {

// gemm: the chunk model's math; synthetic: timed waits (design §3).
enum class Compute : std::uint8_t { kGemm, kSynthetic };
// barrier: the ranks aligned before every step; none: steps back to back (the steady state).
enum class Sync : std::uint8_t { kBarrier, kNone };
// The chunk model: design §3's MLP or pre-LN transformer blocks (docs/transformer.md).
enum class StageModel : std::uint8_t { kMlp, kTransformer };
// --check's outcome.
enum class CheckStatus : std::uint8_t { kSkipped, kPass, kFail };

constexpr EnumNames<Compute, 2> enum_names(Compute) {
  return {{"gemm", "synthetic"}};
}
constexpr EnumNames<Sync, 2> enum_names(Sync) {
  return {{"barrier", "none"}};
}
constexpr EnumNames<StageModel, 2> enum_names(StageModel) {
  return {{"mlp", "transformer"}};
}
constexpr EnumNames<CheckStatus, 3> enum_names(CheckStatus) {
  return {{"skipped", "pass", "fail"}};
}

}  // namespace bb::harness
