// `run`'s choice of chunk model: --stage mlp|transformer, the transformer's shape
// (--seq, --heads, --ffn, --causal, --vocab; docs/transformer.md), a fixed model split over
// the chunks (--model-layers, --partition) and presets of all of them (--model).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "harness/settings.hpp"

namespace bb {

struct StageOptions {
  harness::StageModel stage = harness::StageModel::kMlp;
  int seq = 16, heads = 1, ffn = 0;
  bool causal = false;
  int vocab = 0;          // model ends (embedding, LM head, cross-entropy); 0: none
  int model_layers = 0;   // blocks in total (0: --layers per chunk)
  std::string partition;  // blocks per chunk along the route: "3,2,2,1" or "Et*3|t*2,L" ("": even),
                          // or "auto"
  double partition_lambda = 0;  // --partition auto: seconds per GiB of memory
  std::string model;            // --model preset ("": none)
};

// A --model preset: a documented transformer shape (docs/transformer.md, "Presets").
struct ModelPreset {
  const char* name;
  int hidden, heads, ffn, seq, vocab, model_layers;
  bool causal;
};
const std::vector<ModelPreset>& model_presets();

// Call after --layers is added (--model-layers excludes it).
void add_stage_options(CLI::App& app, StageOptions& o);
// Expands --model into the flags it stands for (--stage transformer, --hidden, --heads, --ffn,
// --seq, --vocab, --model-layers, --causal), each unless `app` saw it given (the user's flag
// wins; --layers given drops the preset's --model-layers). `hidden` is run's --hidden LIST.
// Throws ConfigError for --stage mlp with a preset. Call after parsing.
void apply_model_preset(const CLI::App& app, StageOptions& o, std::string& hidden);
// The blocks of --partition ("3,2,2,1", or a Megatron-LM layout string such as "Et*3|t*2,L":
// model/layout.hpp; empty: none). Throws ConfigError in one line.
std::vector<int> parse_partition(const std::string& text);
// `show --partition`: the blocks of each stage both ways (integers and layout string) and the
// chunks and ranks holding it, one line. Throws ConfigError when the stages do not match S's.
std::string partition_report(const Schedule& s, const std::string& partition);
// Throws ConfigError on a shape the model cannot take with any of the --hidden values.
void validate_stage_options(const StageOptions& o, const std::vector<int>& hidden);
// s with the chunk model of o.
harness::RunSettings apply_stage_options(const StageOptions& o, harness::RunSettings s);

}  // namespace bb
