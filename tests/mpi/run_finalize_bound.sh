#!/usr/bin/env bash
# MPI_Finalize under a deadline (src/runtime/mpi_finalize.hpp) in the real front ends: with an
# MPI_Finalize that never returns (LD_PRELOAD of libbb_hang_finalize.so), `run --out` on 2
# ranks ends within BB_FINALIZE_TIMEOUT with its own exit code (0; 1 for a failed --check),
# a warning line (per rank that was still there) naming the MPICH 4.0 finalize deadlock, and every run complete
# in the results file; `calibrate` and gbench_pipeline end the same way. BB_FINALIZE_TIMEOUT=0
# (no bound) hangs: the same run is still there after 20 s.
# usage: run_finalize_bound.sh BUBBLEBENCH MPIEXEC SHIM GBENCH_PIPELINE [PYTHON]
BB=${1:?usage: $0 bubblebench mpiexec shim gbench_pipeline [python]}
MPIEXEC=${2:?}
SHIM=$(readlink -f "${3:?}")
GBENCH=${4:?}
PY=${5:-/usr/bin/python3}
# shellcheck source-path=SCRIPTDIR source=../check_lib.sh
. "$(dirname "$0")/../check_lib.sh"  # strict mode, $HERE, $tmp, check, finish

sweep=(--schedule "gpipe,1f1b" -M "4,8" --compute synthetic --t-f 1ms --t-b 1ms --t-w 1ms --iters 5)
want="warning: MPI_Finalize did not return in 3 s (BB_FINALIZE_TIMEOUT), the known MPICH 4.0 finalize deadlock across hosts; every output of the run is complete"

hung() {  # timeout, command... : under the shim, BB_FINALIZE_TIMEOUT=3 unless set
  local t=$1
  shift
  rm -f "$tmp"/out.* "$tmp"/err.txt
  local t0=$SECONDS
  BB_FINALIZE_TIMEOUT=${BB_FINALIZE_TIMEOUT:-3} LD_PRELOAD=$SHIM \
    timeout "$t" "$MPIEXEC" -n 2 "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"
  rc=$?
  took=$((SECONDS - t0))
}

# The warning line, for exit code C, from rank 0 or 1 or both: mpiexec (Hydra) kills the other
# rank once one has exited without PMI's finalize, sometimes before its own bound fires.
lines_ok() {  # C
  local n all
  n=$(grep -E '^bubblebench: rank [01]: ' "$tmp/err.txt" | grep -c -F -- "$want: exit $1, the run's own code")
  all=$(grep -c -F -- "MPI_Finalize did not return" "$tmp/err.txt")
  if [ "$n" -ge 1 ] && [ "$n" = "$all" ]; then return 0; fi
  echo "  $n of $all warning lines as expected:"
  cat "$tmp/err.txt"
  return 1
}

hung 60 "$BB" run "${sweep[@]}" --out "$tmp/r.h5"
check "run: exit 0 under a hung finalize (got $rc in $took s)" "$([ $rc = 0 ] && echo 0 || echo 1)"
lines_ok 0
check "run: the line naming the deadlock, with exit 0" $?
[ "$("$PY" "$HERE/check_results.py" keys "$tmp/r.h5" | wc -l)" = 4 ]
check "run: the results file holds all 4 runs, complete" $?
[ "$(grep -c -E '^(gpipe|1f1b) ' "$tmp/out.txt")" = 4 ]
check "run: the table has all 4 rows (stdout flushed before finalize)" $?

hung 60 "$BB" run --schedule 1f1b -M 4 --check --debug-perturb-grads 1
check "run --check, failing: the run's own exit 1 under a hung finalize (got $rc)" \
  "$([ $rc = 1 ] && echo 0 || echo 1)"
lines_ok 1
check "run --check, failing: the line with exit 1" $?

hung 60 "$BB" calibrate --pairs all --reps 3 --warmup 1 --max-bytes 1K
check "calibrate: exit 0 under a hung finalize (got $rc)" "$([ $rc = 0 ] && echo 0 || echo 1)"
lines_ok 0
check "calibrate: the line" $?

hung 60 "$GBENCH" --bb_schedules=1f1b --bb_M=4 --bb_iters=2 --bb_t=1ms
check "gbench_pipeline: exit 0 under a hung finalize (got $rc)" "$([ $rc = 0 ] && echo 0 || echo 1)"
lines_ok 0
check "gbench_pipeline: the line" $?

# Without the bound the same run hangs (what every front end did before).
BB_FINALIZE_TIMEOUT=0 hung 20 "$BB" run "${sweep[@]}"
check "BB_FINALIZE_TIMEOUT=0: unbounded, a hung finalize still hangs after 20 s (got $rc)" \
  "$([ $rc = 124 ] && echo 0 || echo 1)"

finish "finalize bound"
