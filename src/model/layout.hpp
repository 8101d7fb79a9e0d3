// Megatron-LM's pipeline layout strings (`--pipeline-model-parallel-layout`), read as blocks per
// model stage (`--partition`; docs/transformer.md, "A fixed model").
//
// The syntax, as Megatron-LM parses it: `E` the embedding, `t` a transformer layer, `L` the loss,
// `m` an MTP layer; `|` ends a stage, stages in virtual-stage order (the route's order: stage
// k of P ranks with v chunks each is chunk k / P of rank k mod P for looped placements); commas
// are ignored; `(group)*N` repeats a group (no parentheses inside it), then `x*N` repeats the one
// character before it. `Et*3|(tt|)*29,m|L` is the embedding and three layers, 29 stages of two,
// an MTP stage and a loss stage.
//
// What bubblebench takes of it: the blocks (`t`) of each stage. `E` and `L` are the model's ends
// (the embedding and the LM head with its loss with --vocab; else the seeded input and the MSE
// loss), so each must appear once, `E` first in the first stage and `L` last in the last; every
// stage needs at least one block (a chunk holds blocks); MTP layers are not modelled.
#pragma once

#include <string>
#include <vector>

namespace bb {

// Whether TEXT is meant as a layout string rather than a list of integers: it holds one of
// the layout's letters, `|` or `(` (and is not `auto`, --partition's other word).
bool is_layout_string(const std::string& text);

// The blocks of each stage of a layout string. Throws ConfigError with one line naming what is
// wrong: an unknown character, a bad repetition or parenthesis, `m`, `E`/`L` missing, repeated
// or misplaced, a stage without a block.
std::vector<int> parse_layout(const std::string& text);

// The layout string of BLOCKS (every entry >= 1): `E` before the first stage's blocks and `,L`
// after the last's, each stage's blocks as `t` or `t*N`: {3, 2} is "Et*3|t*2,L". parse_layout
// reads it back as BLOCKS.
std::string layout_text(const std::vector<int>& blocks);

}  // namespace bb
