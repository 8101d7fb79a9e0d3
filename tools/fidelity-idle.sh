#!/usr/bin/env bash
# Issue 19's "Done when" fidelity checks, as docs/runtime.md ("Link calibration", "Measured on an
# idle machine") reports them; run on an idle machine from the repository root after a Release
# build (build/bubblebench). Prints:
#  1. `calibrate` at 2 and 4 ranks (bound), LAUNCHES times each: the largest |error| line;
#  2. the attribution table of real compute at P=2 and of synthetic compute at P=4 (default
#     1 ms / 2 ms actions) — every term, median over LAUNCHES launches of each run's median-step
#     terms, and the largest |residual| of the launches — with the ≤ 0.02 verdict.
# About 3-5 minutes on the 2-core VM. Usage: tools/fidelity-idle.sh [BUILD_DIR] (default build)
set -euo pipefail
BUILD=${1:-build}
BB="$BUILD/bubblebench"
LAUNCHES=${LAUNCHES:-3}
PY=/usr/bin/python3
[ -x "$BB" ] || { echo "fidelity-idle: no $BB (build first)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD 2>/dev/null || echo '?'); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "## calibrate (mpiexec -bind-to core, defaults: 8 B..1 MiB)"
for n in 2 4; do
  for i in $(seq "$LAUNCHES"); do
    line=$(mpiexec -bind-to core -n "$n" "$BB" calibrate 2>&1 | grep '^largest |error|' || true)
    echo "P=$n launch $i: ${line:-calibrate printed no verdict}"
  done
done

table() {  # name, then the run's arguments
  local name=$1
  shift
  for i in $(seq "$LAUNCHES"); do
    "$@" >"$TMP/$name.$i.json" 2>"$TMP/$name.$i.err" || {
      echo "fidelity-idle: $name launch $i failed:" >&2
      tail -5 "$TMP/$name.$i.err" >&2
      exit 1
    }
  done
  echo
  echo "## $name: $*"
  "$PY" - "$TMP/$name".*.json <<'PY'
import json, statistics, sys
runs = {}
for f in sys.argv[1:]:
    for r in json.load(open(f)):
        runs.setdefault(r["schedule"], []).append(r)
terms = ["schedule", "imbalance", "jitter", "communication", "residual"]
print("| schedule | measured | sim | " + " | ".join(terms) + " | largest \\|residual\\| |")
print("|---" * (len(terms) + 4) + "|")
worst = 0.0
for s, rs in runs.items():
    med = lambda xs: statistics.median(xs)
    row = [med([r["bubble_fraction_measured"] for r in rs]), med([r["bubble_fraction_sim"] for r in rs])]
    row += [med([r["attribution"][t] for r in rs]) for t in terms]
    big = max(abs(r["attribution"]["residual"]) for r in rs)
    worst = max(worst, abs(row[-1]))
    print(f"| {s} | " + " | ".join(f"{x:.3f}" for x in row) + f" | {big:.3f} |")
print(f"largest |median residual|: {worst:.3f}: " + ("within" if worst <= 0.02 else "NOT within") + " 0.02")
PY
}

table "P=2 real compute" mpiexec -bind-to core -n 2 "$BB" run --schedule all -M 8 -v 2 --hidden 256 \
  --mb-size 32 --layers 2 --iters 10 --format json
table "P=4 synthetic compute" mpiexec -bind-to core -n 4 "$BB" run --compute synthetic --schedule all \
  -M 8 -v 2 --iters 10 --format json
