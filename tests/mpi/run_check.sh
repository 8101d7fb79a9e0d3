#!/usr/bin/env bash
# `--check` end to end: one MPI launch per (schedule, P) sweeping M in {P, 2P, 4P}, v in {1, 2}
# and recompute off/on; every configuration the schedule accepts must match the sequential
# reference (fp32, rel. error <= 1e-5), and its peak activations per rank must equal
# bb::peak_activations exactly.
# BB_CHECK_M, when set, replaces that M list (e.g. interleaved off multiples of P), BB_CHECK_V
# the v list (e.g. one chunk count for a --partition).
# usage: run_check.sh BUBBLEBENCH MPIEXEC SCHEDULE P [MORE RUN OPTIONS, e.g. --stage transformer]
BB=${1:?usage: $0 bubblebench mpiexec schedule P}
MPIEXEC=${2:?}
S=${3:?}
P=${4:?}
shift 4
. "$(dirname "$0")/../check_lib.sh"  # strict mode, $HERE, $tmp, check, finish, run_or_exit
# One block per chunk, unless the options fix the model's blocks (--model-layers, --model).
layers=(--layers 1)
for a in "$@"; do case $a in --model-layers* | --model) layers=() ;; esac; done
run_or_exit timeout 300 "$MPIEXEC" -n "$P" "$BB" run --schedule "$S" -M "${BB_CHECK_M:-$P,$((2 * P)),$((4 * P))}" -v "${BB_CHECK_V:-1,2}" \
  --recompute=both --check --hidden 16 "${layers[@]}" --mb-size 4 --iters 1 --warmup 0 \
  --timeout 60 --format json "$@"
/usr/bin/python3 "$HERE/check_run_json.py" check "$tmp/out.json" --min-configs 2 &&
  /usr/bin/python3 "$HERE/check_run_json.py" peaks "$tmp/out.json" --min-configs 2
