#!/usr/bin/env bash
# The MPI transport's staged path (a backend's HostStaging: what the CUDA backend needs for
# device memory) on the CPU backend, without a GPU: BB_HOST_STAGING=always makes every message
# go through the CPU backend's host staging. Every schedule's --check must pass (loss and every
# gradient against the sequential reference) and every rank must say it staged.
# usage: run_staged.sh BUBBLEBENCH MPIEXEC P
BB=${1:?usage: $0 bubblebench mpiexec P}
MPIEXEC=${2:?}
P=${3:?}
. "$(dirname "$0")/../check_lib.sh"
run_or_exit env BB_HOST_STAGING=always timeout 300 "$MPIEXEC" -n "$P" "$BB" run --schedule all \
  -M "$P,$((2 * P)),$((4 * P))" -v 1,2 --recompute=both --check --hidden 16 --layers 1 \
  --mb-size 4 --iters 1 --warmup 1 --timeout 60 --format json
notes=$(grep -c 'BB_HOST_STAGING=always: every MPI message goes through host staging' "$tmp/err.txt")
if [ "$notes" != "$P" ]; then
  echo "FAIL: $notes ranks say they staged, expected $P:"
  cat "$tmp/err.txt"
  exit 1
fi
/usr/bin/python3 "$HERE/check_run_json.py" check "$tmp/out.json" --min-configs 8 || exit 1
echo "ok: every schedule's --check passes with every message staged ($P ranks)"
