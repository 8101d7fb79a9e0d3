// The runtime's choices as enums, named once (common/enum_names.hpp: name_of, enum_of): the
// backend (`--backend`) and the transport (`--transport`). The dtype is Dtype (dtype.hpp), the
// optimizer OptimizerConfig::Kind (chunk_model.hpp).
#pragma once

#include <cstdint>

#include "common/enum_names.hpp"

namespace bb {

enum class BackendKind : std::uint8_t { kCpu, kCuda };
enum class TransportKind : std::uint8_t { kMpi, kNccl };

constexpr EnumNames<BackendKind, 2> enum_names(BackendKind) {
  return {{"cpu", "cuda"}};
}
constexpr EnumNames<TransportKind, 2> enum_names(TransportKind) {
  return {{"mpi", "nccl"}};
}

// The transport that goes with a backend when none is asked for: mpi for cpu, nccl for cuda.
constexpr TransportKind default_transport(BackendKind b) {
  return b == BackendKind::kCuda ? TransportKind::kNccl : TransportKind::kMpi;
}

}  // namespace bb
