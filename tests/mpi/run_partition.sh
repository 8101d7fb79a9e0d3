#!/usr/bin/env bash
# `run --partition auto` end to end (docs/transformer.md, "Partitioner"): a tiny LM whose head
# (vocabulary 4000 at width 16) outweighs many blocks, 6 blocks over 1F1B (2 chunks) and
# interleaved v=2 (4 chunks) at P=2. Each run prints "partition: …" once; the chosen split is
# in the record's `partition`, puts fewer blocks on the head's rank than on the other, differs
# from the even split and passes --check. --partition auto without --model-layers is refused.
# Then a Megatron-LM layout string as --partition, and bad ones refused in one line each.
# usage: run_partition.sh BUBBLEBENCH MPIEXEC
BB=${1:?usage: $0 bubblebench mpiexec}
MPIEXEC=${2:?}
. "$(dirname "$0")/../check_lib.sh"  # strict mode, $HERE, $tmp, check, finish, run_or_exit
fail() {
  echo "FAIL: $*"
  cat "$tmp/err.txt"
  exit 1
}
timeout 300 "$MPIEXEC" -n 2 "$BB" run --stage transformer --hidden 16 --heads 2 --seq 8 \
  --mb-size 2 --vocab 4000 --model-layers 6 --partition auto --schedule 1f1b,interleaved -v 2 \
  -M 4 --check --iters 1 --warmup 0 --no-calibrate --timeout 60 --format json \
  >"$tmp/out.json" 2>"$tmp/err.txt" || fail "exit $?"
/usr/bin/python3 "$HERE/check_run_json.py" check "$tmp/out.json" --min-configs 2 || fail "check"
grep -E '^partition: [0-9,]+ \(predicted imbalance [0-9.]+ %(, not proven optimal)?; simulated step .* ms, even [0-9,]+: .* ms\)$' \
  "$tmp/err.txt" >"$tmp/lines.txt" || fail "no partition line"
[ "$(wc -l <"$tmp/lines.txt")" = 2 ] || fail "expected one partition line per run"
PYTHONPATH="$HERE" /usr/bin/python3 - "$tmp/out.json" "$tmp/lines.txt" <<'PY' || fail "partition"
import sys
from strict_json import load
rows = load(sys.argv[1])
printed = [l.split()[1] for l in open(sys.argv[2])]
even = {"1f1b": "3,3", "interleaved": "2,2,1,1"}
bad = []
for r, p in zip(rows, printed):
    blocks = [int(b) for b in r["partition"].split(",")]
    if r["partition"] != p:
        bad.append(f"{r['schedule']}: record {r['partition']} != printed {p}")
    if sum(blocks) != 6 or len(blocks) != {"1f1b": 2, "interleaved": 4}[r["schedule"]]:
        bad.append(f"{r['schedule']}: {r['partition']} is no split of 6 blocks")
    # P=2, looped: the head's chunk (the last) is on rank (K-1) % 2 with every other chunk.
    head_rank = sum(b for k, b in enumerate(blocks) if k % 2 == (len(blocks) - 1) % 2)
    if r["partition"] == even[r["schedule"]] or head_rank >= 6 - head_rank:
        bad.append(f"{r['schedule']}: {r['partition']} does not move blocks off the head")
    if "_partition=auto" not in r["run_key"]:
        bad.append(f"{r['schedule']}: run key {r['run_key']} does not say partition=auto")
print("\n".join(bad) or "partitions: " + " ".join(printed))
sys.exit(1 if bad else 0)
PY
"$MPIEXEC" -n 1 "$BB" run --partition auto --schedule 1f1b -M 1 >/dev/null 2>"$tmp/err.txt"
rc=$?
[ $rc = 2 ] || fail "--partition auto without --model-layers: exit $rc, expected 2"
grep -q -- "--partition needs --model-layers" "$tmp/err.txt" || fail "no message"
# A Megatron-LM layout string (model/layout.hpp): 5 blocks as 3,2 with the ends (--vocab) on the
# first and last stages; the record holds the split both ways; the run passes --check.
timeout 300 "$MPIEXEC" -n 2 "$BB" run --stage transformer --hidden 16 --heads 2 --seq 8 \
  --mb-size 2 --vocab 512 --model-layers 5 --partition 'Et*3|t*2,L' --schedule 1f1b -M 4 \
  --check --iters 1 --warmup 0 --no-calibrate --timeout 60 --format json \
  >"$tmp/layout.json" 2>"$tmp/err.txt" || fail "layout: exit $?"
PYTHONPATH="$HERE" /usr/bin/python3 - "$tmp/layout.json" <<'PY' || fail "layout record"
import sys
from strict_json import load
[r] = load(sys.argv[1])
got = (r["partition"], r["partition_layout"], r["model_layers"], r["check"])
want = ("3,2", "Et*3|t*2,L", 5, "pass")
print("layout:", got)
sys.exit(0 if got == want else 1)
PY
# Without --model-layers the layout gives it; a bad layout is one line, exit 2.
timeout 300 "$MPIEXEC" -n 2 "$BB" run --stage transformer --hidden 16 --heads 2 --seq 8 \
  --mb-size 2 --partition 'E(t|)*1t*2,L' --schedule 1f1b -M 2 --iters 1 --warmup 0 \
  --no-calibrate --timeout 60 --format json >"$tmp/layout2.json" 2>"$tmp/err.txt" ||
  fail "layout without --model-layers: exit $?"
grep -q '"partition": "1,2"' "$tmp/layout2.json" || fail "layout without --model-layers: split"
for bad in 'Et*3|t*2' 'Et*3|m|t,L' 'Et*3||t*2,L' 'Et*3|(t|t,L'; do
  "$MPIEXEC" -n 1 "$BB" run --stage transformer --model-layers 5 --partition "$bad" \
    --schedule 1f1b -M 1 >/dev/null 2>"$tmp/err.txt"
  rc=$?
  [ $rc = 2 ] || fail "--partition '$bad': exit $rc, expected 2"
  [ "$(wc -l <"$tmp/err.txt")" = 1 ] || fail "--partition '$bad': not one line"
  grep -q "^bubblebench: error: --partition: layout '" "$tmp/err.txt" || fail "'$bad': message"
done
echo "PASS"
