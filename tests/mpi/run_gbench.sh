#!/usr/bin/env bash
# The Google Benchmark front end under mpiexec -n 2: strict JSON (no NaN) with the counters, from
# rank 0 only (rank 1 reports nothing and writes no --benchmark_out file); names that say what is
# measured only, so that runs with other --bb_iters/--bb_reps pair up as in the compare.py of
# github.com/google/benchmark (its tools/ folder); refusals up front (one line, exit 2); --help
# and --benchmark_list_tests.
GB=$(readlink -f "${1:?usage: $0 gbench_pipeline mpiexec}")
MPIEXEC=${2:-mpiexec}
PY=/usr/bin/python3
. "$(dirname "$0")/../check_lib.sh"  # strict mode, $HERE, $tmp, check, finish, run_or_exit
export PYTHONPATH=$HERE  # strict_json.py
cd "$tmp" || exit 1
failed=0
passed=0
fail() {
  echo "FAIL: $*"
  failed=$((failed + 1))
}

# 1. A sweep: JSON on stdout and in --benchmark_out, the same, strict.
timeout 300 "$MPIEXEC" -n 2 "$GB" --benchmark_format=json --benchmark_out=file.json \
  --benchmark_out_format=json --bb_schedules=gpipe,1f1b,interleaved,zb-v --bb_M=2,4 --bb_v=2 \
  --bb_compute=synthetic --bb_t=5ms --bb_iters=3 >stdout.json 2>stderr.txt
rc=$?
if [ $rc != 0 ]; then
  fail "sweep: exit $rc"
  cat stderr.txt
else
  if $PY - stdout.json file.json <<'PY'; then passed=$((passed + 1)); else fail "sweep JSON"; fi
import sys
from strict_json import load
for path in sys.argv[1:]:
    # One strict JSON document (no NaN/Infinity, no duplicate keys): only rank 0 printed.
    doc = load(path)
    ctx = doc["context"]
    assert ctx["world_size"] == "2" and ctx["backend"] == "cpu" and ctx["transport"] == "mpi", ctx
    # Settings are in the context, not in the names.
    assert ctx["iterations"] == "3" and ctx["repetitions"] == "1", ctx
    assert ctx["compute"] == "synthetic" and ctx["t"] == "5ms", ctx
    names = [b["name"] for b in doc["benchmarks"]]
    sizes = "hidden:64/layers:1/mb_size:8/manual_time"
    # zb-v runs with v=2 whatever --bb_v says (as `run` and the HDF5 file say).
    want = [f"{s}/P:2/M:{m}/v:{v}/{sizes}" for s, v in
            (("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("zb-v", 2)) for m in (2, 4)]
    assert names == want, names
    for b in doc["benchmarks"]:
        assert b["iterations"] == 3, b
        for k in ("bubble_fraction_measured", "peak_activation_bytes"):
            assert k in b, (k, b)
        assert "flops_per_s" not in b, b  # synthetic compute runs no GEMM
        assert 0 <= b["bubble_fraction_measured"] < 1, b
        # Where no closed form applies (zb-v with M=2), no model counter instead of NaN.
        assert ("bubble_fraction_model" in b) == (b.get("label") != "no closed form"), b
        # P=2, F=B=W: the measured bubble is near the closed form (P-1)/(M+P-1) etc. (zb-v is
        # here for its name; its many small messages make its measured bubble load-dependent.)
        if "bubble_fraction_model" in b and not b["name"].startswith("zb-v/"):
            assert abs(b["bubble_fraction_measured"] - b["bubble_fraction_model"]) < 0.1, b
        assert b["peak_activation_bytes"] > 0, b
    assert sum("bubble_fraction_model" in b for b in doc["benchmarks"]) >= 7
print("gbench JSON ok")
PY
fi
ls ./*.json | grep -qv -e stdout.json -e file.json && fail "unexpected extra files: $(ls)"

# 2. Other settings (iterations, repetitions: aggregates whose cv would be NaN for a constant
#    counter) pair up with run 1 by name, as compare.py's partition_benchmarks pairs them.
timeout 300 "$MPIEXEC" -n 2 "$GB" --benchmark_format=json --bb_schedules=gpipe,zb-v --bb_M=2 \
  --bb_v=2 --bb_t=1ms --bb_iters=2 --bb_reps=2 >other.json 2>stderr2.txt
rc=$?
if [ $rc != 0 ]; then
  fail "second run: exit $rc"
  cat stderr2.txt
elif $PY - stdout.json other.json <<'PY'; then passed=$((passed + 1)); else fail "pairing"; fi
import sys
from strict_json import load
a, b = (load(p)["benchmarks"] for p in sys.argv[1:])
# compare.py: for every unique name of the first file, the runs of that name in each file with
# the first one's time unit; a name missing from the second file gives no row.
rows = []
for name in dict.fromkeys(x["name"] for x in b if x["run_type"] == "iteration"):
    lhs = [x for x in b if x["name"] == name]
    rhs = [x for x in a if x["name"] == name and x["time_unit"] == lhs[0]["time_unit"]]
    assert rhs, ("no partner for", name)
    rows.append(name)
assert rows == ["gpipe/P:2/M:2/v:1/hidden:64/layers:1/mb_size:8/manual_time",
                "zb-v/P:2/M:2/v:2/hidden:64/layers:1/mb_size:8/manual_time"], rows
print("pairing ok")
PY

# 3. Refused up front: one line on stderr, exit 2, nothing on stdout.
refuse() {
  timeout 60 "$MPIEXEC" -n 2 "$GB" "$@" >r.out 2>r.err
  local rc=$?
  if [ $rc = 2 ] && [ "$(wc -l <r.err)" = 1 ] && grep -qF -- "$WANT" r.err && [ ! -s r.out ]; then
    passed=$((passed + 1))
  else
    fail "$* -> exit $rc, stderr: $(cat r.err), stdout: $(head -c 200 r.out)"
  fi
}
WANT="unknown schedule 'nope'" refuse --bb_schedules=nope
WANT="interleaved: needs v >= 2" refuse --bb_schedules=interleaved --bb_v=1
WANT="--bb_iters: 'abc' is not a positive integer" refuse --bb_iters=abc
WANT="--bb_iters: '3x' is not a positive integer" refuse --bb_iters=3x
WANT="unknown flag --bb_nope=1" refuse --bb_nope=1
WANT="--bb_t: '1' needs a unit" refuse --bb_t=1

# 3b. Real compute: flops_per_s is a rate over the manual time, the step's GEMM FLOPs per second
#     (1f1b, P=2, M=2: 4 chunk x micro-batch pairs, 3 passes of 16·b·h² each, b=8, h=64).
timeout 300 "$MPIEXEC" -n 2 "$GB" --benchmark_format=json --bb_schedules=1f1b --bb_M=2 \
  --bb_compute=real --bb_iters=2 >real.json 2>real.err
rc=$?
if [ $rc != 0 ]; then
  fail "real compute: exit $rc: $(cat real.err)"
elif $PY - real.json <<'PY'; then passed=$((passed + 1)); else fail "real compute JSON"; fi
import sys
from strict_json import load
(b,) = load(sys.argv[1])["benchmarks"]
assert b["time_unit"] == "ms", b
flops = 3 * 16 * 8 * 64 * 64 * 4
assert abs(b["flops_per_s"] * b["real_time"] / 1e3 - flops) < 1e-6 * flops, (b, flops)
print("real compute ok")
PY

# 4. --help names the --bb_ flags, once (rank 0).
timeout 60 "$MPIEXEC" -n 2 "$GB" --help >help.txt 2>&1
rc=$?
if [ $rc = 0 ] && [ "$(grep -c -- '--bb_iters=N' help.txt)" = 1 ] &&
  grep -q -- '--bb_schedules=' help.txt && grep -q -- '--benchmark_filter' help.txt; then
  passed=$((passed + 1))
else
  fail "--help: exit $rc: $(cat help.txt)"
fi

# 5. --benchmark_list_tests: rank 0 lists the names it would report, once.
timeout 60 "$MPIEXEC" -n 2 "$GB" --benchmark_list_tests --bb_schedules=gpipe,zb-v --bb_M=4 \
  --bb_v=1 --bb_iters=7 >list.txt 2>list.err
rc=$?
want=$'gpipe/P:2/M:4/v:1/hidden:64/layers:1/mb_size:8/manual_time\nzb-v/P:2/M:4/v:2/hidden:64/layers:1/mb_size:8/manual_time'
if [ $rc = 0 ] && [ "$(cat list.txt)" = "$want" ]; then
  passed=$((passed + 1))
else
  fail "--benchmark_list_tests: exit $rc: $(cat list.txt list.err)"
fi

echo "$passed passed, $failed failed"
[ $failed = 0 ]
