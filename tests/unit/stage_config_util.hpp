// Test helper shared by the CPU and CUDA stage tests: a StageConfig from its main fields.
// (GCC 12 warns, -Wmissing-field-initializers, on designated initialisers that skip fields.)
#pragma once

#include <cstdint>

#include "runtime/stage.hpp"

namespace bb::test {

inline StageConfig stage_config(int hidden, int rows, int first_layer, int num_layers,
                                std::uint64_t seed, bool recompute = false) {
  StageConfig c;
  c.hidden = hidden;
  c.rows = rows;
  c.first_layer = first_layer;
  c.num_layers = num_layers;
  c.seed = seed;
  c.recompute = recompute;
  return c;
}

}  // namespace bb::test
