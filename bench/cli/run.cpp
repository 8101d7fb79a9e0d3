#include "cli/run.hpp"

#include <iostream>

#include "common/error.hpp"

namespace bb {

int run_main(int, char**) {
  std::cerr << "bubblebench: error: run is not built yet\n";
  return kExitConfig;
}

}  // namespace bb
