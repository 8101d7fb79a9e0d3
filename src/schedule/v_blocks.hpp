// The controllable-memory V-shape schedules (Qi, Wan, Amar and Lin, "Pipeline Parallelism with
// Controllable Memory", NeurIPS 2024): V-Half and V-Min, built as sail-sg's zero-bubble
// repository builds them (its V-Half/V-Min generator, read to learn and re-derived here;
// tests/unit/test_reference_orders.cpp compares the orders with that generator's).
//
// A building block places one micro-batch's six chunk passes on every rank at fixed offsets in
// a unit-time grid (F of the down leg, F of the up leg, B of the up leg, B of the down leg; the
// two W go into free slots); micro-batch m repeats it 6m slots later. The block's lifespan sets
// the peak: V-Half holds about half of 1F1B's activations, V-Min about a third. The repeated
// blocks are then squeezed: the warm-up (before rank 0's first down-leg B) and the cool-down
// (after the first last-micro-batch F) pulled into the earliest free slots their inputs allow,
// never above the blocks' own peak; then the unit-time ASAP times, the W dropped and placed
// again, a second squeeze of the cool-down without W, and the W placed once more (split by
// chunk). Each rank runs its passes in the order of their slots. The order depends on P and M
// only (not on the costs).
#pragma once

#include <cstdint>

#include "schedule/schedule.hpp"

namespace bb {

enum class VBlock : std::uint8_t { half, min };

// Writes the rank lists of s (V placement, v = 2, P and M set): rank r holds chunks r (down
// leg) and 2P-1-r (up leg). Any P, M >= 1.
void build_v_block(Schedule& s, VBlock block);

}  // namespace bb
