#!/usr/bin/env bash
# tools/gpu-check.sh's plumbing on the CPU backend (what a GPU session runs, minus the GPU):
# the --check steps and the synthetic sweep whose every row is compared with the simulator.
# Behaviour only: with --bubble-tol 1 all 8 rows are read and pass; with --bubble-tol 0 the
# comparison fails (a measured bubble never equals the simulated one exactly) and so does the
# script.
# usage: run_gpu_check_cpu.sh BINDIR MPIEXEC
BINDIR=${1:?usage: $0 bindir mpiexec}
MPIEXEC=${2:?}
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
script="$here/../../tools/gpu-check.sh"
. "$(dirname "$0")/../check_lib.sh"  # strict mode, $HERE, $tmp, check, finish, run_or_exit

timeout 300 bash "$script" --backend cpu --bindir "$BINDIR" --mpiexec "$MPIEXEC" \
  --only check,synthetic --bubble-tol 1 --timeout 120 --out "$tmp/pass" >"$tmp/pass.log" 2>&1
rc=$?
check "passes (exit $rc)" "$([ $rc = 0 ] && echo 0 || echo 1)"
[ "$(grep -c '^PASS .* check ' "$tmp/pass/summary.txt")" = 10 ]
check "10 check steps passed" $?
grep -q '^PASS .*synthetic bubble vs sim .*8 of 8 rows' "$tmp/pass/summary.txt"
check "synthetic comparison read 8 of 8 rows" $?

timeout 300 bash "$script" --backend cpu --bindir "$BINDIR" --mpiexec "$MPIEXEC" \
  --only synthetic --bubble-tol 0 --timeout 120 --out "$tmp/fail" >"$tmp/fail.log" 2>&1
rc=$?
check "tolerance 0 fails the script (exit $rc)" "$([ $rc = 1 ] && echo 0 || echo 1)"
grep -q '^FAIL .*synthetic bubble vs sim' "$tmp/fail/summary.txt"
check "tolerance 0: the comparison is FAIL" $?
grep -q 'OVER' "$tmp/fail/synthetic-vs-sim.log"
check "tolerance 0: rows marked OVER" $?

bash "$script" --only bogus >"$tmp/bad.log" 2>&1
rc=$?
check "unknown --only step: exit 2 (got $rc)" "$([ $rc = 2 ] && echo 0 || echo 1)"

if [ $fails -gt 0 ]; then
  echo "--- pass.log"; cat "$tmp/pass.log"; echo "--- fail.log"; cat "$tmp/fail.log"
fi
echo "gpu-check on cpu: $fails failed"
[ $fails = 0 ]
