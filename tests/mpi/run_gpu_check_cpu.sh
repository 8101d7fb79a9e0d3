#!/usr/bin/env bash
# tools/gpu-check.sh's plumbing on the CPU backend (what a GPU session runs, minus the GPU):
# the --check steps (every schedule on transformer stages with the ends, fp32 and bf16) and the
# synthetic sweep whose every row is compared with the simulator and its attribution.
# Behaviour only: with the tolerances at 1 all 8 rows are read and pass; with --bubble-tol 0
# the comparison fails (a measured bubble never equals the simulated one exactly) and so does
# the script; a step that would start past --budget is SKIP.
# usage: run_gpu_check_cpu.sh BINDIR MPIEXEC
BINDIR=${1:?usage: $0 bindir mpiexec}
MPIEXEC=${2:?}
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
script="$here/../../tools/gpu-check.sh"
. "$(dirname "$0")/../check_lib.sh"  # strict mode, $HERE, $tmp, check, finish, run_or_exit

timeout 300 bash "$script" --backend cpu --bindir "$BINDIR" --mpiexec "$MPIEXEC" \
  --only check,synthetic --bubble-tol 1 --resid-tol 1 --timeout 120 --out "$tmp/pass" \
  >"$tmp/pass.log" 2>&1
rc=$?
check "passes (exit $rc)" "$([ $rc = 0 ] && echo 0 || echo 1)"
# Every schedule of the registry accepts P=2 M=4: one configuration each without and with
# recompute.
n=$((2 * $(/usr/bin/python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' \
  "$here/../../analysis/bbanalysis/schedules.json")))
[ "$(grep -cE "^PASS .* check all schedules tiny (fp32|bf16) P=2 mpi .*$n of $n configurations passed" \
  "$tmp/pass/summary.txt")" = 2 ]
check "the fp32 and bf16 check steps passed, $n configurations each" $?
grep -q '^PASS .*synthetic P=2 mpi .*8 of 8 rows' "$tmp/pass/summary.txt"
check "synthetic comparison read 8 of 8 rows" $?

timeout 300 bash "$script" --backend cpu --bindir "$BINDIR" --mpiexec "$MPIEXEC" \
  --only synthetic --bubble-tol 0 --timeout 120 --out "$tmp/fail" >"$tmp/fail.log" 2>&1
rc=$?
check "tolerance 0 fails the script (exit $rc)" "$([ $rc = 1 ] && echo 0 || echo 1)"
grep -q '^FAIL .*synthetic P=2' "$tmp/fail/summary.txt"
check "tolerance 0: the comparison is FAIL" $?
grep -q 'OVER' "$tmp/fail/synthetic-rows.log"
check "tolerance 0: rows marked OVER" $?

# A step past the budget is skipped, not run: the script still ends with its table.
timeout 300 bash "$script" --backend cpu --bindir "$BINDIR" --mpiexec "$MPIEXEC" \
  --only check --budget 10 --out "$tmp/budget" >"$tmp/budget.log" 2>&1
rc=$?
grep -q '^SKIP .*out of budget' "$tmp/budget/summary.txt"
check "a step past --budget is SKIP (exit $rc)" $?

bash "$script" --only bogus >"$tmp/bad.log" 2>&1
rc=$?
check "unknown --only step: exit 2 (got $rc)" "$([ $rc = 2 ] && echo 0 || echo 1)"

if [ $fails -gt 0 ]; then
  echo "--- pass.log"; cat "$tmp/pass.log"; echo "--- fail.log"; cat "$tmp/fail.log"
fi
echo "gpu-check on cpu: $fails failed"
[ $fails = 0 ]
