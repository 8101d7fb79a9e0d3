#!/usr/bin/env bash
# Standard clients of the JSON outputs (issue 22), under mpiexec -n 2:
# 1. Google Benchmark's own compare.py (Debian: libbenchmark-tools, which `make deps`
#    installs) pairs up two gbench_pipeline files made with other --bb_iters and --bb_reps:
#    every benchmark of either file, aggregates included, gets a row of the comparison.
# 2. A strict JSON parser (strict_json.py: no NaN/Infinity, no duplicate keys, one document)
#    accepts every JSON that gbench_pipeline (stdout and --benchmark_out) and `run` write
#    (--format json, with and without a closed form, --sync none, --check; --trace files), and
#    bench_sim's with repetitions (the cv of its constant-0 counter sim_jumped_units was NaN).
# compare.py: $GBENCH_COMPARE, else /usr/share/benchmark/compare.py. Where it is absent, part 1
# is skipped with one line and the test exits 77 (ctest: skipped) after part 2.
#   usage: gbench_compare.sh GBENCH_PIPELINE BUBBLEBENCH MPIEXEC BENCH_SIM
set -uo pipefail
GB=$(readlink -f "${1:?usage: $0 gbench_pipeline bubblebench mpiexec bench_sim}")
BB=$(readlink -f "${2:?}")
MPIEXEC=${3:?}
BENCH_SIM=$(readlink -f "${4:?}")
HERE=$(cd "$(dirname "$0")" && pwd)
COMPARE=${GBENCH_COMPARE:-/usr/share/benchmark/compare.py}
PY=/usr/bin/python3
# shellcheck source-path=SCRIPTDIR source=../check_lib.sh
. "$HERE/../check_lib.sh"
cd "$tmp" || exit 1
export PYTHONPATH=$HERE  # strict_json.py

# 0. The strict parser refuses what it must (else part 2 could not fail).
printf '{"a": NaN}' >nan.json
printf '[Infinity]' >inf.json
printf '[-Infinity]' >ninf.json
printf '{"a": 1, "a": 2}' >dup.json
printf '{"a": 1}\n{"a": 1}\n' >two.json
printf '{"a": [1, 2.5e-3, null, "x"], "b": {"a": 1}}' >ok.json
"$PY" "$HERE/strict_json.py" ok.json
check "strict_json accepts a strict document" $?
for f in nan inf ninf dup two; do
  "$PY" "$HERE/strict_json.py" "$f.json" >/dev/null
  [ $? = 1 ]
  check "strict_json refuses $f.json" $?
done

# 1. Two gbench files with other settings: iterations 3 and 2, repetitions 2 and 3 (aggregates
#    in both, whose names must pair too).
gbench() {  # out, args...: one sweep, JSON on stdout
  local out=$1
  shift
  timeout 300 "$MPIEXEC" -n 2 "$GB" --benchmark_format=json \
    --bb_schedules=gpipe,1f1b,interleaved,zb-h1,zb-v,dualpipev --bb_M=2,4 --bb_v=2 \
    --bb_compute=synthetic --bb_t=1ms "$@" >"$out" 2>"$out.err"
  local rc=$?
  [ $rc = 0 ] || cat "$out.err"
  return $rc
}
gbench a.json --bb_iters=3 --bb_reps=2
check "gbench_pipeline --bb_iters=3 --bb_reps=2" $?
gbench b.json --bb_iters=2 --bb_reps=3 --benchmark_out=b_out.json --benchmark_out_format=json
check "gbench_pipeline --bb_iters=2 --bb_reps=3 --benchmark_out" $?

compare_skipped=0
if [ ! -f "$COMPARE" ]; then
  echo "SKIP compare.py: $COMPARE not found (Debian: apt-get install libbenchmark-tools, as make deps does; or set GBENCH_COMPARE)"
  compare_skipped=1
else
  "$PY" "$COMPARE" --no-color -d dump.json benchmarks a.json b.json >compare.txt 2>&1
  r=$?
  check "compare.py benchmarks a.json b.json: exit $r" $r
  [ $r = 0 ] || cat compare.txt
  "$PY" - a.json b.json dump.json compare.txt <<'PY'
import sys
from strict_json import load
a, b = (load(p)["benchmarks"] for p in sys.argv[1:3])
rows = load(sys.argv[3])  # compare.py -d: one entry per pair of benchmarks, then the geomean
text = open(sys.argv[4]).read()
names = lambda runs: list(dict.fromkeys(x["name"] for x in runs))
assert names(a) == names(b), ("the files name other benchmarks", names(a), names(b))
got = [r["name"] for r in rows if r["name"] != "OVERALL_GEOMEAN"]
assert got == names(a), ("unpaired", sorted(set(names(a)) - set(got)))
assert all(r["measurements"] for r in rows), "a row without measurements"
kinds = {r["run_type"] for r in rows if r["name"] != "OVERALL_GEOMEAN"}
assert kinds == {"iteration", "aggregate"}, kinds
missing = [n for n in got if n not in text]
assert not missing, ("not in compare.py's table", missing)
print(f"compare.py: {len(got)} benchmarks paired ({len(names(x for x in a if x['run_type'] == 'iteration'))} "
      "configurations, with aggregates)")
PY
  check "compare.py pairs every benchmark of both files" $?
fi

# 2. run --format json: synthetic sweep (zb-v at M=2 has no closed form: a null model), --sync
#    none (the period), --check with recompute, a trace per run.
run() {  # out, args...
  local out=$1
  shift
  timeout 300 "$MPIEXEC" -n 2 "$BB" run --hidden 16 --mb-size 4 --warmup 0 --iters 2 \
    --timeout 60 --no-calibrate --format json "$@" >"$out" 2>"$out.err"
  local rc=$?
  [ $rc = 0 ] || cat "$out.err"
  return $rc
}
run run1.json --schedule gpipe,1f1b,interleaved,zb-v,dualpipev -M 2,4 -v 2 --compute synthetic \
  --t-f 1ms --t-b 1ms --t-w 1ms --trace traces
check "run --compute synthetic --trace" $?
run run2.json --schedule 1f1b,zb-h1 -M 4 --sync none --check --recompute=both
check "run --sync none --check --recompute=both" $?
timeout 120 "$BENCH_SIM" --benchmark_filter='P:8/' --benchmark_repetitions=2 \
  --benchmark_min_time=0.01 --benchmark_format=json --benchmark_out=sim_out.json \
  --benchmark_out_format=json >sim.json 2>sim.err
check "bench_sim --benchmark_repetitions=2 (JSON on stdout and in --benchmark_out)" $?
"$PY" - sim.json <<'PY'
import sys
from strict_json import load
runs = load(sys.argv[1])["benchmarks"]
cv = [r for r in runs if r.get("aggregate_name") == "cv"]
assert cv and all("compute_actions" in r for r in cv), cv
# The cv of a counter that is 0 in every repetition (0/0: the engines that jump no units) is
# left out; where it is not 0, the cv stays.
for r in cv:
    zero = all(x["sim_jumped_units"] == 0 for x in runs
               if x["run_name"] == r["run_name"] and x["run_type"] == "iteration")
    assert ("sim_jumped_units" in r) != zero, r
assert any("sim_jumped_units" not in r for r in cv), "no constant-0 counter: test nothing"
PY
check "bench_sim: the cv aggregate without its NaN counter" $?
jsons=(a.json b.json b_out.json run1.json run2.json traces/*.json sim.json sim_out.json)
"$PY" "$HERE/strict_json.py" "${jsons[@]}"
check "strict JSON: ${#jsons[@]} files (gbench_pipeline and bench_sim, run, traces)" $?

finish gbench_compare || exit 1
[ $compare_skipped = 0 ] || exit 77
