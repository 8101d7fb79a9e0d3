#!/usr/bin/env bash
# `run --out --resume` after a crash: a 6-run sweep is started, rank 1's process is SIGKILLed
# once two runs are complete (progress lines on stderr: rank 0 prints a run's line after
# writing it); the file must open and hold exactly the finished runs, all complete. `--resume`
# then runs only the missing ones (the others' progress lines say skipped), leaving the earlier
# runs' data unchanged. `--resume` on a truncated copy, or on a file of another schema_version,
# is refused with exit 2 on every rank and the file is not touched; `--force` replaces a file.
# A full disk mid-sweep (a file size limit, `ulimit -f`, with SIGXFSZ ignored: writes fail with
# EFBIG as with ENOSPC) exits 4, leaves only complete, readable runs, and `--resume` finishes.
# A CSV schedule changed under the same file name is a different run for `--resume`.
# usage: run_resume.sh BUBBLEBENCH MPIEXEC [PYTHON]
BB=${1:?usage: $0 bubblebench mpiexec [python]}
MPIEXEC=${2:?}
PY=${3:-/usr/bin/python3}
. "$(dirname "$0")/../check_lib.sh"  # strict mode, $HERE, $tmp, check, finish, run_or_exit
job=
cleanup() {
  [ -n "$job" ] && kill "$job" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
keys() {  # FILE -> "key<TAB>sha1(step_time_s)" per complete run; fails on a visible incomplete run
  "$PY" "$HERE/check_results.py" keys "$1"
}
sweep=(--schedule "gpipe,1f1b,zb-h1" -M "4,8" --compute synthetic --t-f 2ms --t-b 2ms --t-w 2ms
  --iters 15 --timeout 60)
out=$tmp/r.h5

# 1. The sweep, killed: rank 1's process gets SIGKILL after the second run's progress line.
# shellcheck disable=SC2016  # $$, $PMI_RANK, $0 and $@ belong to the inner shell
timeout 300 "$MPIEXEC" -n 2 bash -c 'echo $$ >"'"$tmp"'/pid.$PMI_RANK"; exec "$0" "$@"' \
  "$BB" run "${sweep[@]}" --out "$out" >"$tmp/out1.txt" 2>"$tmp/err1.txt" &
job=$!
for _ in $(seq 1 2400); do
  grep -q '^\[2/6\]' "$tmp/err1.txt" 2>/dev/null && break
  sleep 0.05
done
grep -q '^\[2/6\]' "$tmp/err1.txt" && [ -s "$tmp/pid.1" ]
check "two runs done before the kill" $?
kill -9 "$(cat "$tmp/pid.1")"
wait "$job"
rc=$?
job=
[ "$rc" != 0 ]
check "the killed launch fails (mpiexec exit $rc)" $?
done_lines=$(grep -cE '^\[[0-9]/6\] .*: [0-9.]+ s, elapsed' "$tmp/err1.txt")

keys "$out" >"$tmp/keys1.txt"
check "after the kill the file opens, every visible run is complete" $?
n1=$(wc -l <"$tmp/keys1.txt")
[ "$n1" -ge 2 ] && [ "$n1" -lt 6 ] && { [ "$n1" = "$done_lines" ] || [ "$n1" = $((done_lines + 1)) ]; }
check "the file holds the finished runs ($n1 runs, $done_lines progress lines)" $?
ok=0
while read -r label; do  # "gpipe P=2 M=4 v=1" -> key prefix gpipe_P=2_M=4_v=1_
  prefix=$(echo "$label" | sed -E 's/ /_/g')_
  grep -q "^$prefix" "$tmp/keys1.txt" || { ok=1; echo "  missing: $label"; }
done < <(sed -nE 's/^\[[0-9]\/6\] (.*): [0-9.]+ s, elapsed.*/\1/p' "$tmp/err1.txt")
check "every run with a progress line is in the file" $ok

# 2. --resume: only the missing runs, the earlier ones untouched.
timeout 300 "$MPIEXEC" -n 2 "$BB" run "${sweep[@]}" --out "$out" --resume \
  >"$tmp/out2.txt" 2>"$tmp/err2.txt"
rc=$?
[ $rc = 0 ] || cat "$tmp/err2.txt"
check "resume exit 0 (got $rc)" "$([ $rc = 0 ] && echo 0 || echo 1)"
skipped=$(grep -cE '^\[[0-9]/6\] .*: skipped \(complete in .*\)$' "$tmp/err2.txt")
ran=$(grep -cE '^\[[0-9]/6\] .*: [0-9.]+ s, elapsed' "$tmp/err2.txt")
[ "$skipped" = "$n1" ] && [ "$ran" = $((6 - n1)) ]
check "resume skipped $skipped (want $n1) and ran $ran (want $((6 - n1)))" $?
keys "$out" >"$tmp/keys2.txt"
check "after resume every run is complete" $?
[ "$(wc -l <"$tmp/keys2.txt")" = 6 ]
check "after resume the file holds all 6 runs" $?
[ -z "$(comm -23 <(sort "$tmp/keys1.txt") <(sort "$tmp/keys2.txt"))" ]
check "the earlier runs are unchanged (same keys, same step_time_s)" $?

# Resuming a complete file runs nothing.
timeout 300 "$MPIEXEC" -n 2 "$BB" run "${sweep[@]}" --out "$out" --resume \
  >"$tmp/out3.txt" 2>"$tmp/err3.txt"
rc=$?
[ $rc = 0 ] && [ "$(grep -c 'skipped (complete in' "$tmp/err3.txt")" = 6 ] &&
  [ "$(grep -c 'elapsed' "$tmp/err3.txt")" = 0 ]
check "resume of a complete file: 6 skipped, nothing run (exit $rc)" $?
keys "$out" | cmp -s - "$tmp/keys2.txt"
check "resume of a complete file leaves the runs as they were" $?

# 3. Refusals: every rank exits 2, one stderr line, the file keeps its bytes.
refuse() {  # name, file, expected stderr substring, extra args...
  local name=$1 file=$2 want=$3 r ok=0
  shift 3
  local before
  before=$(sha1sum <"$file")
  rm -f "$tmp"/rc.*
  # shellcheck disable=SC2016  # $@, $? and $PMI_RANK belong to the inner shell
  timeout 120 "$MPIEXEC" -n 2 bash -c '"$@"; echo $? >"'"$tmp"'/rc.$PMI_RANK"' _ \
    "$BB" run "${sweep[@]}" --out "$file" "$@" >"$tmp/outr.txt" 2>"$tmp/errr.txt"
  for r in 0 1; do
    [ "$(cat "$tmp/rc.$r" 2>/dev/null)" = 2 ] || { ok=1; echo "  rank $r exit $(cat "$tmp/rc.$r" 2>/dev/null)"; }
  done
  check "$name: exit 2 on every rank" $ok
  [ "$(wc -l <"$tmp/errr.txt")" = 1 ] && grep -q -- "$want" "$tmp/errr.txt"
  r=$?  # before the message's $(...) resets $?
  check "$name: one stderr line with '$want' (got: $(head -c 300 "$tmp/errr.txt"))" $r
  [ "$(sha1sum <"$file")" = "$before" ]
  check "$name: the file is unchanged" $?
}
cp "$out" "$tmp/trunc.h5"
truncate -s $(($(stat -c %s "$out") / 2)) "$tmp/trunc.h5"
refuse "resume of a truncated file" "$tmp/trunc.h5" "trunc.h5: .*truncated" --resume
"$PY" -c 'import h5py, sys
with h5py.File(sys.argv[1], "w") as f:
    f.attrs["schema_version"] = 1
    f.create_group("runs")' "$tmp/v2.h5"
refuse "resume of another schema_version" "$tmp/v2.h5" "schema_version 1" --resume
refuse "existing file without --resume or --force" "$out" "exists: pass --resume"

# 4. --force replaces the file.
timeout 300 "$MPIEXEC" -n 2 "$BB" run --schedule 1f1b -M 2 --compute synthetic --t-f 1ms \
  --t-b 1ms --iters 2 --out "$out" --force >"$tmp/out4.txt" 2>"$tmp/err4.txt"
rc=$?
n=$(keys "$out" | wc -l)
check "--force replaces the file (exit $rc, $n runs)" "$([ $rc = 0 ] && [ "$n" = 1 ] && echo 0 || echo 1)"

# 5. A full disk: the file may not grow past 250 KiB (UCX's shared memory must not use files,
# which the limit would cover too). Exit 4; every visible run complete and readable (`keys`
# reads every dataset); --resume with room again runs the rest and keeps the runs there.
full=$tmp/full.h5
UCX_TLS=sysv,self timeout 300 bash -c 'trap "" XFSZ; ulimit -f 250; exec "$@"' _ \
  "$MPIEXEC" -n 2 "$BB" run "${sweep[@]}" --out "$full" >"$tmp/out5.txt" 2>"$tmp/err5.txt"
rc=$?
grep -q "I/O error: .*full.h5: no room for run" "$tmp/err5.txt"
r=$?
check "a full disk: exit 4 (got $rc) with the reason ($(grep -m1 'error' "$tmp/err5.txt"))" \
  "$([ $rc = 4 ] && [ $r = 0 ] && echo 0 || echo 1)"
keys "$full" >"$tmp/keys5.txt"
check "after a full disk the file opens and every visible run is complete and readable" $?
n5=$(wc -l <"$tmp/keys5.txt")
[ "$n5" -ge 1 ] && [ "$n5" -lt 6 ]
check "after a full disk the file holds the runs written before ($n5)" $?
timeout 300 "$MPIEXEC" -n 2 "$BB" run "${sweep[@]}" --out "$full" --resume \
  >"$tmp/out6.txt" 2>"$tmp/err6.txt"
rc=$?
[ $rc = 0 ] && [ "$(grep -c 'skipped (complete in' "$tmp/err6.txt")" = "$n5" ] &&
  [ "$(keys "$full" | wc -l)" = 6 ] &&
  [ -z "$(comm -23 <(sort "$tmp/keys5.txt") <(keys "$full" | sort))" ]
check "resume after a full disk: exit $rc, runs $n5 skipped and kept, all 6 there" $?

# 6. csv:FILE with other contents under the same name is a new run; the same contents skip.
csvrun() {  # output file for stderr
  timeout 120 "$MPIEXEC" -n 2 "$BB" run --schedule "csv:$tmp/s.csv" --compute synthetic \
    --t-f 1ms --t-b 1ms --iters 2 --timeout 60 --out "$tmp/csv.h5" --resume >/dev/null 2>"$1"
}
"$BB" show --schedule 1f1b -P 2 -M 4 --format csv >"$tmp/s.csv"
csvrun "$tmp/errc1.txt"
rc1=$?
"$BB" show --schedule gpipe -P 2 -M 4 --format csv >"$tmp/s.csv"
csvrun "$tmp/errc2.txt"
rc2=$?
csvrun "$tmp/errc3.txt"
rc3=$?
[ $rc1 = 0 ] && [ $rc2 = 0 ] && grep -q 'elapsed' "$tmp/errc2.txt" &&
  ! grep -q 'skipped' "$tmp/errc2.txt"
r=$?  # before the message's $(...) resets $?
check "a changed CSV under the same name runs again (exit $rc1, $rc2: $(cat "$tmp/errc2.txt"))" $r
[ $rc3 = 0 ] && grep -q 'skipped (complete in' "$tmp/errc3.txt"
check "the same CSV again is skipped (exit $rc3)" $?
keys "$tmp/csv.h5" | cut -f1 >"$tmp/keysc.txt"
[ "$(wc -l <"$tmp/keysc.txt")" = 2 ] &&
  [ "$(grep -cE '^csv_.*s.csv_hash=[0-9a-f]{16}_P=2_M=4_' "$tmp/keysc.txt")" = 2 ]
r=$?
check "two runs, keys csv_…s.csv_hash=<16 hex>_P=2_M=4_… ($(tr '\n' ' ' <"$tmp/keysc.txt"))" $r

echo "run resume: $fails failures"
[ $fails = 0 ]
