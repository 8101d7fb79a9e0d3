#!/usr/bin/env bash
# ctest install.consumer (cmake/BbInstall.cmake): `cmake --install BUILD --prefix DIR`, then the
# consumer examples/cpp/ configured with CMAKE_PREFIX_PATH=DIR (find_package(bubblebench
# CONFIG), bubblebench::core), built and run. Checks that the installed tree is the core alone
# (no MPI, CUDA, HDF5 or BLAS header or library, nothing of bench/) and that the consumer
# prints every built-in schedule with 1F1B's makespan at P=4 M=8, F=1 B=2: 33.
# Usage: install_consumer.sh BUILD_DIR EXAMPLE_DIR [CXX_FLAGS]
set -uo pipefail
build=$1 example=$2 flags=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install.consumer: $*"; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" --component core >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "cmake --install failed"; }
for f in lib/libbb_core.a lib/cmake/bubblebench/bubblebenchConfig.cmake \
         include/bubblebench/schedule/schedule_info.hpp include/bubblebench/schedule/schedules.inc \
         include/bubblebench/sim/sim.hpp include/bubblebench/model/closed_form.hpp \
         include/bubblebench/advise/advise.hpp include/bubblebench/common/error.hpp; do
  [ -f "$tmp/prefix/$f" ] || fail "missing $f"
done
extra=$(cd "$tmp/prefix" && find . -type f | grep -v -E '^\./(include/bubblebench/(common|schedule|sim|model|advise)/[^/]+\.(hpp|inc)|lib/libbb_core\.a|lib/cmake/bubblebench/[^/]+\.cmake)$')
[ -z "$extra" ] || fail "files beyond the core: $extra"
if grep -rlE '#include *[<"](mpi|cuda|cublas|nccl|hdf5|H5|cblas)' "$tmp/prefix/include"; then
  fail "an installed header includes MPI, CUDA, HDF5 or BLAS"
fi

cmake -S "$example" -B "$tmp/example" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
  >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; fail "configuring the consumer failed"; }
cmake --build "$tmp/example" >"$tmp/build.log" 2>&1 ||
  { cat "$tmp/build.log"; fail "building the consumer failed"; }
"$tmp/example/bubble_table" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "the consumer failed"; }
cat "$tmp/out"
grep -qE '^1f1b +1 +33 ' "$tmp/out" || fail "no 1f1b row with makespan 33"
rows=$(grep -cvE '^schedule ' "$tmp/out")
want=$(grep -c '^BB_SCHEDULE(' "$tmp/prefix/include/bubblebench/schedule/schedules.inc")
[ "$rows" = "$want" ] || fail "$rows rows for $want schedules"
grep -q refused "$tmp/out" && fail "a schedule refused P=4 M=8"
echo "install.consumer: ok ($want schedules from the installed core)"
