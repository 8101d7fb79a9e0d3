#!/usr/bin/env bash
# The cost of writing results: the default sweep of `make run` with and without --out,
# alternated REPEATS times; prints the median wall time of each and the overhead of --out.
# Also the sum of the per-run times of the progress lines (each run with its gather, without
# MPI start-up; the writes overlap the next run's warmup, so they are not in it). Not in
# ctest: a ≤ 2% assertion would be flaky on a shared 2-core VM. See docs/runtime.md.
# usage: measure_out_overhead.sh BUBBLEBENCH [MPIEXEC] [REPEATS]
BB=${1:?usage: $0 bubblebench [mpiexec] [repeats]}
MPIEXEC=${2:-mpiexec}
REPEATS=${3:-7}
. "$(dirname "$0")/../check_lib.sh"  # strict mode, $HERE, $tmp, check, finish, run_or_exit
sweep=(--schedule all -M "4,8" -v 2 --compute synthetic --t-f 1ms --t-b 1ms --t-w 1ms --iters 5)
one() {  # label, extra args... ; appends "wall runs_sum" to $tmp/<label>
  local label=$1 t0 t1
  shift
  t0=$(date +%s.%N)
  timeout 600 "$MPIEXEC" -n 2 "$BB" run "${sweep[@]}" "$@" >/dev/null 2>"$tmp/err.txt" ||
    { echo "run failed:"; cat "$tmp/err.txt"; exit 1; }
  t1=$(date +%s.%N)
  local sum
  sum=$(sed -nE 's/^\[[0-9]+\/[0-9]+\] .*: ([0-9.]+) s, elapsed.*/\1/p' "$tmp/err.txt" |
    awk '{s += $1} END {printf "%.3f", s}')
  echo "$(echo "$t1 - $t0" | bc -l) $sum" >>"$tmp/$label"
}
for ((i = 0; i < REPEATS; i++)); do
  one plain
  one out --out "$tmp/r.h5" --force
done
/usr/bin/python3 - "$tmp/plain" "$tmp/out" "$tmp/r.h5" <<'PY'
import os, statistics, sys
def load(p):
    rows = [tuple(map(float, l.split())) for l in open(p)]
    return [r[0] for r in rows], [r[1] for r in rows]
pw, ps = load(sys.argv[1])
ow, os_ = load(sys.argv[2])
mp, mo = statistics.median(pw), statistics.median(ow)
sp, so = statistics.median(ps), statistics.median(os_)
print(f"repeats: {len(pw)}; results file: {os.path.getsize(sys.argv[3]) / 1024:.0f} KiB")
print(f"wall time (mpiexec, median):   without --out {mp:.3f} s, with --out {mo:.3f} s, "
      f"overhead {100 * (mo - mp) / mp:+.2f} %")
print(f"sum of per-run times (median): without --out {sp:.3f} s, with --out {so:.3f} s, "
      f"overhead {100 * (so - sp) / sp:+.2f} %")
print("all wall times without:", " ".join(f"{x:.3f}" for x in pw))
print("all wall times with:   ", " ".join(f"{x:.3f}" for x in ow))
PY
