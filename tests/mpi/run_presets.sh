#!/usr/bin/env bash
# --model presets (docs/transformer.md, "Presets"): the record holds the preset's name and the
# flags it expands to; a flag given explicitly overrides the preset's (--hidden, --causal), and
# --layers drops its --model-layers; --stage mlp with a preset is an error (exit 2).
# usage: run_presets.sh BUBBLEBENCH MPIEXEC
BB=${1:?usage: $0 bubblebench mpiexec}
MPIEXEC=${2:?}
. "$(dirname "$0")/../check_lib.sh"  # strict mode, $HERE, $tmp, check, finish, run_or_exit
fail=0
run() {  # OUT ARGS...
  local out=$1
  shift
  if ! timeout 120 "$MPIEXEC" -n 2 "$BB" run -s 1f1b -M 2 --iters 1 --warmup 0 --no-calibrate \
    --format json "$@" >"$tmp/$out.json" 2>"$tmp/$out.err"; then
    echo "FAIL: run $* exited non-zero"
    cat "$tmp/$out.err"
    fail=1
  fi
}
run preset --model tiny --mb-size 2
run override --model tiny --mb-size 2 --hidden 16 --causal=false --vocab 0
run layers --model tiny --mb-size 2 --layers 1
/usr/bin/python3 - "$tmp" <<'PY' || fail=1
import sys
from pathlib import Path
import json
d = Path(sys.argv[1])
def one(name):
    rows = json.loads((d / f"{name}.json").read_text())
    assert len(rows) == 1, rows
    return rows[0]
want = {"model": "tiny", "stage": "transformer", "hidden": 32, "heads": 4, "ffn": 128,
        "seq": 16, "vocab": 128, "model_layers": 4, "causal": True, "partition": "2,2"}
fails = []
def expect(name, row, want):
    for k, v in want.items():
        if row.get(k) != v:
            fails.append(f"{name}: {k} = {row.get(k)!r}, expected {v!r}")
expect("preset", one("preset"), want)
expect("override", one("override"), dict(want, hidden=16, causal=False, vocab=0))
expect("layers", one("layers"), dict(want, model_layers=2, layers=1, partition="1,1"))
for f in fails:
    print("FAIL:", f)
print(f"presets: {len(fails)} failures")
sys.exit(1 if fails else 0)
PY
timeout 60 "$MPIEXEC" -n 2 "$BB" run --model tiny --stage mlp >"$tmp/mlp.out" 2>&1
rc=$?
if [ $rc != 2 ] || ! grep -q "takes no --stage mlp" "$tmp/mlp.out"; then
  echo "FAIL: --model tiny --stage mlp: exit $rc, expected 2 with one line"
  cat "$tmp/mlp.out"
  fail=1
fi
exit $fail
