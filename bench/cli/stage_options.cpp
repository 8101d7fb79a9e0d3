#include "cli/stage_options.hpp"

#include "cli/options.hpp"
#include "common/error.hpp"

namespace bb {

void add_stage_options(CLI::App& app, StageOptions& o) {
  add_choice(app, "--stage", o.stage, "Chunk model: mlp, or transformer (pre-LN blocks)",
             {"mlp", "transformer"});
  add_with_default(app, "--seq", o.seq,
                   "Transformer: tokens per sequence (--mb-size is sequences)");
  add_with_default(app, "--heads", o.heads, "Transformer: attention heads (must divide --hidden)");
  add_with_default(app, "--ffn", o.ffn, "Transformer: MLP width (0: 4 x hidden)");
  app.add_flag("--causal", o.causal, "Transformer: causal attention mask");
  add_with_default(app, "--vocab", o.vocab,
                   "Transformer: vocabulary; the first chunk embeds token ids, the last applies "
                   "the final LayerNorm, the LM head and cross-entropy (0: none, MSE)");
}

void validate_stage_options(const StageOptions& o, const std::vector<int>& hidden,
                            const std::string& backend) {
  if (o.stage != "transformer") {
    if (o.vocab != 0) throw ConfigError("--vocab needs --stage transformer");
    return;
  }
  if (o.vocab < 0 || o.vocab >= (1 << 24)) throw ConfigError("--vocab must be 0..16777215");
  if (o.vocab > 0 && backend != "cpu")
    throw ConfigError("--vocab (the model's ends) runs on --backend cpu only for now");
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
  if (o.stage != "transformer") return s;
  s.seq = o.seq;
  s.heads = o.heads;
  s.ffn = o.ffn;
  s.causal = o.causal;
  s.vocab = o.vocab;
  return s;
}

}  // namespace bb
