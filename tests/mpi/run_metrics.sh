#!/usr/bin/env bash
# The study's metrics in the run record (docs/run-record.md, "Metrics") present and sane for
# MLP and transformer stages (with the model's ends), real and synthetic compute, --sync
# barrier and none (check_run_json.py metrics).
# usage: run_metrics.sh BUBBLEBENCH MPIEXEC P
BB=${1:?usage: $0 bubblebench mpiexec P}
MPIEXEC=${2:?}
P=${3:?}
. "$(dirname "$0")/../check_lib.sh"
common=(--warmup 0 --iters 2 --timeout 60 --no-calibrate --format json)
run_or_exit timeout 300 "$MPIEXEC" -n "$P" "$BB" run --schedule gpipe,1f1b,zb-h1 -M "$P,$((2 * P))" \
  --hidden 32 --mb-size 4 --layers 2 "${common[@]}"
/usr/bin/python3 "$HERE/check_run_json.py" metrics "$tmp/out.json" --min-configs 6
check "mlp, barrier" $?
run_or_exit timeout 300 "$MPIEXEC" -n "$P" "$BB" run --schedule 1f1b,interleaved -M "$((2 * P))" \
  -v 2 --stage transformer --hidden 16 --heads 2 --seq 8 --vocab 50 --mb-size 2 --sync none \
  --iters 3 --warmup 0 --timeout 60 --no-calibrate --format json
/usr/bin/python3 "$HERE/check_run_json.py" metrics "$tmp/out.json" --min-configs 2
check "transformer with ends, sync none" $?
# The LM head makes the last stage's FLOPs larger than the first's (1F1B: one chunk a rank).
/usr/bin/python3 - "$tmp/out.json" <<'PY'
import json, sys
r = [x for x in json.load(open(sys.argv[1])) if x["schedule"] == "1f1b"][0]
sys.exit(0 if r["rank_flops"][-1] > r["rank_flops"][0] else 1)
PY
check "the LM head's FLOPs on the last rank" $?
run_or_exit timeout 300 "$MPIEXEC" -n "$P" "$BB" run --schedule 1f1b -M "$P" --compute synthetic \
  --t-f 1ms --t-b 1ms "${common[@]}"
/usr/bin/python3 "$HERE/check_run_json.py" metrics "$tmp/out.json" --min-configs 1
check "synthetic compute" $?
finish "run_metrics"
