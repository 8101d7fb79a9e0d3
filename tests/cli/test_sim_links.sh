#!/usr/bin/env bash
# `sim --links FILE`: the fitted cost of each directed pair is the simulator's message delay
# (JSON as `calibrate --json` prints it); pairs the file lacks and bad files are refused (exit 2).
BB=${1:?usage: $0 path/to/bubblebench}
PY=/usr/bin/python3
# shellcheck source-path=SCRIPTDIR source=../check_lib.sh
. "$(dirname "$0")/../check_lib.sh"  # $tmp, check NAME RC, finish

# Two directed pairs, latency only: 0->1 costs 0.5, 1->0 costs 0.25 (samples consistent).
cat >"$tmp/links.json" <<'EOF'
{"transport": "mpi", "links": [
 {"src": 0, "dst": 1, "alpha_s": 0.5, "beta_bytes_per_s": 0,
  "regimes": [{"lo_bytes": 8, "hi_bytes": 32, "alpha_s": 0.5, "beta_bytes_per_s": 0}],
  "samples": [{"bytes": 8, "time_s": 0.5}, {"bytes": 16, "time_s": 0.5}, {"bytes": 32, "time_s": 0.5}]},
 {"src": 1, "dst": 0, "alpha_s": 0.25, "beta_bytes_per_s": 0,
  "regimes": [{"lo_bytes": 8, "hi_bytes": 32, "alpha_s": 0.25, "beta_bytes_per_s": 0}],
  "samples": [{"bytes": 8, "time_s": 0.25}, {"bytes": 16, "time_s": 0.25}, {"bytes": 32, "time_s": 0.25}]}
]}
EOF

# GPipe P=2 M=1: F(1) on rank 0, message 0->1, F(1) and B(2) on rank 1, message 1->0, B(2):
# makespan 6 + 0.5 + 0.25.
timeout 60 "$BB" sim -s gpipe -P 2 -M 1 --t-f 1 --t-b 2 --links "$tmp/links.json" --format json \
  >"$tmp/s.json"
check "sim --links exit" $?
$PY - "$tmp/s.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
assert abs(r["makespan"] - 6.75) < 1e-12, r["makespan"]
PY
check "per-pair delays" $?

# Without --links the same is 6; with a uniform --latency 1 it is 8: the fits replace it.
out=$(timeout 60 "$BB" sim -s gpipe -P 2 -M 1 --t-f 1 --t-b 2 --latency 1 --links "$tmp/links.json" --format csv)
check "sim --links csv exit" $?
echo "$out" | grep -q '^gpipe,2,1,1,6.75,' ; check "links replace --latency" $?

# 1F1B over M=8 runs with links too (no periodic jump: the plain engine).
timeout 60 "$BB" sim -s 1f1b,zb-v,dualpipev -P 2 -M 8 --t-f 1 --t-b 1 --t-w 1 \
  --links "$tmp/links.json" --format json >"$tmp/m.json"
check "schedules with links" $?
timeout 60 "$BB" sim -s 1f1b,zb-v,dualpipev -P 2 -M 8 --t-f 1 --t-b 1 --t-w 1 --format json \
  >"$tmp/free.json"
$PY - "$tmp/m.json" "$tmp/free.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for x, y in zip(a, b):
    assert x["makespan"] > y["makespan"], (x["schedule"], x["makespan"], y["makespan"])
PY
check "links lengthen every schedule" $?

# Refusals: exit 2, one line.
refused "has no fit for 1->2" sim -s 1f1b -P 4 -M 8 --links "$tmp/links.json"; check "missing pair" $?
refused "cannot read" sim -s 1f1b -P 2 --links "$tmp/none.json"; check "missing file" $?
echo '{"nolinks": 1}' >"$tmp/bad.json"
refused "no \"links\"" sim -s 1f1b -P 2 --links "$tmp/bad.json"; check "no links key" $?
echo 'garbage' >"$tmp/bad2.json"
refused "neither HDF5 nor JSON" sim -s 1f1b -P 2 --links "$tmp/bad2.json"; check "not JSON" $?
sed 's/"alpha_s": 0.25, "beta/"alpha_s": -1, "beta/' "$tmp/links.json" >"$tmp/neg.json"
refused "alpha_s" sim -s 1f1b -P 2 --links "$tmp/neg.json"; check "negative alpha" $?
refused "needs a file name" sim -s 1f1b -P 2 --links ''; check "empty name" $?

echo "test_sim_links: $pass passed, $fails failed"
[ "$fails" = 0 ]
