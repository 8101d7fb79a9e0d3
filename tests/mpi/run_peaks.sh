#!/usr/bin/env bash
# Peak live activations per rank, from the runtime's own accounting, equal
# bb::peak_activations(schedule) exactly (micro-batch-stage units), for every schedule the
# sweep accepts; zero-time synthetic compute, recompute off and on.
# usage: run_peaks.sh BUBBLEBENCH MPIEXEC P
BB=${1:?usage: $0 bubblebench mpiexec P}
MPIEXEC=${2:?}
P=${3:?}
. "$(dirname "$0")/../check_lib.sh"
run_or_exit timeout 300 "$MPIEXEC" -n "$P" "$BB" run --schedule all \
  -M "$P,$((2 * P)),$((2 * P + 1)),$((4 * P))" -v 1,2,3 --recompute=both --compute synthetic \
  --t-f 0 --t-b 0 --t-w 0 --hidden 16 --mb-size 4 --warmup 0 --iters 1 --timeout 60 --format json
/usr/bin/python3 "$HERE/check_run_json.py" peaks "$tmp/out.json" --min-configs 10
