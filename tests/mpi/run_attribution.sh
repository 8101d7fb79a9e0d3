#!/usr/bin/env bash
# The attribution finds injected causes in their terms (issue 19 item 6): synthetic compute,
# 1F1B at P=2, M=8, F = B = 4 ms. Three runs: a baseline, one with rank 1 slowed by 2 ms per
# compute (--debug-delay-rank/--debug-delay-us) and one with every message from rank 0 to
# rank 1 held 3 ms (--debug-link-delay; the link model of the run then knows that delay).
# The slow rank must show up as imbalance (at least 0.05 more than the baseline) and the slow
# link as communication (at least 0.03), with every other term within 0.01 of the baseline's;
# the terms must add up to the measured bubble of the step they describe. Timing on a shared
# 2-core machine is noisy: a failed attempt is repeated, up to three in all.
# usage: run_attribution.sh BUBBLEBENCH MPIEXEC
BB=${1:?usage: $0 bubblebench mpiexec}
MPIEXEC=${2:?}
. "$(dirname "$0")/../check_lib.sh"
common=(--schedule 1f1b -M 8 --compute synthetic --t-f 4ms --t-b 4ms --warmup 1 --iters 9
  --timeout 60 --format json --no-calibrate)
run() {  # NAME ARGS...
  local name=$1
  shift
  timeout 300 "$MPIEXEC" -n 2 "$BB" run "${common[@]}" "$@" >"$tmp/$name.json" 2>"$tmp/err.txt" ||
    { echo "FAIL: $name run"; cat "$tmp/err.txt"; return 2; }
}
attempt() {
  run base && run slow_rank --debug-delay-rank 1 --debug-delay-us 2000 &&
    run slow_link --debug-link-delay 0:1:3000 || return 2
  /usr/bin/python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
terms = ["schedule", "imbalance", "jitter", "communication", "residual"]
att = {n: json.load(open(f"{d}/{n}.json"))[0]["attribution"] for n in
       ("base", "slow_rank", "slow_link")}
fails = []
for n, a in att.items():
    print(n + ": " + " ".join(f"{t} {a[t]:+.4f}" for t in terms))
def check(name, term, at_least):
    a, b = att[name], att["base"]
    if a[term] - b[term] < at_least:
        fails.append(f"{name}: {term} {a[term]:.4f} is not {at_least} above the baseline's {b[term]:.4f}")
    for t in terms[1:]:
        if t != term and abs(a[t] - b[t]) > 0.01:
            fails.append(f"{name}: {t} {a[t]:.4f} moved more than 0.01 from the baseline's {b[t]:.4f}")
check("slow_rank", "imbalance", 0.05)
check("slow_link", "communication", 0.03)
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
PY
}
retry_attempts attribution
