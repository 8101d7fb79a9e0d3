#!/usr/bin/env bash
# A fixed model (--model-layers, docs/transformer.md): one sweep over schedules whose routes
# have 2 and 2P chunks (1f1b, interleaved v=2, zb-v, dualpipev) at --model-layers 8 with the
# model's ends; every run must hold the same parameter count, give the same loss at step 0
# and pass --check.
# usage: run_fixed_model.sh BUBBLEBENCH MPIEXEC P [MORE RUN OPTIONS]
BB=${1:?usage: $0 bubblebench mpiexec P}
MPIEXEC=${2:?}
P=${3:?}
shift 3
. "$(dirname "$0")/../check_lib.sh"  # strict mode, $HERE, $tmp, check, finish, run_or_exit
S=1f1b,interleaved,zb-v,dualpipev
run_or_exit timeout 300 "$MPIEXEC" -n "$P" "$BB" run --schedule $S -M $((2 * P)) -v 2 --check \
  --stage transformer --hidden 16 --heads 4 --seq 8 --causal --vocab 50 --mb-size 2 \
  --model-layers 8 --iters 1 --warmup 0 --timeout 60 --format json "$@"
/usr/bin/python3 "$HERE/check_run_json.py" check "$tmp/out.json" --min-configs 4 &&
  /usr/bin/python3 "$HERE/check_run_json.py" same-model "$tmp/out.json" --schedules $S
