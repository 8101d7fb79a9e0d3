#!/usr/bin/env bash
# `advise` on a results file made by a small `make run`-like command (issue 21, Done-when):
#   1. run zb-h1 and 1f1b at P=2 (real compute, calibrated links) into a results file;
#   2. advise --results FILE --format json ranks configurations (costs: the zb-h1 M=8 run's
#      per-chunk medians), and its best one agrees with `sim` given the same per-chunk costs,
#      links and bytes (makespan, period, peak activation bytes);
#   3. with --memory-cap at the median peak, exactly the configurations whose peak is above it
#      are excluded ("memory"), and the table names every family it leaves out;
#   4. --verify 2 under mpiexec prints predicted vs measured for two configurations, time and
#      peak memory per rank (no accuracy is asserted: timing on a shared machine varies).
# usage: run_advise.sh BUBBLEBENCH MPIEXEC
BB=${1:?usage: $0 bubblebench mpiexec}
MPIEXEC=${2:?}
. "$(dirname "$0")/../check_lib.sh"  # strict mode, $HERE, $tmp, check, finish, run_or_exit
fail() {
  echo "FAIL: $*"
  exit 1
}
timeout 300 "$MPIEXEC" -n 2 -bind-to core "$BB" run --schedule zb-h1,1f1b -M 4,8 --hidden 128 \
  --mb-size 16 --layers 2 --warmup 1 --iters 3 --out "$tmp/r.h5" >"$tmp/run.txt" 2>&1 ||
  { cat "$tmp/run.txt"; fail "run"; }
"$BB" advise --results "$tmp/r.h5" -M 2:16:x2 --format json >"$tmp/a.json" 2>"$tmp/err.txt" ||
  { cat "$tmp/err.txt"; fail "advise"; }
grep -q "^note: advise: costs of run zb-h1_P=2_M=8.*per-chunk medians" "$tmp/err.txt" ||
  { cat "$tmp/err.txt"; fail "advise did not take the zb-h1 M=8 run"; }
# The costs are the median over the file's 4 runs of that model (zb-h1 and 1f1b, M=4 and 8).
grep -q "median over the 4 runs of this model" "$tmp/err.txt" ||
  { cat "$tmp/err.txt"; fail "advise did not pool the 4 runs of the model"; }
# With --run, that run's costs alone.
"$BB" advise --results "$tmp/r.h5" --run "$(grep -o 'zb-h1_P=2_M=8[^ ]*' "$tmp/err.txt")" \
  -M 8 >/dev/null 2>"$tmp/err1.txt" || { cat "$tmp/err1.txt"; fail "advise --run"; }
if grep -q "median over" "$tmp/err1.txt"; then cat "$tmp/err1.txt"; fail "--run pooled"; fi

# The best configuration, simulated by `sim` with the advisor's inputs.
read -r -a sim_args < <(/usr/bin/python3 - "$tmp/a.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
i, b = j["input"], j["ranked"][0]
assert len(j["ranked"]) > 5, "too few ranked"
# Per-chunk costs as docs/advise.md defines them: chunk c holds model stage c mod S (S = P /
# chunk fraction; DualPipe's second copy repeats the stages) and takes the time of the profile
# part that stage lies in, times the chunk fraction.
P, v = i["P"], b["v"]
frac = 1.0 if b["schedule"] == "dualpipe" else 1.0 / v
S = round(P / frac)
chunks = 2 * P if b["schedule"] == "dualpipe" else P * v
def per_chunk(profile):
    return [profile[(c % S) * len(profile) // S] * frac for c in range(chunks)]
tf, tb, tw = per_chunk(i["t_f_s"]), per_chunk(i["t_b_s"]), per_chunk(i["t_w_s"])
if b["recompute"]:
    tb = [x + y for x, y in zip(tb, tf)]
act = i["input_bytes"] / frac if b["recompute"] else i["act_bytes"]
lst = lambda xs: ",".join(repr(x) for x in xs)
mean = lambda xs: sum(xs) / len(xs)
# An F&B pair costs fb_factor x (F + B + W) of the mean stage (with recompute's F).
fb = i["fb_factor"] * (mean(i["t_f_s"]) * (2 if b["recompute"] else 1) + mean(i["t_b_s"])
                       + mean(i["t_w_s"]))
pair = [] if i["fb_factor"] == 1 else ["--t-fb", repr(fb)]
print(" ".join(pair + ["-s", b["schedule"], "-P", str(P), "-M", str(b["M"]), "-v", str(v),
                "--t-f", lst(tf), "--t-b", lst(tb), "--t-w", lst(tw),
                "--latency", repr(i["latency_s"]), "--bandwidth", repr(i["bandwidth_bytes_per_s"]),
                "--msg-bytes", repr(i["input_bytes"]), "--act-bytes", repr(act)]))
PY
)
[[ ${#sim_args[@]} -gt 0 ]] || fail "no best configuration"
"$BB" sim "${sim_args[@]}" --format json >"$tmp/sim.json" 2>"$tmp/err.txt" ||
  { cat "$tmp/err.txt"; fail "sim ${sim_args[*]}"; }
/usr/bin/python3 - "$tmp/a.json" "$tmp/sim.json" <<'PY' || fail "advise's best differs from sim"
import json, sys
b = json.load(open(sys.argv[1]))["ranked"][0]
s = json.load(open(sys.argv[2]))[0]
close = lambda x, y: abs(x - y) <= 1e-9 * max(abs(x), abs(y), 1e-12)
assert close(b["makespan_s"], s["makespan"]), (b["makespan_s"], s["makespan"])
assert close(b["period_s"], s["period"]), (b["period_s"], s["period"])
# Memory: the memory model (docs/memory.md) of the runtime's allocations: per rank its static
# bytes and its micro-batches' inputs, saved tensors and message buffers, at least the F-time
# footprint the simulator counts (without recompute).
assert all(close(m, a + st) for m, a, st in
           zip(b["memory_bytes"], b["activation_bytes"], b["static_bytes"]))
if not b["recompute"]:
    assert all(x >= y for x, y in zip(b["activation_bytes"], s["peak_activation_bytes"]))
print("best agrees with sim:", b["schedule"], "M =", b["M"], "v =", b["v"],
      "makespan", s["makespan"])
PY

# The memory cap: exactly the configurations over it are excluded.
cap=$(/usr/bin/python3 -c "
import json, sys
p = sorted(c['peak_bytes'] for c in json.load(open('$tmp/a.json'))['ranked'])
print(int(p[len(p) // 2]))")
"$BB" advise --results "$tmp/r.h5" -M 2:16:x2 --memory-cap "$cap" --top 3 --format json \
  >"$tmp/c.json" 2>/dev/null || fail "advise --memory-cap $cap"
/usr/bin/python3 - "$tmp/a.json" "$tmp/c.json" "$cap" <<'PY' || fail "memory cap exclusions"
import json, sys
a, c, cap = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
key = lambda x: (x["schedule"], x["M"], x["v"], x["recompute"])
over = {key(x) for x in a["ranked"] if x["peak_bytes"] > cap}
excluded = {key(x) for x in c["excluded"] if x["excluded"] == "memory"}
assert over and excluded == over, (sorted(over ^ excluded))
assert all(x["peak_bytes"] <= cap for x in c["ranked"])
assert len(c["ranked"]) + len(over) == len(a["ranked"])
print(f"memory cap {cap}: {len(over)} configurations excluded, {len(c['ranked'])} ranked")
PY
"$BB" advise --results "$tmp/r.h5" -M 2:16:x2 --memory-cap "$cap" --top 3 >"$tmp/t.txt" 2>&1 ||
  fail "advise table"
fam=$(/usr/bin/python3 -c "
import json
print(sum(1 for f in json.load(open('$tmp/c.json'))['families'] if f['excluded']))")
[[ $(grep -c '^excluded: ' "$tmp/t.txt") -eq $fam ]] || { cat "$tmp/t.txt"; fail "excluded lines"; }

# --verify: predicted vs measured for the top 2 (shape only).
timeout 300 "$MPIEXEC" -n 2 -bind-to core "$BB" advise --results "$tmp/r.h5" -M 4,8 \
  -s zb-h1,1f1b --recompute off --verify 2 --iters 3 >"$tmp/v.txt" 2>&1 ||
  { cat "$tmp/v.txt"; fail "advise --verify 2"; }
if ! grep -q "^verify: predicted vs measured" "$tmp/v.txt" || ! grep -q "^ranking " "$tmp/v.txt"; then
  cat "$tmp/v.txt"
  fail "no verify table"
fi
[[ $(grep -cE '^[12] +(zb-h1|1f1b) M=' "$tmp/v.txt") -eq 2 ]] || { cat "$tmp/v.txt"; fail "verify rows"; }
# Peak memory per rank predicted and measured next to the times: "a/b" MiB for the two ranks.
grep -qE '^#  +config +pred_ms +meas_ms +error +pred_MiB +meas_MiB +mem_error' "$tmp/v.txt" &&
  [[ $(grep -cE '^[12] +(zb-h1|1f1b) M=[0-9]+ v=[0-9]+ +[0-9.]+ +[0-9.]+ +-?[0-9.]+% +[0-9.]+/[0-9.]+ +[0-9.]+/[0-9.]+ +[0-9.]+%' "$tmp/v.txt") -eq 2 ]] ||
  { cat "$tmp/v.txt"; fail "no memory columns in the verify table"; }
cat "$tmp/v.txt"
echo "ok: advise"
