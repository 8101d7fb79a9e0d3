#!/usr/bin/env bash
# check_refs.sh must fail on what it is meant to find (ctest `docs.refs_selftest`): a small
# tree outside git with one problem of each kind, each named in the output, then the same tree
# repaired, which must pass.
# Usage: selftest.sh PATH/TO/check_refs.sh
set -uo pipefail
check=${1:?usage: selftest.sh check_refs.sh}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
expect() {  # expect WHAT PATTERN FILE
  if grep -qF -- "$2" "$3"; then echo "ok: $1"; else echo "FAIL: $1 (no '$2' in:)"; cat "$3"; fails=$((fails + 1)); fi
}

mkdir -p "$tmp/docs" "$tmp/src/runtime/cuda" "$tmp/src/sim" "$tmp/tests/unit"
cat >"$tmp/docs/design.md" <<'MD'
# design
## §1 One
### §1.1 One point one
## §2 Two
See §1.1 and §3, [the header](../src/runtime/transport.hpp), [nothing](../src/gone.md),
[a site](https://example.org/x.md) and [a section](#one).
Rooms: `common < schedule < model, sim < advise, runtime, results < harness < bench`
MD
cat >"$tmp/src/runtime/transport.hpp" <<'CPP'
// The transport (design §1.1, §2), driven by the executor (design §4).
// Tested in tests/unit/test_transport.cpp and runtime/cuda/gone.hpp; see cuda_runtime_api.h.
CPP
touch "$tmp/src/runtime/cuda/staging.hpp" "$tmp/tests/unit/test_other.cpp"
cat >"$tmp/src/runtime/mpi_transport.cpp" <<'CPP'
#include "runtime/cuda/staging.hpp"
#include "runtime/transport.hpp"
// Staging lives in runtime/cuda/staging.hpp (design §1).
CPP
cat >"$tmp/src/sim/sim.cpp" <<'CPP'
#include <mpi.h>
// Pure (design §2.3).
CPP
mkdir -p "$tmp/bench" "$tmp/src/results"
printf '#include <cuda_runtime_api.h>\n#include <hdf5.h>\n' >"$tmp/bench/tool.cpp"
printf '#include <hdf5.h>\n' >"$tmp/src/results/file.cpp"
printf '#include "harness/runner.hpp"\n#include "schedule/schedule.hpp"\n' >"$tmp/src/sim/engine.cpp"
mkdir -p "$tmp/src/model" "$tmp/src/schedule" "$tmp/build"
printf '#include "schedule/schedule.hpp"\n#include "sim/sim.hpp"\n' >"$tmp/src/model/form.cpp"
# Link time: a schedule object that calls a function the sim room defines.
printf 'int simulate_it();\nint generate_it() { return simulate_it(); }\n' >"$tmp/src/schedule/gen.cpp"
printf 'int simulate_it() { return 1; }\n' >"$tmp/src/sim/run.cpp"
for f in schedule/gen sim/run; do
  c++ -c "$tmp/src/$f.cpp" -o "$tmp/build/${f//\//_}.o"
done
cat >"$tmp/build/compile_commands.json" <<JSON
[{"directory": "$tmp/build", "command": "c++ -o schedule_gen.o -c $tmp/src/schedule/gen.cpp",
  "file": "$tmp/src/schedule/gen.cpp"},
 {"directory": "$tmp/build", "command": "c++ -o sim_run.o -c $tmp/src/sim/run.cpp",
  "file": "$tmp/src/sim/run.cpp"}]
JSON
cat >"$tmp/tests/unit/run.sh" <<'SH'
printf '# tmp/never.csv\n' >x  # a quoted '#' starts no comment
# checks tests/unit/missing_script.sh
SH

bash "$check" "$tmp" "$tmp/build" >"$tmp/out" 2>&1
rc=$?
if [[ $rc -eq 1 ]]; then echo "ok: exit 1 on problems"; else
  echo "FAIL: exit $rc on problems"; fails=$((fails + 1)); fi
expect "unknown section in a comment" "src/runtime/transport.hpp:1: design §4 is not" "$tmp/out"
expect "unknown section inside design.md" "docs/design.md:5: §3 is not" "$tmp/out"
expect "unknown section of a list" "src/sim/sim.cpp:2: design §2.3 is not" "$tmp/out"
expect "missing test file" "names 'tests/unit/test_transport.cpp'" "$tmp/out"
expect "missing header" "names 'runtime/cuda/gone.hpp'" "$tmp/out"
expect "missing script (shell comment)" "names 'tests/unit/missing_script.sh'" "$tmp/out"
if grep -qE "never\.csv|names 'cuda_runtime_api|staging\.hpp'|design §1\.1 is not|design §2 is not|design §1 is not|transport\.hpp\)|example\.org|#one|src/results/file|may not use src/schedule" "$tmp/out"; then
  echo "FAIL: reported something that is fine:"; cat "$tmp/out"; fails=$((fails + 1))
fi
expect "transport includes runtime/cuda/" "src/runtime/mpi_transport.cpp:1: the transport includes" "$tmp/out"
expect "pure core includes mpi.h" "src/sim/sim.cpp:1: the pure core includes" "$tmp/out"
expect "CUDA header outside runtime/cuda" "bench/tool.cpp:1: a CUDA toolkit header outside" "$tmp/out"
expect "HDF5 header outside results" "bench/tool.cpp:2: an HDF5 header outside" "$tmp/out"
expect "a room using a later room" "src/sim/engine.cpp:1: src/sim may not use src/harness" "$tmp/out"
expect "a room using its peer" "src/model/form.cpp:2: src/model may not use src/sim" "$tmp/out"
expect "an upward reference at link time" "src/schedule/gen.cpp: src/schedule refers to simulate_it(), defined in src/sim" "$tmp/out"
if grep -qF "src/model/form.cpp:1" "$tmp/out"; then
  echo "FAIL: a room using a lower one was reported"; fails=$((fails + 1)); fi
expect "a link that leads nowhere" "docs/design.md:5: the link (../src/gone.md) leads nowhere" "$tmp/out"

# Repaired: every problem gone, the check passes.
printf '# design\n## §1 One\n### §1.1 One point one\n## §2 Two\n### §2.3 Three\n## §4 Four\nSee §1.1, §2 and [it](../src/runtime/transport.hpp).\nRooms: `common < schedule < model, sim < advise < harness < bench`\n' >"$tmp/docs/design.md"
touch "$tmp/tests/unit/test_transport.cpp" "$tmp/src/runtime/cuda/gone.hpp" "$tmp/tests/unit/missing_script.sh"
printf '#include "runtime/transport.hpp"\n// Staging lives in runtime/cuda/staging.hpp (design §1).\n' >"$tmp/src/runtime/mpi_transport.cpp"
printf '#include <vector>\n// Pure (design §2.3).\n' >"$tmp/src/sim/sim.cpp"
printf '#include "results/file.hpp"\n' >"$tmp/bench/tool.cpp"
printf '#include "schedule/schedule.hpp"\n' >"$tmp/src/sim/engine.cpp"
printf '#include "schedule/schedule.hpp"\n' >"$tmp/src/model/form.cpp"
printf 'int generate_it() { return 0; }\n' >"$tmp/src/schedule/gen.cpp"
c++ -c "$tmp/src/schedule/gen.cpp" -o "$tmp/build/schedule_gen.o"
if bash "$check" "$tmp" "$tmp/build" >"$tmp/out" 2>&1; then echo "ok: a repaired tree passes"; else
  echo "FAIL: a repaired tree does not pass:"; cat "$tmp/out"; fails=$((fails + 1)); fi

[[ $fails -eq 0 ]] && echo "selftest: all ok" || echo "selftest: $fails failure(s)"
exit $((fails > 0))
