#!/usr/bin/env bash
# --dtype bf16 on CPU stages (issue 29): activations, gradients and messages in bf16, fp32
# master weights. The tiny preset with its ends, every schedule, M 4 and 8, --check must pass;
# a message carries exactly half the bytes of fp32's (message_bytes = mb_size·seq·hidden·2); a
# perturbed gradient still fails the bf16 check (exit 1 on every rank).
# usage: run_bf16.sh BUBBLEBENCH MPIEXEC
BB=${1:?usage: $0 bubblebench mpiexec}
MPIEXEC=${2:?}
. "$(dirname "$0")/../check_lib.sh"  # strict mode, $HERE, $tmp, check, finish, run_or_exit

run() {  # DTYPE NAME [ARGS...]: one launch, its JSON and stderr in the scratch folder; exit code
  local dtype=$1 out=$2
  shift 2
  timeout 300 "$MPIEXEC" -bind-to core -n 2 "$BB" run --backend cpu --dtype "$dtype" \
    --stage transformer --model tiny --schedule all -M 4,8 -v 2 --check --format json "$@" \
    >"$tmp/$out.json" 2>"$tmp/$out.err"
}

run bf16 bf16
rc=$?
[ $rc = 0 ] || cat "$tmp/bf16.err"
check "bf16: every schedule's --check passes (exit $rc)" $rc
/usr/bin/python3 "$HERE/check_run_json.py" check "$tmp/bf16.json" --min-configs 20
check "bf16: 20 configurations, every check passed" $?
run fp32 fp32 --schedule 1f1b -M 4
check "fp32: runs" $?
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
from pathlib import Path
d = Path(sys.argv[1])
bf16 = json.loads((d / "bf16.json").read_text())
fp32 = json.loads((d / "fp32.json").read_text())
ok = True
for r in bf16:
    want = r["mb_size"] * r["seq"] * r["hidden"] * 2
    if r["dtype"] != "bf16" or r["message_bytes"] != want:
        print(f"{r['schedule']} M={r['M']}: dtype {r['dtype']}, message_bytes {r['message_bytes']} != {want}")
        ok = False
if fp32[0]["message_bytes"] != 2 * bf16[0]["message_bytes"]:
    print(f"fp32 message_bytes {fp32[0]['message_bytes']} is not twice bf16's {bf16[0]['message_bytes']}")
    ok = False
sys.exit(0 if ok else 1)
PY
check "message_bytes: bf16 exactly half of fp32" $?

# A wrong gradient (rank 1's perturbed) fails the bf16 check: exit 1.
run bf16 perturbed --schedule 1f1b,zb-v -M 4 --debug-perturb-grads 1
rc=$?
[ $rc = 1 ]
check "bf16: a perturbed gradient fails the check (exit $rc, want 1)" $?
grep -q '"check": "fail"' "$tmp/perturbed.json"
check "bf16: the record says fail" $?
finish "bf16"
