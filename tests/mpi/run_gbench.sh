#!/usr/bin/env bash
# The Google Benchmark front end under mpiexec -n 2: valid JSON with the counters, from rank 0
# only (rank 1 reports nothing and writes no --benchmark_out file).
set -uo pipefail
GB=$(readlink -f "${1:?usage: $0 gbench_pipeline mpiexec}")
MPIEXEC=${2:-mpiexec}
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
timeout 300 "$MPIEXEC" -n 2 "$GB" --benchmark_format=json --benchmark_out=file.json \
  --benchmark_out_format=json --bb_schedules=gpipe,1f1b,interleaved --bb_M=2,4 --bb_v=2 \
  --bb_compute=synthetic --bb_t=1ms --bb_iters=3 >stdout.json 2>stderr.txt
rc=$?
if [ $rc != 0 ]; then
  echo "FAIL: exit $rc"
  cat stderr.txt
  exit 1
fi
$PY - stdout.json file.json <<'PY'
import json, sys
for path in sys.argv[1:]:
    doc = json.load(open(path))  # one JSON document: only rank 0 printed
    ctx = doc["context"]
    assert ctx["world_size"] == "2" and ctx["backend"] == "cpu" and ctx["transport"] == "mpi", ctx
    # Readable names: schedule/M:m/v:v, then Google Benchmark's fixed-count suffixes.
    names = ["/".join(b["name"].split("/")[:3]) for b in doc["benchmarks"]]
    want = ["gpipe/M:2/v:1", "gpipe/M:4/v:1", "1f1b/M:2/v:1", "1f1b/M:4/v:1",
            "interleaved/M:2/v:2", "interleaved/M:4/v:2"]
    assert names == want, names
    assert all(b["name"].endswith("/manual_time") for b in doc["benchmarks"])
    for b in doc["benchmarks"]:
        assert b["iterations"] == 3, b
        for k in ("bubble_fraction_measured", "bubble_fraction_model", "peak_activation_bytes",
                  "flops_per_s"):
            assert k in b, (k, b)
        assert 0 <= b["bubble_fraction_measured"] < 1, b
        # P=2, F=B=W: the measured bubble is near the closed form (P-1)/(M+P-1) etc.
        assert abs(b["bubble_fraction_measured"] - b["bubble_fraction_model"]) < 0.1, b
        assert b["peak_activation_bytes"] > 0, b
print("gbench JSON ok")
PY
st=$?
ls ./*.json | grep -qv -e stdout.json -e file.json && { echo "FAIL: unexpected extra files"; ls; exit 1; }
echo "1 passed, $([ $st = 0 ] && echo 0 || echo 1) failed"
exit $st
