// The bubblebench command line (design §5): sim, model, validate, show, run.
#pragma once

namespace bb {

// Returns the process exit code (design §5.3).
int cli_main(int argc, char** argv);

}  // namespace bb
