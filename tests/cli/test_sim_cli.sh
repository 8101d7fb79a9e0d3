#!/usr/bin/env bash
# The sim / model / validate / show commands: the done-when figures, exit codes, and one-line
# errors for configurations a schedule rejects (never a hang, never a crash).
set -uo pipefail
BB=${1:?usage: $0 path/to/bubblebench}
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
pass=0
check() {  # name, condition result
  if [ "$2" = 0 ]; then pass=$((pass + 1)); else echo "FAIL: $1"; fails=$((fails + 1)); fi
}

# Done-when 1: gpipe and 1f1b at P=4, M=8, F=1, B=2.
timeout 60 "$BB" sim --schedule gpipe,1f1b -P 4 -M 8 --t-f 1 --t-b 2 --format json >"$tmp/s.json"
check "sim json exit" $?
$PY - "$tmp/s.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
assert [r["schedule"] for r in rows] == ["gpipe", "1f1b"], rows
for r in rows:
    assert r["makespan"] == 33 and r["idle_total"] == 36, r
    assert abs(r["bubble_fraction"] - 0.2727) < 5e-5, r
    for k in ("bubble_ratio", "bubble_time", "period", "bubble_fraction_steady", "idle_total_steady",
              "bubble_ratio_steady", "bubble_time_steady", "peak_activations", "p2p_messages"):
        assert k in r, k
    assert r["model"]["applies"] and r["model"]["makespan"] == 33, r["model"]
    assert len(r["peak_activations"]) == 4
PY
check "done-when figures" $?

# The naive schedule reports 1 - 1/P.
out=$(timeout 60 "$BB" sim -s naive -P 4 -M 8 --format csv)
check "naive csv exit" $?
echo "$out" | grep -q '^naive,4,8,1,96,288,0.75,' ; check "naive bubble 1-1/P" $?

# Rejected configurations: exit 2, exactly one line on stderr naming the schedule.
reject() {  # expected-substring, args...
  local want=$1; shift
  timeout 30 "$BB" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" = 2 ] || { echo "  rc=$rc for: $*"; cat "$tmp/err"; }
  [ "$(wc -l <"$tmp/err")" = 1 ] || { echo "  stderr lines: $(wc -l <"$tmp/err") for: $*"; cat "$tmp/err"; }
  grep -q -- "$want" "$tmp/err" || { echo "  missing '$want' in: $(cat "$tmp/err")"; return 1; }
  [ "$rc" = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ]
}
reject "dualpipe: P must be even" sim -s dualpipe -P 3 -M 8; check "dualpipe odd P" $?
reject "interleaved: needs v >= 2" sim -s interleaved -P 4 -M 8 -v 1; check "interleaved v=1" $?
reject "interleaved: needs M a multiple of P" sim -s interleaved -P 4 -M 6 -v 2; check "interleaved M%P" $?
reject "dualpipev: M must be >= 2P" model -s dualpipev -P 4 -M 4; check "dualpipev small M" $?
reject "unknown schedule 'foo'" sim -s foo -P 4 -M 8; check "unknown schedule" $?
reject "-M: '0'" sim -s 1f1b -P 4 -M 0; check "M=0" $?
reject "-M: '4:2:1'" sim -s 1f1b -P 4 -M 4:2:1; check "bad range" $?
reject "--t-f" sim -s 1f1b -P 4 -M 8 --t-f -1; check "negative time" $?
reject "error" sim -s 1f1b -P 4 -M 8 --no-such-flag; check "unknown flag" $?
reject "cost list" sim -s 1f1b -P 4 -M 8 --t-f 1,2,3; check "cost list length" $?

# In a sweep, rejected combinations are skipped with one line each; the rest run.
timeout 60 "$BB" sim -s dualpipe,1f1b -P 4 -M 6,8 --format csv >"$tmp/out" 2>"$tmp/err"
check "sweep with skips exits 0" $?
grep -q "skip: dualpipe: M must be even and >= 2P" "$tmp/err"; check "skip line" $?
[ "$(grep -c '^1f1b' "$tmp/out")" = 2 ] && [ "$(grep -c '^dualpipe' "$tmp/out")" = 1 ]; check "sweep rows" $?

# validate / show, and a CSV round trip through the CLI.
timeout 60 "$BB" validate -s zb-v -P 4 -M 8 | grep -q "^ok: zb-v P=4 M=8 v=2"; check "validate ok" $?
timeout 60 "$BB" show -s dualpipev -P 4 -M 8 --lowered --format csv >"$tmp/dpv.csv"; check "show csv" $?
timeout 60 "$BB" validate --csv "$tmp/dpv.csv" | grep -q "^ok: dualpipev"; check "validate lowered csv" $?
printf '# P=2\n0F0,0BW0,0F1,0BW1\n1F1,1BW1,1F0,1BW0\n' >"$tmp/bad.csv"
timeout 30 "$BB" validate --csv "$tmp/bad.csv" >"$tmp/out" 2>&1
[ $? = 1 ] && grep -q "cyclic wait" "$tmp/out"; check "cyclic CSV exit 1" $?
reject "cannot read schedule CSV" validate --csv "$tmp/missing.csv"; check "missing CSV exit 2" $?
printf '0F0,0ZZ1\n' >"$tmp/garbage.csv"
reject "CSV line 1" sim -s "csv:$tmp/garbage.csv"; check "malformed CSV exit 2" $?
timeout 60 "$BB" sim -s "csv:$tmp/dpv.csv" -P 4 --format json >"$tmp/c.json"; check "sim csv" $?

# --timeline writes a Chrome trace with one slice per compute action.
timeout 60 "$BB" sim -s 1f1b -P 4 -M 8 --timeline "$tmp/t.json" >/dev/null; check "timeline" $?
$PY - "$tmp/t.json" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
x = [e for e in ev if e["ph"] == "X" and e["tid"] == 0]
assert len(x) == 4 * 8 * 2, len(x)
assert {e["cat"] for e in x} == {"F", "BW"}
PY
check "timeline slices" $?

echo "$pass passed, $fails failed"
[ "$fails" = 0 ]
