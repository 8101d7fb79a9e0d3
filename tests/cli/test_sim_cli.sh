#!/usr/bin/env bash
# The sim / model / validate / show commands: the done-when figures, exit codes, and one-line
# errors for configurations a schedule rejects (never a hang, never a crash).
BB=${1:?usage: $0 path/to/bubblebench}
PY=/usr/bin/python3
# shellcheck source-path=SCRIPTDIR source=../check_lib.sh
. "$(dirname "$0")/../check_lib.sh"  # $tmp, check NAME RC, finish

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
refused "dualpipe: P must be even" sim -s dualpipe -P 3 -M 8; check "dualpipe odd P" $?
refused "interleaved: needs v >= 2" sim -s interleaved -P 4 -M 8 -v 1; check "interleaved v=1" $?
refused "interleaved: M must split into max(1, M/P) equal rounds" sim -s interleaved -P 4 -M 9 -v 2; check "interleaved M in rounds" $?
refused "dualpipev: M must be >= 2P" model -s dualpipev -P 4 -M 4; check "dualpipev small M" $?
refused "unknown schedule 'foo'" sim -s foo -P 4 -M 8; check "unknown schedule" $?
refused "-M: '0'" sim -s 1f1b -P 4 -M 0; check "M=0" $?
refused "-M: '4:2:1'" sim -s 1f1b -P 4 -M 4:2:1; check "bad range" $?
refused "--t-f" sim -s 1f1b -P 4 -M 8 --t-f -1; check "negative time" $?
refused "error" sim -s 1f1b -P 4 -M 8 --no-such-flag; check "unknown flag" $?
refused "cost list" sim -s 1f1b -P 4 -M 8 --t-f 1,2,3; check "cost list length" $?

# In a sweep, rejected combinations are skipped with one line each; the rest run.
timeout 60 "$BB" sim -s dualpipe,1f1b -P 4 -M 6,8 --format csv >"$tmp/out" 2>"$tmp/err"
check "sweep with skips exits 0" $?
grep -q "skip: dualpipe: M must be even and >= 2P" "$tmp/err"; check "skip line" $?
[ "$(grep -c '^1f1b' "$tmp/out")" = 2 ] && [ "$(grep -c '^dualpipe' "$tmp/out")" = 1 ]; check "sweep rows" $?

# validate / show, and a CSV round trip through the CLI.
timeout 60 "$BB" validate -s zb-v -P 4 -M 8 | grep -q "^ok: zb-v P=4 M=8 v=2"; check "validate ok" $?
timeout 60 "$BB" validate -s zb-v -P 4 -M 8 --format json | /usr/bin/python3 -c 'import json, sys
j = json.load(sys.stdin)
sys.exit(not (j["ok"] is True and (j["schedule"], j["P"], j["M"], j["v"]) == ("zb-v", 4, 8, 2)
              and j["compute_actions"] == 192 and j["send_recv_actions"] > 0))'
check "validate --format json" $?
timeout 60 "$BB" show -s dualpipev -P 4 -M 8 --lowered --format csv >"$tmp/dpv.csv"; check "show csv" $?
timeout 60 "$BB" validate --csv "$tmp/dpv.csv" | grep -q "^ok: dualpipev"; check "validate lowered csv" $?
printf '# P=2\n0F0,0BW0,0F1,0BW1\n1F1,1BW1,1F0,1BW0\n' >"$tmp/bad.csv"
timeout 30 "$BB" validate --csv "$tmp/bad.csv" >"$tmp/out" 2>&1
[ $? = 1 ] && grep -q "cyclic wait" "$tmp/out"; check "cyclic CSV exit 1" $?
refused "cannot read schedule CSV" validate --csv "$tmp/missing.csv"; check "missing CSV exit 2" $?
printf '0F0,0ZZ1\n' >"$tmp/garbage.csv"
refused "CSV line 1" sim -s "csv:$tmp/garbage.csv"; check "malformed CSV exit 2" $?
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

# A lowered CSV gets a dry run before anything uses it as correct: one that deadlocks (rank 0
# receives a gradient before it sends its first activation) makes sim and model exit 1 with the
# dry run's message; validate reports it; show still prints it.
timeout 60 "$BB" show -s 1f1b -P 4 -M 8 --lowered --format csv >"$tmp/low.csv"
$PY - "$tmp/low.csv" "$tmp/dead.csv" <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines()
rank0 = next(i for i, l in enumerate(lines) if not l.startswith("#"))
toks = lines[rank0].split(",")
toks.remove("0RECV_B0")
lines[rank0] = ",".join(["0RECV_B0"] + toks)
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
PY
for cmd in sim model; do
  timeout 30 "$BB" $cmd -s "csv:$tmp/dead.csv" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ "$rc" = 1 ] && grep -q "dry run" "$tmp/err" && grep -q "deadlock" "$tmp/err" && [ ! -s "$tmp/out" ]
  r=$?
  check "$cmd refuses a lowered CSV that deadlocks (rc=$rc: $(head -c 200 "$tmp/err"))" $r
done
timeout 30 "$BB" validate --csv "$tmp/dead.csv" >"$tmp/out" 2>&1
[ $? = 1 ] && grep -q "deadlock" "$tmp/out"; check "validate: lowered CSV deadlock" $?
timeout 30 "$BB" show --csv "$tmp/dead.csv" >/dev/null; check "show prints a deadlocking CSV" $?
timeout 30 "$BB" sim -s "csv:$tmp/low.csv" --format csv | grep -q "^csv:.*,4,8,1,33,"
check "sim of a good lowered CSV" $?

# Names that are not UTF-8 (a CSV's name header, a CSV's file name) come out replaced in JSON
# and in the timeline, never as an internal error or an empty file.
printf '# name=\xff\xfe\n' >"$tmp/u8.csv"
grep -v '^# name' "$tmp/low.csv" >>"$tmp/u8.csv"
cp "$tmp/u8.csv" "$tmp/f"$'\xff'".csv"
for csv in "$tmp/u8.csv" "$tmp/f"$'\xff'".csv"; do
  rm -f "$tmp/u8.json"
  timeout 30 "$BB" sim -s "csv:$csv" --format json --timeline "$tmp/u8.json" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ "$rc" = 0 ] && [ ! -s "$tmp/err" ] && $PY -c 'import json, sys
rows = json.load(open(sys.argv[1])); assert rows[0]["makespan"] == 33, rows
assert json.load(open(sys.argv[2]))["traceEvents"]' "$tmp/out" "$tmp/u8.json"
  r=$?
  check "non-UTF-8 name in $(basename "$csv" | od -An -c | tr -s ' ') (rc=$rc: $(head -c 200 "$tmp/err"))" $r
done

# Output that cannot be written is an I/O error: exit 4, one line.
if [ -w /dev/full ]; then
  for args in "show -s 1f1b -P 4 -M 8 --format csv" "sim -s 1f1b -P 4 -M 8 --format json" \
    "model -s 1f1b -P 4 -M 8" "validate -s 1f1b -P 4 -M 8" "sim -s 1f1b -P 4 -M 8:2048:x2"; do
    # shellcheck disable=SC2086
    timeout 30 "$BB" $args >/dev/full 2>"$tmp/err"
    rc=$?
    [ "$rc" = 4 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "I/O error" "$tmp/err"
    r=$?
    check "$args > /dev/full: exit 4, one line (rc=$rc: $(head -c 200 "$tmp/err"))" $r
  done
fi

# Numbers: CSV carries every value exactly (integers as integers, others round-trip); the table
# prints integers exactly.
out=$(timeout 60 "$BB" sim -s interleaved -P 16 -M 64 -v 256 --format csv)
echo "$out" | tail -1 | grep -q ',524160$'; check "csv p2p_messages exact" $?
out=$(timeout 60 "$BB" model -s 1f1b -P 4 -M 12345 --format csv)
echo "$out" | grep -q '^1f1b,4,12345,1,37044,'; check "csv M and makespan exact" $?
out=$(timeout 60 "$BB" model -s 1f1b -P 4 -M 12345)
echo "$out" | grep -Eq '^1f1b +4 +12345 +1 +37044 '; check "table integers exact" $?
timeout 60 "$BB" sim -s gpipe,interleaved,zb-v -P 4 -M 8,12 -v 2 --t-f 1.1 --t-b 2.3 --t-w 0.7 \
  --format csv >"$tmp/n.csv" 2>/dev/null
timeout 60 "$BB" sim -s gpipe,interleaved,zb-v -P 4 -M 8,12 -v 2 --t-f 1.1 --t-b 2.3 --t-w 0.7 \
  --format json >"$tmp/n.json" 2>/dev/null
$PY - "$tmp/n.csv" "$tmp/n.json" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
js = json.load(open(sys.argv[2]))
assert len(rows) == len(js) == 6, (len(rows), len(js))
for r, j in zip(rows, js):
    for k in ("M", "makespan", "idle_total", "bubble_fraction", "bubble_time", "period",
              "bubble_fraction_steady", "p2p_messages"):
        assert float(r[k]) == j[k], (k, r[k], j[k])
    mb = r["model_bubble_fraction"]
    assert (mb == "n/a") != j["model"]["applies"], (mb, j["model"])
    assert mb == "n/a" or float(mb) == j["model"]["bubble_fraction"], (mb, j["model"])
PY
check "csv round-trips the JSON values" $?

# Every numeric flag is finite and in range; results that overflow are refused (exit 2).
for f in "--latency nan" "--latency inf" "--latency -1" "--t-fb inf" "--t-fb nan" "--t-fb -5" \
  "--act-bytes inf" "--bandwidth nan" "--bandwidth inf" "--msg-bytes nan" "--msg-bytes -3" \
  "--t-w inf" "--steps 1"; do
  # shellcheck disable=SC2086
  refused "${f%% *}" sim -s 1f1b -P 4 -M 8 $f; check "sim $f" $?
done
refused "--latency" model -s 1f1b -P 4 -M 8 --latency nan; check "model --latency nan" $?
refused "not finite" sim -s 1f1b -P 4 -M 8 --t-f 1e308 --t-b 1e308; check "sim overflow" $?
refused "not finite" model -s 1f1b -P 4 -M 8 --t-f 1e308 --t-b 1e308; check "model overflow" $?

# Per-chunk costs: the same count check in model as in sim; uneven stages have no closed form.
refused "cost list" model -s gpipe -P 4 -M 8 --t-f 1,2,3,4,5; check "model cost list length" $?
refused "--t-f" sim -s gpipe -P 4 -M 8 --t-f 1,; check "sim --t-f 1," $?
refused "--t-b" model -s gpipe -P 4 -M 8 --t-b ,2; check "model --t-b ,2" $?
for cmd in sim model; do
  timeout 30 "$BB" $cmd -s gpipe,interleaved -P 4 -M 8 -v 2 --t-f 1,1,1,10 --format json \
    >"$tmp/out" 2>"$tmp/err"
  # interleaved has 8 chunks: the 4-value list does not fit it.
  [ $? = 2 ] && grep -q "cost list" "$tmp/err"; check "$cmd: per-chunk list fits one schedule only" $?
  # Uneven stages, and a link time: the forms assume uniform stages and zero communication
  # cost (gpipe P=4 M=8 with --latency 0.5 simulates 36, the form said 33).
  for case in "per-chunk|-|--t-f 1,1,1,10" "communication|36|--t-b 1 --t-w 1 --latency 0.5"; do
    IFS='|' read -r word span flags <<<"$case"
    # shellcheck disable=SC2086  # $flags is a list of arguments
    timeout 30 "$BB" $cmd -s gpipe -P 4 -M 8 $flags --format json >"$tmp/out"
    check "$cmd $flags: exit 0" $?
    $PY - "$tmp/out" "$cmd" "$word" "$span" <<'PY'
import json, sys
_, path, cmd, word, span = sys.argv
r = json.load(open(path))[0]
m = r["model"] if cmd == "sim" else r
assert m["applies"] is False and word in m["reason"], m
assert "makespan" not in m, m
if cmd == "sim" and span != "-":
    assert r["makespan"] == float(span), r["makespan"]
PY
    check "$cmd $flags: no closed form ($word)" $?
  done
done
timeout 30 "$BB" model -s interleaved -P 4 -M 8 -v 2 --t-f 0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5 \
  --t-b 1 --format json >"$tmp/a.json"
timeout 30 "$BB" model -s interleaved -P 4 -M 8 -v 2 --t-f 1 --t-b 1 --format json >"$tmp/b.json"
$PY - "$tmp/a.json" "$tmp/b.json" <<'PY'
import json, sys
a, b = (json.load(open(p))[0] for p in sys.argv[1:])
assert a["applies"] and a["makespan"] == b["makespan"], (a, b)
PY
check "equal per-chunk costs are one stage's cost" $?

# model's JSON has p2p_messages, the same count as sim's.
timeout 60 "$BB" model -s all -P 4 -M 8,16 -v 2 --format json >"$tmp/m.json" 2>/dev/null
timeout 60 "$BB" sim -s all -P 4 -M 8,16 -v 2 --format json >"$tmp/s.json" 2>/dev/null
$PY - "$tmp/m.json" "$tmp/s.json" <<'PY'
import json, sys
m, s = (json.load(open(p)) for p in sys.argv[1:])
assert len(m) == len(s) > 10
for a, b in zip(m, s):
    assert a["p2p_messages"] == b["p2p_messages"] > 0, (a["schedule"], a.get("p2p_messages"))
PY
check "model p2p_messages" $?

# Bounded memory. Each check is one Python process: RUSAGE_CHILDREN gives the largest peak of
# its children so far, so each runs its baseline first.
cat >"$tmp/peak.py" <<'PY'
import os, resource, subprocess
# Under ASan freed memory waits in a 256 MB quarantine before reuse: without it the peak shows
# what the run holds, not what ASan holds back (other builds ignore ASAN_OPTIONS).
ENV = dict(os.environ)
ENV["ASAN_OPTIONS"] = ":".join(filter(None, [ENV.get("ASAN_OPTIONS"), "quarantine_size_mb=0"]))
def run_peak_mb(argv, timeout):
    """Runs argv (exit 0 expected): its stdout, and the largest child's peak RSS so far in MB."""
    r = subprocess.run(argv, stdout=subprocess.PIPE, timeout=timeout, env=ENV)
    assert r.returncode == 0, (argv, r.returncode)
    return r.stdout, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
PY
# Large sweeps: memory does not grow with the sweep; an absurd one is refused up front.
PYTHONPATH="$tmp" $PY - "$BB" <<'PY'
import sys
from peak import run_peak_mb
def model(m_list):
    out, peak = run_peak_mb([sys.argv[1], "model", "-s", "1f1b", "-P", "4", "-M", m_list,
                             "--format", "csv"], 100)
    return out.count(b"\n"), peak
# The baseline holds what the binary loads (with CUDA found, cuBLAS alone is ~200 MB).
_, base = model("1")
lines, peak = model("1:4000:1")
assert lines == 4001, lines
assert peak - base < 100, (base, peak)  # keeping every schedule took 560 MB more
PY
check "a sweep of 4000 configurations in bounded memory" $?
# A large timeline is written event by event: 1F1B at P=64, M=2048 (262 144 slices, 22 MB of
# JSON) took 470 MB more than the same sim without it while the whole document was one tree.
PYTHONPATH="$tmp" $PY - "$BB" "$tmp/big.json" <<'PY'
import json, sys
from peak import run_peak_mb
sim = [sys.argv[1], "sim", "-s", "1f1b", "-P", "64", "-M", "2048"]
_, base = run_peak_mb(sim, 300)
_, peak = run_peak_mb(sim + ["--timeline", sys.argv[2]], 300)
assert peak - base < 100, (base, peak)
doc = json.load(open(sys.argv[2]))
slices = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["tid"] == 0]
assert len(slices) == 2 * 64 * 2048, len(slices)
PY
check "a timeline of 262 144 slices in bounded memory" $?
refused "compute actions" model -s 1f1b -P 4 -M 1:100000:1; check "absurd sweep refused" $?
refused "compute actions" sim -s all -P 64 -M 1:65536:1 -v 1:64:1; check "absurd sweep refused (sim)" $?

# -v for schedules that take none: they run once, with one note each.
timeout 30 "$BB" sim --schedule 1f1b,gpipe -P 4 -M 8 -v 1,2 --format csv >"$tmp/out" 2>"$tmp/err"
check "-v note exit 0" $?
[ "$(wc -l <"$tmp/out")" = 3 ] && [ "$(wc -l <"$tmp/err")" = 2 ] &&
  grep -q "^note: 1f1b: -v does not apply.*v=1" "$tmp/err" &&
  grep -q "^note: gpipe: -v does not apply.*v=1" "$tmp/err"
r=$?
check "-v note: one line per schedule ($(cat "$tmp/err"))" $r
timeout 30 "$BB" sim --schedule 1f1b -P 4 -M 8 >/dev/null 2>"$tmp/err"
[ ! -s "$tmp/err" ]; check "no note without -v" $?

# Skip lines name the configuration and are not repeated.
timeout 30 "$BB" sim -s all -P 3 -M 7 -v 2,3 >/dev/null 2>"$tmp/err"
check "sweep with skips exits 0 (P=3)" $?
[ -z "$(sort "$tmp/err" | uniq -d)" ] && grep -q "skip: interleaved.*v=2" "$tmp/err" &&
  grep -q "skip: interleaved.*v=3" "$tmp/err"
r=$?
check "skip lines distinct, with v ($(cat "$tmp/err"))" $r

# Empty file names and single-schedule commands given several: exit 2, one line.
refused "--csv" validate --csv ""; check "validate --csv ''" $?
refused "--csv" show --csv ""; check "show --csv ''" $?
refused "--timeline" sim -s 1f1b -P 4 -M 8 --timeline ""; check "sim --timeline ''" $?
refused "one schedule" show -s all -P 4 -M 8; check "show -s all" $?
refused "one schedule" validate -s gpipe,1f1b -P 4 -M 8; check "validate two schedules" $?

# A CSV schedule keeps its own P, M and v: flags it ignores get a note.
timeout 30 "$BB" sim -s "csv:$tmp/low.csv" -M 4,16 -v 2,3 --format csv >"$tmp/out" 2>"$tmp/err"
check "csv with -M/-v exit 0" $?
[ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "^note: csv:.*-M 4,16.*-v 2,3.*ignored" "$tmp/err"
r=$?
check "csv note for -M and -v ($(cat "$tmp/err"))" $r

# Commands: an unknown one is refused by name; --help lists run too; a flag given twice takes
# its last value; show/validate's help asks for one schedule, as they do.
refused "unknown command 'simulate'" simulate -P 4; check "unknown command" $?
"$BB" --help | grep -q '^  run ' ; check "--help lists run" $?
out=$(timeout 30 "$BB" sim -s 1f1b -P 4 -M 4 -M 8 --t-f 3 --t-f 1 --format csv)
check "a repeated flag exit 0" $?
echo "$out" | grep -q '^1f1b,4,8,1,33,' ; check "a repeated flag takes its last value ($out)" $?
"$BB" validate --help | grep -q 'Schedule name: naive' && ! "$BB" validate --help | grep -q '(or all)'
check "validate --help: one schedule" $?

echo "$pass passed, $fails failed"
[ "$fails" = 0 ]
