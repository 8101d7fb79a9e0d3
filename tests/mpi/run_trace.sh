#!/usr/bin/env bash
# `run --trace DIR`: DIR (nested, missing) is created; one Chrome-trace JSON per run named
# <run_key>.json, with one compute slice (thread "compute") per compute action and one slice
# (threads "send K" / "recv K") per SEND/RECV of each rank's lowered list (the last timed
# iteration), waits on thread "wait"; and the file passes tests/trace/check_trace.py.
# usage: run_trace.sh BUBBLEBENCH MPIEXEC [PYTHON]
BB=${1:?usage: $0 bubblebench mpiexec [python]}
MPIEXEC=${2:?}
PY=${3:-/usr/bin/python3}
. "$(dirname "$0")/../check_lib.sh"  # strict mode, $HERE, $tmp, check, finish, run_or_exit
mkdir -p "$tmp/lowered"
for s in 1f1b zb-h1; do
  "$BB" show --schedule "$s" -P 2 -M 4 --lowered --format csv >"$tmp/lowered/${s}_M4.csv" ||
    { echo "FAIL: show --lowered $s"; exit 1; }
done
run_or_exit timeout 300 "$MPIEXEC" -n 2 "$BB" run --schedule 1f1b,zb-h1 -M 4 --compute synthetic \
  --t-f 1ms --t-b 1ms --t-w 1ms --iters 2 --timeout 60 --trace "$tmp/traces/a/b"
ls "$tmp/traces/a/b"
"$PY" "$HERE/check_results.py" trace "$tmp/traces/a/b" --lowered "$tmp/lowered" --runs 2 || exit 1
"$PY" "$HERE/../trace/check_trace.py" --flows "$tmp/traces/a/b"/*.json
