// `bubblebench advise` (docs/advise.md): the schedule advisor's command line. Costs come from
// a results file of `run` (--results FILE) or from flags; the search is src/advise. With
// --verify K it must run under mpiexec/srun: every rank searches, then the top K run for real
// through the harness (src/harness: run_sweep, RunSummary) and rank 0 prints predicted vs
// measured with the attribution terms.
#pragma once

namespace bb {

// argv[1] is "advise". Returns the process exit code (design §5.3), the same on every rank.
int advise_main(int argc, char** argv);

}  // namespace bb
