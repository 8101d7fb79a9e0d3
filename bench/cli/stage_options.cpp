#include "cli/stage_options.hpp"

#include <algorithm>

#include "cli/options.hpp"
#include "common/error.hpp"
#include "model/layout.hpp"
#include "model/partition.hpp"

namespace bb {

void add_stage_options(CLI::App& app, StageOptions& o) {
  add_enum_choice(app, "--stage", o.stage, "Chunk model: mlp, or transformer (pre-LN blocks)");
  // The transformer's shape, one row a flag (--causal is the one switch among them).
  struct ShapeFlag {
    const char* name;
    int StageOptions::*value;  // nullptr: --causal
    const char* help;
  };
  static constexpr ShapeFlag shape[] = {
      {"--seq", &StageOptions::seq, "tokens per sequence (--mb-size is sequences)"},
      {"--heads", &StageOptions::heads, "attention heads (must divide --hidden)"},
      {"--ffn", &StageOptions::ffn, "MLP width (0: 4 x hidden)"},
      {"--causal", nullptr, "causal attention mask"},
      {"--vocab", &StageOptions::vocab,
       "vocabulary; the first chunk embeds token ids, the last applies the final LayerNorm, the "
       "LM head and cross-entropy (0: none, MSE)"},
  };
  for (const ShapeFlag& f : shape) {
    const std::string help = std::string("Transformer: ") + f.help;
    if (f.value == nullptr)
      app.add_flag(f.name, o.causal, help);
    else
      add_with_default(app, f.name, o.*f.value, help);
  }
  CLI::Option* model_layers =
      add_with_default(app, "--model-layers", o.model_layers,
                       "A fixed model: blocks in total, split over the route's chunks (P*v, "
                       "2P for V schedules), the same model for every schedule (0: --layers "
                       "blocks per chunk)");
  if (CLI::Option* layers = app.get_option_no_throw("--layers")) model_layers->excludes(layers);
  std::string names;
  for (const ModelPreset& p : model_presets())
    names += std::string(names.empty() ? "" : "|") + p.name;
  std::vector<std::string> choices;
  for (const ModelPreset& p : model_presets()) choices.emplace_back(p.name);
  app.add_option("--model", o.model,
                 "Preset transformer (" + names +
                     "): sets --stage transformer, --hidden, --heads, --ffn, --seq, --vocab, "
                     "--model-layers and --causal (docs/transformer.md); flags given explicitly "
                     "override the preset's (--layers drops its --model-layers)")
      ->check(CLI::IsMember(choices));
  app.add_option("--partition", o.partition,
                 "With --model-layers: blocks per chunk along the route, e.g. 3,2,2,1 (must sum "
                 "to --model-layers, one entry per chunk; default: even split); a Megatron-LM "
                 "layout string, e.g. 'Et*3|t*2,L' (E embedding, t block, L loss, | between "
                 "stages in route order; sets --model-layers when not given); or auto: profile "
                 "the blocks and the model's ends in this launch and choose the split per "
                 "schedule (docs/transformer.md, Partitioner)");
  add_with_default(app, "--partition-lambda", o.partition_lambda,
                   "With --partition auto: seconds one GiB of a rank's memory (parameters, "
                   "gradients, one micro-batch's activations per chunk) weighs against its time "
                   "(minimise max time + lambda * max memory)");
}

const std::vector<ModelPreset>& model_presets() {
  // name, hidden, heads, ffn, seq, vocab, blocks, causal
  static const std::vector<ModelPreset> presets = {
      {"tiny", 32, 4, 128, 16, 128, 4, true},                // CI: every schedule in seconds
      {"distilbert", 768, 12, 3072, 128, 30522, 6, false},   // DistilBERT-like encoder
      {"gpt2-small", 768, 12, 3072, 1024, 50257, 12, true},  // GPT-2 small-like decoder
      {"gpt-1b", 2048, 16, 8192, 2048, 50257, 16, true},     // ~1.0 B-parameter decoder
  };
  return presets;
}

void apply_model_preset(const CLI::App& app, StageOptions& o, std::string& hidden) {
  if (o.model.empty()) return;
  const auto& all = model_presets();
  const auto p =
      std::find_if(all.begin(), all.end(), [&](const ModelPreset& x) { return o.model == x.name; });
  if (p == all.end()) throw ConfigError("--model " + o.model + ": unknown preset");
  const auto given = [&](const char* name) { return app.count(name) > 0; };
  if (given("--stage") && o.stage != harness::StageModel::kTransformer)
    throw ConfigError("--model " + o.model + " is a transformer: it takes no --stage " +
                      std::string(name_of(o.stage)));
  o.stage = harness::StageModel::kTransformer;
  if (!given("--hidden")) hidden = std::to_string(p->hidden);
  if (!given("--heads")) o.heads = p->heads;
  if (!given("--ffn")) o.ffn = p->ffn;
  if (!given("--seq")) o.seq = p->seq;
  if (!given("--vocab")) o.vocab = p->vocab;
  if (!given("--causal")) o.causal = p->causal;
  if (!given("--model-layers") && !given("--layers")) o.model_layers = p->model_layers;
}

std::vector<int> parse_partition(const std::string& text) {
  std::vector<int> out;
  if (text.empty()) return out;
  if (is_layout_string(text)) {
    try {
      return parse_layout(text);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("--partition: ") + e.what());
    }
  }
  std::size_t at = 0;
  while (true) {
    const std::size_t end = text.find(',', at);
    const std::string item = text.substr(at, end == std::string::npos ? end : end - at);
    std::size_t used = 0;
    int b = 0;
    try {
      b = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || b < 1 || b > 65536)
      throw ConfigError("--partition " + text +
                        ": expected blocks per chunk as integers >= 1, e.g. 3,2,2,1, or a "
                        "Megatron-LM layout string, e.g. Et*3|t*2,L");
    out.push_back(b);
    if (end == std::string::npos) return out;
    at = end + 1;
  }
}

std::string partition_report(const Schedule& s, const std::string& partition) {
  const std::vector<int> blocks = parse_partition(partition);
  int stages = 0;
  for (int st : s.chunk_stage) stages = std::max(stages, st + 1);
  if (static_cast<int>(blocks.size()) != stages)
    throw ConfigError("--partition " + partition + " has " + std::to_string(blocks.size()) +
                      " stages, " + s.name + " has " + std::to_string(stages) + " along the route");
  std::string out = "# partition " + partition_text(blocks) + " = layout " + layout_text(blocks);
  for (int st = 0; st < stages; ++st) {
    const int b = blocks[static_cast<std::size_t>(st)];
    out += (st == 0 ? ": stage " : "; stage ") + std::to_string(st) + " " + std::to_string(b) +
           (b == 1 ? " block" : " blocks") + (st == 0 ? " + E" : "") +
           (st == stages - 1 ? " + L" : "");
    for (int c = 0; c < s.num_chunks(); ++c)
      if (s.chunk_stage[c] == st)
        out += " (chunk " + std::to_string(c) + " on rank " + std::to_string(s.chunk_rank[c]) + ")";
  }
  return out + "\n";
}

void validate_stage_options(const StageOptions& o, const std::vector<int>& hidden) {
  if (o.model_layers < 0 || o.model_layers > 65536)
    throw ConfigError("--model-layers must be 0..65536");
  if (!o.partition.empty() && o.model_layers == 0 && !is_layout_string(o.partition))
    throw ConfigError("--partition needs --model-layers (the blocks it splits)");
  if (!(o.partition_lambda >= 0)) throw ConfigError("--partition-lambda must be >= 0");
  if (o.partition != "auto") (void)parse_partition(o.partition);
  if (o.stage != harness::StageModel::kTransformer) {
    if (o.vocab != 0) throw ConfigError("--vocab needs --stage transformer");
    return;
  }
  if (o.vocab < 0 || o.vocab >= (1 << 24)) throw ConfigError("--vocab must be 0..16777215");
  for (int h : hidden)  // the token ids live in an activation's bytes (4 per id)
    if (o.vocab > 0 && h < 2) throw ConfigError("--vocab needs --hidden >= 2");
  if (o.seq < 1 || o.seq > (1 << 16)) throw ConfigError("--seq must be 1..65536");
  if (o.heads < 1) throw ConfigError("--heads must be >= 1");
  if (o.ffn < 0 || o.ffn > (1 << 20)) throw ConfigError("--ffn must be 0..1048576");
  for (int h : hidden)
    if (h % o.heads != 0)
      throw ConfigError("--heads " + std::to_string(o.heads) + " does not divide --hidden " +
                        std::to_string(h));
}

harness::RunSettings apply_stage_options(const StageOptions& o, harness::RunSettings s) {
  s.stage = o.stage;
  s.model_layers = o.model_layers;
  s.partition_auto = o.partition == "auto";
  s.partition = s.partition_auto ? std::vector<int>{} : parse_partition(o.partition);
  if (s.model_layers == 0 && is_layout_string(o.partition))  // the layout's blocks
    for (int b : s.partition) s.model_layers += b;
  s.partition_lambda = o.partition_lambda;
  s.model = o.model;
  if (o.stage != harness::StageModel::kTransformer) return s;
  s.seq = o.seq;
  s.heads = o.heads;
  s.ffn = o.ffn;
  s.causal = o.causal;
  s.vocab = o.vocab;
  return s;
}

}  // namespace bb
