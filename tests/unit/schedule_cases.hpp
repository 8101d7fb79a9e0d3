// Test helpers shared by the unit tests that walk every built-in schedule: the tests' own
// statement of what each schedule accepts (written apart from schedule_info.cpp's refusals,
// which test_core_matrix checks against it), a case's name, and the walk over accepted shapes.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>

#include "schedule/generators.hpp"

namespace bb::test {

// Whether `name`'s generator accepts P, M, v (small shapes: the common range always holds).
inline bool accepts(const std::string& name, int P, int M, int v) {
  // interleaved: PyTorch's rounds, max(1, M/P) of equal size (M < P, multiples of P, P=4 M=5..7,
  // 10).
  if (name == "interleaved") return v >= 2 && M % std::max(1, M / P) == 0;
  if (name == "interleaved-zb") return M % std::max(1, M / P) == 0;
  if (name == "dualpipe") return P % 2 == 0 && M % 2 == 0 && M >= 2 * P;
  if (name == "dualpipev") return M >= 2 * P;
  return true;
}

// "name P=.. M=.. v=..", for failure messages.
inline std::string case_name(const std::string& name, int P, int M, int v) {
  return name + " P=" + std::to_string(P) + " M=" + std::to_string(M) + " v=" + std::to_string(v);
}

// Calls f(name, P, M, v) for every built-in schedule, P in Ps, M in ms_of(P) and v in vs that
// the schedule accepts (v other than 1 only where it takes v).
template <class MsOf, class F>
void for_each_accepted(std::initializer_list<int> Ps, MsOf&& ms_of, std::initializer_list<int> vs,
                       F&& f) {
  for (const std::string& name : schedule_names())
    for (int P : Ps)
      for (int M : ms_of(P))
        for (int v : vs)
          if ((schedule_takes_v(name) || v == 1) && accepts(name, P, M, v)) f(name, P, M, v);
}

}  // namespace bb::test
