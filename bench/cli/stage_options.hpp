// `run`'s choice of chunk model: --stage mlp|transformer and the transformer's shape
// (--seq, --heads, --ffn, --causal, --vocab; docs/transformer.md).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "harness/settings.hpp"

namespace bb {

struct StageOptions {
  std::string stage = "mlp";
  int seq = 16, heads = 1, ffn = 0;
  bool causal = false;
  int vocab = 0;  // model ends (embedding, LM head, cross-entropy); 0: none
};

void add_stage_options(CLI::App& app, StageOptions& o);
// Throws ConfigError on a shape the model cannot take with any of the --hidden values.
// (--vocab needs the CPU backend: the CUDA one has no kernels for the ends yet.)
void validate_stage_options(const StageOptions& o, const std::vector<int>& hidden,
                            const std::string& backend);
// s with the chunk model of o.
harness::RunSettings apply_stage_options(const StageOptions& o, harness::RunSettings s);

}  // namespace bb
