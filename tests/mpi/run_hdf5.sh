#!/usr/bin/env bash
# `run --out`: a small sweep (3 schedules x 2 M x 2 hidden sizes = 12 runs, synthetic 1 ms
# actions, 3 timed iterations) under mpiexec -n 2, then the file is read back with the C++
# reader (h5dump_runs) and with h5py (check_results.py hdf5): every attribute and dataset of
# design §6, events = every lowered action of every rank for every timed iteration.
# usage: run_hdf5.sh BUBBLEBENCH MPIEXEC H5DUMP_RUNS [PYTHON]
BB=${1:?usage: $0 bubblebench mpiexec h5dump_runs [python]}
MPIEXEC=${2:?}
DUMP=${3:?}
PY=${4:-/usr/bin/python3}
. "$(dirname "$0")/../check_lib.sh"  # strict mode, $HERE, $tmp, check, finish, run_or_exit
unset SLURM_JOB_ID SLURM_ARRAY_JOB_ID SLURM_ARRAY_TASK_ID

mkdir -p "$tmp/lowered"
for s in gpipe 1f1b zb-h1; do
  for m in 2 4; do
    "$BB" show --schedule "$s" -P 2 -M "$m" --lowered --format csv >"$tmp/lowered/${s}_M$m.csv" ||
      { echo "FAIL: show --lowered $s M=$m"; exit 1; }
  done
done

run_or_exit timeout 300 "$MPIEXEC" -n 2 "$BB" run --schedule gpipe,1f1b,zb-h1 -M 2,4 \
  --hidden 16,32 --compute synthetic --t-f 1ms --t-b 1ms --t-w 1ms --iters 3 --timeout 60 \
  --out "$tmp/r.h5"
fails=0
# Progress: one line per run on stderr, "[i/12] <label>: <s> s, elapsed <s> s, ETA <s> s".
n=$(grep -cE '^\[[0-9]+/12\] [a-z0-9-]+ P=2 M=[24] v=1 h=(16|32) L=1 b=8: [0-9.]+ s, elapsed [0-9.]+ s, ETA [0-9.]+ s$' "$tmp/err.txt")
if [ "$n" != 12 ]; then
  echo "FAIL: $n progress lines, expected 12:"
  cat "$tmp/err.txt"
  fails=1
fi
"$DUMP" "$tmp/r.h5" >"$tmp/dump.json" || { echo "FAIL: h5dump_runs"; exit 1; }
"$PY" "$HERE/check_results.py" hdf5 "$tmp/r.h5" --lowered "$tmp/lowered" --dump "$tmp/dump.json" \
  --runs 12 --iters 3 || fails=1
exit $fails
