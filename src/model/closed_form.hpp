// Closed-form bubble models (design §4) for uniform chunks and zero communication cost, in
// both views: a single step on its own (makespan) and back-to-back steps (period). Each
// schedule states its form, peak formula and their conditions in its own file (its
// ScheduleInfo's PublishedForm, schedule/form.hpp); closed_form() looks it up by name and adds
// the conditions every form shares. The simulator is the reference:
// tests/unit/test_core_matrix.cpp checks every form against it.
#pragma once

#include "schedule/form.hpp"

namespace bb {

// The form of in.schedule (through its ScheduleInfo), then the conditions every form shares
// (uniform stages, no message time). A name without a form: applies false, with a reason.
ModelResult closed_form(const ModelInput& in);

}  // namespace bb
