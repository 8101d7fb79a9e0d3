// The list scheduler behind ZB-H1 and ZB-H2 (Qi et al. 2024, "Zero Bubble Pipeline
// Parallelism", §3). Forwards and input-gradient backwards keep a 1F1B-like order: rank r
// runs `warmup(r)` forwards, then one forward and one B in turn, then the remaining Bs.
// Weight-gradient passes fill the gaps: with F = B = W = 1, whenever the next F/B of the
// order cannot start (its input has not arrived, or `cap` micro-batches are live: forward
// done, W not yet), the rank runs its oldest pending W. The order this produces is the
// schedule (ZB-H1: warmup P-r-1, cap P; ZB-H2: warmup 2(P-r)-2, cap 2P-1).
#pragma once

#include <functional>

#include "schedule/schedule.hpp"

namespace bb {

Schedule zero_bubble_greedy(const char* name, int P, int M, const std::function<int(int)>& warmup,
                            int cap);

}  // namespace bb
