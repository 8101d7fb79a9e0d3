#!/usr/bin/env bash
# Every trace of every schedule passes tests/trace/check_trace.py (nested or separate lanes,
# args on every slice, flows that pair up, a memory counter track per rank with the five
# kinds): `sim --timeline` of all schedules (v = 1 and 2,
# with and without message latency), and `run --trace` under mpiexec -n 2 (all schedules,
# synthetic compute). Also: several configurations give one file each, said in one note.
# usage: traces.sh BUBBLEBENCH MPIEXEC [PYTHON]
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 bubblebench mpiexec [python]" >&2; exit 2; }
BB=$1 MPIEXEC=$2 PY=${3:-/usr/bin/python3}
CHECKER="$(cd "$(dirname "$0")" && pwd)/check_trace.py"
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
fails=0
check() {
  if [ "$2" = 0 ]; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi
}

for lat in 0 3; do
  dir="$tmp/sim_$lat"
  mkdir -p "$dir"
  timeout 120 "$BB" sim -s all -P 4 -M 8 -v 1,2 --latency "$lat" --msg-bytes 4096 \
    --timeline "$dir/t.json" >/dev/null 2>"$tmp/err"
  check "sim --timeline, every schedule, latency $lat" $?
  n=$(ls "$dir" | wc -l)
  # One note says that (and how) the files are named.
  [ "$n" -ge 9 ] && [ ! -e "$dir/t.json" ] &&
    [ "$(grep -c '^note: --timeline' "$tmp/err")" = 1 ] &&
    grep -q "configurations, one trace each: $dir/t_<schedule>_P<P>_M<M>_v<v>.json" "$tmp/err"
  check "latency $lat: $n files t_<config>.json, one note ($(grep timeline "$tmp/err"))" $?
  "$PY" "$CHECKER" --flows --memory "$dir"/*.json
  check "sim traces, latency $lat, pass the checker (a memory track per rank)" $?
done
# With latency, messages in flight overlap: they get lanes of their own. One simulated time
# unit is one µs: the last slice ends at the makespan sim reports.
timeout 60 "$BB" sim -s interleaved -P 4 -M 8 -v 2 --latency 3 --msg-bytes 4096 --format json \
  >"$tmp/il.json"
"$PY" - "$tmp/sim_3/t_interleaved_P4_M8_v2.json" "$tmp/il.json" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
makespan = json.load(open(sys.argv[2]))[0]["makespan"]
names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
assert {"compute", "wait", "send 0", "recv 0", "send 1", "recv 1"} <= names, names
x = [e for e in ev if e["ph"] == "X"]
assert {"wait", "send", "recv"} <= {e["cat"] for e in x}
assert all(e["args"]["stage"] >= 0 for e in x)
sends = [e for e in x if e["cat"] == "send"]
assert sends and all(e["dur"] == 3 and e["args"]["bytes"] == 4096 for e in sends), sends[:2]
end = max(e["ts"] + e["dur"] for e in x if e["cat"] not in ("send", "recv"))
assert abs(end - makespan) < 1e-9, (end, makespan)
PY
check "interleaved with latency 3: messages in flight on lanes of their own, 3 us, 4096 bytes" $?

# run --trace, every schedule at P = 2 (small, synthetic compute).
timeout 300 "$MPIEXEC" -n 2 "$BB" run --schedule all -M 4 -v 2 --compute synthetic \
  --t-f 200us --t-b 200us --t-w 200us --iters 1 --warmup 0 --no-calibrate --timeout 60 \
  --trace "$tmp/run" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "run --trace, every schedule (rc=$rc: $(tail -c 300 "$tmp/err"))" $rc
n=$(ls "$tmp/run" 2>/dev/null | wc -l)
[ "$n" -ge 9 ]; check "run --trace: $n traces" $?
"$PY" "$CHECKER" --flows --memory "$tmp/run"/*.json
check "run traces pass the checker (a memory track per rank)" $?

[ "$fails" = 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all trace checks passed"
