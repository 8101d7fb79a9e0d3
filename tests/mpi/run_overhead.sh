#!/usr/bin/env bash
# Executor overhead per action with zero-time synthetic compute and no transfers
# (bench_runtime, one rank): reports the figure and fails above 5 µs per action.
# usage: run_overhead.sh BENCH_RUNTIME
BENCH=${1:?usage: $0 path/to/bench_runtime}
. "$(dirname "$0")/../check_lib.sh"  # strict mode, $HERE, $tmp, check, finish, run_or_exit
timeout 300 "$BENCH" --benchmark_filter='BM_Step_(1F1B|ZBV)/64/' --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true --benchmark_format=json >"$tmp/b.json" ||
  { echo "FAIL: bench_runtime"; exit 1; }
PYTHONPATH=$(cd "$(dirname "$0")" && pwd) /usr/bin/python3 - "$tmp/b.json" <<'PY'
import sys
from strict_json import load  # Google Benchmark's JSON, without NaN (bench/gbench_report.hpp)
rows = [b for b in load(sys.argv[1])["benchmarks"] if b.get("aggregate_name") == "median"]
assert rows, "no median rows"
bad = 0
for b in rows:
    us = b["time_per_action"] * 1e6
    print(f"{b['run_name']}: {us:.3f} us per action (median of 5)")
    bad += us > 5.0
sys.exit(1 if bad else 0)
PY
