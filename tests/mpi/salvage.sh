#!/usr/bin/env bash
# The salvage recipe of docs/runtime.md (tools/salvage_results.py) on damaged results files:
# a run whose compressed data is overwritten, a run whose group header is overwritten, and a
# file cut short. The untouched runs come back byte for byte equal, the damaged ones are
# dropped with a line each, and `--resume` on the salvaged file runs exactly the dropped ones.
# usage: salvage.sh BUBBLEBENCH MPIEXEC [PYTHON]
set -uo pipefail
BB=${1:?usage: $0 bubblebench mpiexec [python]}
MPIEXEC=${2:?}
PY=${3:-/usr/bin/python3}
SALVAGE="$(dirname "$0")/../../tools/salvage_results.py"
# shellcheck source-path=SCRIPTDIR source=../check_lib.sh
. "$(dirname "$0")/../check_lib.sh"
sweep() {  # results file, extra args...
  local out=$1; shift
  timeout 120 "$MPIEXEC" -n 2 "$BB" run --schedule 1f1b,gpipe -M 4,8 --compute synthetic \
    --t-f 0 --t-b 0 --iters 3 --warmup 0 --no-calibrate --timeout 60 --out "$out" "$@" \
    >"$tmp/run.out" 2>"$tmp/run.err"
}
sweep "$tmp/good.h5"
check "the sweep writes 4 runs (exit $?)" $?

# The damage script ($tmp/damage_py), args GOOD OUT MODE: MODE data (garbage over the events chunk of the first run),
# header (garbage over the second run's group header) or cut (the file cut inside the last run,
# after its group header), or lost (cut at 40 %, where /runs' names are gone).
cat >"$tmp/damage_py" <<'PY'
import shutil, sys, h5py
good, out, mode = sys.argv[1:]
with h5py.File(good, "r") as f:
    keys = sorted(f["runs"], key=lambda k: h5py.h5o.get_info(f["runs"][k].id).addr)
    if mode == "data":
        at = f["runs"][keys[0]]["events"].id.get_chunk_info(0)
        where, n, victim = at.byte_offset, at.size, keys[0]
    elif mode == "header":
        where, n, victim = h5py.h5o.get_info(f["runs"][keys[1]].id).addr, 64, keys[1]
shutil.copy(good, out)
if mode in ("cut", "lost"):
    with h5py.File(good, "r") as f:
        last = f["runs"][keys[-1]]
        header = h5py.h5o.get_info(last.id).addr
    with open(out, "r+b") as o:
        size = o.seek(0, 2)
        o.truncate(int(0.4 * size) if mode == "lost" else (header + size) // 2)
    print(keys[-1] if mode == "cut" else "")
else:
    with open(out, "r+b") as o:
        o.seek(where)
        o.write(b"\xa5" * n)
    print(victim)
PY
# The comparison script ($tmp/same_py), args GOOD SALVAGED: every run of SALVAGED equals GOOD's (attributes and datasets).
cat >"$tmp/same_py" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as a, h5py.File(sys.argv[2], "r") as b:
    assert dict(a.attrs) == dict(b.attrs), "root attributes differ"
    for key in b["runs"]:
        ga, gb = a["runs"][key], b["runs"][key]
        assert {k: str(v) for k, v in ga.attrs.items()} == {k: str(v) for k, v in gb.attrs.items()}, key
        def equal(x, y):  # field by field; NaN (a null real, e.g. rank_mfu) equals NaN
            if x.dtype.names:
                return x.dtype == y.dtype and all(equal(x[n], y[n]) for n in x.dtype.names)
            return np.array_equal(x, y, equal_nan=x.dtype.kind == "f")
        def same(name, obj):
            if isinstance(obj, h5py.Dataset):
                assert equal(np.asarray(obj[()]), np.asarray(ga[name][()])), key + "/" + name
        gb.visititems(same)
    print(len(b["runs"]))
PY
keys() { "$PY" -c 'import sys, h5py; print("\n".join(sorted(h5py.File(sys.argv[1], "r")["runs"])))' "$1"; }

for mode in data header cut; do
  victim=$("$PY" "$tmp/damage_py" "$tmp/good.h5" "$tmp/$mode.h5" "$mode")
  "$PY" "$SALVAGE" "$tmp/$mode.h5" "$tmp/$mode-salvaged.h5" >"$tmp/salv.out" 2>"$tmp/salv.err"
  rc=$?
  check "$mode: salvage exit 0 (got $rc: $(head -c 300 "$tmp/salv.err"))" $rc
  kept=$("$PY" "$tmp/same_py" "$tmp/good.h5" "$tmp/$mode-salvaged.h5" 2>"$tmp/same.err")
  check "$mode: the kept runs equal the original's ($(tail -1 "$tmp/same.err"))" $?
  ndropped=$(grep -c '^dropped ' "$tmp/salv.err")
  [ "$((kept + ndropped))" = 4 ] && [ "$ndropped" -ge 1 ]
  check "$mode: kept $kept + dropped $ndropped = 4 runs, at least one dropped" $?
  if [ -n "$victim" ]; then
    [ "$kept" = 3 ] && grep -q "^dropped $victim: " "$tmp/salv.err"
    check "$mode: exactly the damaged run $victim dropped ($(head -c 300 "$tmp/salv.err"))" $?
  fi
  [ ! -e "$tmp/$mode-salvaged.h5.padded" ] && [ ! -e "$tmp/$mode-salvaged.h5.bb-salvage" ]
  check "$mode: no scratch files left" $?
  keys "$tmp/$mode-salvaged.h5" >"$tmp/before.txt"
  sweep "$tmp/$mode-salvaged.h5" --resume
  check "$mode: --resume of the salvaged file exits 0 ($(head -c 300 "$tmp/run.err"))" $?
  [ "$(grep -c ': skipped (complete in ' "$tmp/run.err")" = "$kept" ]
  check "$mode: --resume skipped the $kept kept runs ($(grep -i complete "$tmp/run.err" | head -3))" $?
  keys "$tmp/$mode-salvaged.h5" >"$tmp/after.txt"
  [ "$(wc -l <"$tmp/after.txt")" = 4 ] && "$PY" "$tmp/same_py" "$tmp/$mode-salvaged.h5" "$tmp/$mode-salvaged.h5" >/dev/null
  check "$mode: after --resume the file holds all 4 runs" $?
done
# /runs' names lost with the end of the file: nothing to salvage, one line, nothing left.
"$PY" "$tmp/damage_py" "$tmp/good.h5" "$tmp/lost.h5" lost >/dev/null
"$PY" "$SALVAGE" "$tmp/lost.h5" "$tmp/lost-salvaged.h5" >"$tmp/salv.out" 2>"$tmp/salv.err"
rc=$?
[ $rc = 1 ] && grep -q "no readable root attributes and /runs" "$tmp/salv.err" &&
  [ -z "$(find "$tmp" -name 'lost-salvaged*')" ]
check "runs index lost: exit 1 (got $rc), a reason, no file left ($(tail -1 "$tmp/salv.err"))" $?
"$PY" "$SALVAGE" "$tmp/good.h5" "$tmp/data-salvaged.h5" 2>"$tmp/salv.err"
[ $? = 2 ] && grep -q "exists" "$tmp/salv.err"
check "an existing output file is refused (exit 2)" $?

finish salvage
