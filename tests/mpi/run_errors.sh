#!/usr/bin/env bash
# Configuration errors exit 2 on every rank with exactly one line on stderr (printed once,
# before any point-to-point traffic); the watchdog turns a hang into exit 3 with the line
# "rank R: waiting RECV_x chunk c mb m from rank q".
# usage: run_errors.sh BUBBLEBENCH MPIEXEC
BB=${1:?usage: $0 bubblebench mpiexec}
MPIEXEC=${2:?}
# shellcheck source-path=SCRIPTDIR source=../check_lib.sh
. "$(dirname "$0")/../check_lib.sh"  # $tmp, check NAME RC, finish

# Runs `bubblebench run ARGS` on N ranks; every rank's exit code lands in $tmp/rc.<rank>.
launch() {  # N, args...
  local n=$1; shift
  rm -f "$tmp"/rc.*
  timeout 120 "$MPIEXEC" -n "$n" bash -c '"$@"; echo $? >"'"$tmp"'/rc.$PMI_RANK"' _ "$BB" run "$@" \
    >"$tmp/out.txt" 2>"$tmp/err.txt"
}

reject() {  # name, expected exit code, expected stderr substring, N, args...
  local name=$1 want_rc=$2 want=$3 n=$4; shift 4
  launch "$n" "$@"
  local ok=0 r
  for ((r = 0; r < n; r++)); do
    [ "$(cat "$tmp/rc.$r" 2>/dev/null)" = "$want_rc" ] || { ok=1; echo "  rank $r exit: $(cat "$tmp/rc.$r" 2>/dev/null)"; }
  done
  check "$name: exit $want_rc on every rank" $ok
  [ "$(wc -l <"$tmp/err.txt")" = 1 ] && grep -q -- "$want" "$tmp/err.txt"
  local r=$?  # before the message's $(...) resets $?
  check "$name: one stderr line with '$want' (got: $(head -c 300 "$tmp/err.txt"))" $r
  [ ! -s "$tmp/out.txt" ]
  check "$name: nothing on stdout" $?
}

reject "rejected configuration" 2 "interleaved: M must split into max(1, M/P) equal rounds" 2 \
  --schedule interleaved -M 5 -v 2
reject "rejected configuration, 4 ranks" 2 "dualpipe: M must be even" 4 --schedule dualpipe -M 6
reject "P mismatch" 2 "-P 3 does not match the MPI world size 2" 2 -P 3
reject "P mismatch, 4 ranks" 2 "-P 2 does not match the MPI world size 4" 4 -P 2 --schedule gpipe
reject "unknown flag" 2 "--bogus" 2 --bogus
reject "bad LIST" 2 "-M" 2 -M 4:x
reject "unknown schedule" 2 "unknown schedule" 2 --schedule nope
reject "unknown dtype" 2 "--dtype" 2 --dtype fp16
reject "check with synthetic compute" 2 "--check needs --compute gemm" 2 --check --compute synthetic
reject "bad duration" 2 "--t-f" 2 --compute synthetic --t-f 2xs
reject "a duration list" 2 "--t-f takes one duration" 2 --compute synthetic --t-f 1ms,
reject "world size 1, schedule needs P >= 2" 2 "dualpipe" 1 --schedule dualpipe -M 4
reject "a sweep with nothing accepted" 2 "dualpipe: P must be even" 3 --schedule dualpipe -M 4,6,8
reject "bad --hidden" 2 "--hidden must be 1..65536 (got 100000)" 2 --hidden 16,100000
reject "bad --mb-size LIST" 2 "--mb-size" 2 --mb-size 4:x
# Outputs (rank 0 opens them after the setup, before any point-to-point message): exit 2.
reject "--resume without --out" 2 "--resume needs --out" 2 --resume
reject "--force without --out" 2 "--force needs --out" 2 --force
reject "--resume with --force" 2 "exclude each other" 2 --out "$tmp/x.h5" --resume --force
reject "--out in a missing folder" 2 "does not exist" 2 --out "$tmp/no/such/dir/x.h5"
reject "--out ''" 2 "--out: an empty path" 2 --out ''
reject "--trace ''" 2 "--trace: an empty path" 2 --trace ''
reject "--seed past 2^64-1" 2 "'18446744073709551616' is not an integer" 2 --seed 18446744073709551616
reject "--seed negative" 2 "'-1' is not an integer" 2 --seed -1
reject "--out where no file can be made" 2 "/proc/bb-test.h5" 2 --out /proc/bb-test.h5
: >"$tmp/exists.h5"
reject "--out exists" 2 "exists: pass --resume to continue it or --force" 2 --out "$tmp/exists.h5"
reject "--resume of a file that is not HDF5" 2 "not a readable HDF5 file" 2 \
  --out "$tmp/exists.h5" --resume
# Another process writing the same --out (the same sweep started twice): refused in any mode.
# A POSIX record lock (Python's lockf) conflicts with the writer's open-file-description lock.
/usr/bin/python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "w"); f.write("pid 4242 on elsewhere\n"); f.flush()
fcntl.lockf(f, fcntl.LOCK_EX); open(sys.argv[2], "w").close(); time.sleep(120)' \
  "$tmp/busy.h5.lock" "$tmp/locked" &
holder=$!
for _ in $(seq 100); do [ -e "$tmp/locked" ] && break; sleep 0.1; done
reject "--out written by another process" 2 \
  "busy.h5 is being written by another bubblebench (pid 4242 on elsewhere)" 2 --out "$tmp/busy.h5"
reject "--resume of a file another process writes" 2 "is being written by another" 2 \
  --out "$tmp/busy.h5" --resume
kill $holder; wait $holder 2>/dev/null
[ ! -e "$tmp/busy.h5" ]
check "a refused writer leaves no file" $?
reject "--trace where no folder can be made" 2 "--trace /proc/bb-trace" 2 --trace /proc/bb-trace

# The rest of the bad-input matrix (issue 8): sizes, iterations, devices, CSV, schema, flags.
reject "M < 2P for dualpipev" 2 "dualpipev: M must be >= 2P (got M=2, P=2)" 2 --schedule dualpipev -M 2
reject "non-integer size" 2 "--hidden: '2.5' is not a list of positive integers" 2 --hidden 2.5
reject "negative size" 2 "--mb-size: '-1' has a value out of range" 2 --mb-size=-1
reject "negative layers" 2 "--layers: '-1' has a value out of range" 2 --layers=-1
reject "hidden size 0" 2 "--hidden: '0' has a value out of range" 2 --hidden 0
reject "M = 0" 2 "-M: '0' has a value out of range" 2 -M 0
reject "zero iterations" 2 "--iters must be 1..100000" 2 --iters 0
reject "negative warmup" 2 "--warmup must be 0..100000" 2 --warmup=-1
reject "zero timeout" 2 "--timeout must be > 0 seconds" 2 --timeout 0
reject "negative time" 2 "--t-f: '-1ms' is not a non-negative number" 2 --compute synthetic --t-f=-1ms
reject "backend cuda without a GPU" 2 "--backend cuda: " 2 --backend cuda
# "needs --backend cuda" in a CUDA build, "built without NCCL" in one without.
reject "transport nccl on cpu, or without NCCL" 2 "--transport nccl: " 2 --transport nccl
reject "unreadable CSV schedule" 2 "cannot read schedule CSV" 2 --schedule csv:"$tmp/none.csv"
printf '0F0,0QQ1\n1F0\n' >"$tmp/garbage.csv"
reject "malformed CSV schedule" 2 "CSV line 1: bad action '0QQ1'" 2 --schedule csv:"$tmp/garbage.csv"
printf '0F0,0\0BW0\n1F0,1BW0\n' >"$tmp/nul.csv"
reject "CSV schedule with a NUL byte" 2 'CSV line 1: control byte .x00 at column 6' 2 --schedule csv:"$tmp/nul.csv"
! LC_ALL=C grep -q '[[:cntrl:]]' <(tr -d '\n' <"$tmp/err.txt")
check "CSV schedule with a NUL byte: no control byte in the message" $?
/usr/bin/python3 -c "import h5py, sys; f = h5py.File(sys.argv[1], 'w'); f.attrs['schema_version'] = 1; f.create_group('runs')" "$tmp/v2.h5"
reject "results file of another schema" 2 "has schema_version 1" 2 --out "$tmp/v2.h5" --resume
reject "contradictory: --sync none with one iteration" 2 "needs --iters >= 2" 2 --sync none --iters 1

# Limits checked up front (issue 23): a model that cannot fit in memory is refused before the
# sweep with what it needs and what is available (it used to die with std::bad_alloc, exit 1).
reject "--hidden 65536: memory estimated up front" 2 \
  "needs about 512.1 GiB on .* (2 ranks; rank 0: weights 128.0 GiB, gradients 128.0 GiB,.*) but .* is available" \
  2 --hidden 65536 --out "$tmp/huge.h5"
[ ! -e "$tmp/huge.h5" ] && [ ! -e "$tmp/huge.h5.lock" ]
check "--hidden 65536: no results file left behind" $?
# A run key longer than a file name (a csv: schedule in a folder with a long name): the trace
# file's name is shortened with a hash, not an I/O error in the middle of the sweep.
long="$tmp/$(printf 'd%.0s' $(seq 200))"
mkdir -p "$long"
"$BB" show --schedule 1f1b -P 2 -M 4 --format csv >"$long/s.csv"
timeout 120 "$MPIEXEC" -n 2 "$BB" run --schedule "csv:$long/s.csv" --compute synthetic --t-f 0 \
  --t-b 0 --iters 1 --warmup 0 --no-calibrate --trace "$tmp/traces" >"$tmp/out.txt" 2>"$tmp/err.txt"
rc=$?
[ $rc = 0 ] && [ "$(find "$tmp/traces" -name '*.json' | wc -l)" = 1 ]
check "--trace with a run key longer than a file name: exit 0 (got $rc: $(head -c 200 "$tmp/err.txt")), one trace" $?

# Help: exit 0 everywhere, printed once.
launch 2 --help
[ "$(cat "$tmp/rc.0")" = 0 ] && [ "$(cat "$tmp/rc.1")" = 0 ] && [ "$(grep -c -- '--schedule' "$tmp/out.txt")" = 1 ]
check "help printed once, exit 0" $?

# MPMD launches whose ranks were given other arguments (issue 23): every rank's argument list is
# compared with rank 0's before any work. Exit 2 on every rank at once, one line naming the first
# differing rank and argument, nothing on stdout, no file left behind.
rec='"$@"; echo $? >"'"$tmp"'/rc.$PMI_RANK"'
mpmd() {  # name, expected stderr substring, file that must not exist ('' for none), command, args of rank 0 -- args of rank 1
  local name=$1 want=$2 left=$3 cmd=$4 start r
  shift 4
  local a0=() a1=()
  while [ "$1" != -- ]; do a0+=("$1"); shift; done
  shift
  a1=("$@")
  rm -f "$tmp"/rc.*
  start=$(date +%s)
  timeout 120 "$MPIEXEC" -n 1 bash -c "$rec" _ "$BB" "$cmd" "${a0[@]}" \
    : -n 1 bash -c "$rec" _ "$BB" "$cmd" "${a1[@]}" >"$tmp/out.txt" 2>"$tmp/err.txt"
  [ "$(cat "$tmp/rc.0" 2>/dev/null)" = 2 ] && [ "$(cat "$tmp/rc.1" 2>/dev/null)" = 2 ] &&
    [ "$(wc -l <"$tmp/err.txt")" = 1 ] && grep -q -- "$want" "$tmp/err.txt" && [ ! -s "$tmp/out.txt" ]
  r=$?
  check "$name: exit 2 on every rank, one line with '$want' (got: $(head -c 300 "$tmp/err.txt"))" $r
  [ $(($(date +%s) - start)) -lt 30 ]
  check "$name: no wait for the watchdog" $?
  if [ -n "$left" ]; then
    [ ! -e "$left" ] && [ ! -e "$left.lock" ]
    check "$name: nothing left behind" $?
  fi
}
mpmd "MPMD, --out on rank 0 only" \
  "rank 1 was given other arguments than rank 0: argument 8 is '--out' on rank 0 and is missing on rank 1" \
  "$tmp/mpmd.h5" run -M 4 --compute synthetic --timeout 60 --out "$tmp/mpmd.h5" \
  -- -M 4 --compute synthetic --timeout 60
mpmd "MPMD, --check on rank 1 only" \
  "argument 8 is missing on rank 0 and is '--check' on rank 1" "" \
  run -M 4 --hidden 16 --timeout 60 -- -M 4 --hidden 16 --timeout 60 --check
mpmd "MPMD, other -M" "argument 3 is '4' on rank 0 and is '8' on rank 1" "" \
  run -M 4 --compute synthetic -- -M 8 --compute synthetic
mpmd "MPMD calibrate, other --reps" "argument 3 is '3' on rank 0 and is '4' on rank 1" "" \
  calibrate --reps 3 --max-bytes 64 -- --reps 4 --max-bytes 64

# Ranks given the same arguments that build different sweeps (a csv: file that differs between
# nodes; here: the same relative path in another folder): exit 2 at once with one line.
mkdir -p "$tmp/node0" "$tmp/node1"
"$BB" show --schedule 1f1b -P 2 -M 4 --format csv >"$tmp/node0/s.csv"
"$BB" show --schedule gpipe -P 2 -M 4 --format csv >"$tmp/node1/s.csv"
rm -f "$tmp"/rc.*
start=$(date +%s)
bb_abs=$(readlink -f "$BB")
# shellcheck disable=SC2016  # $1.. belong to the inner shells
timeout 120 "$MPIEXEC" -n 1 bash -c 'cd "$1" && shift && '"$rec" _ "$tmp/node0" "$bb_abs" run \
  --schedule csv:s.csv --compute synthetic --timeout 60 \
  : -n 1 bash -c 'cd "$1" && shift && '"$rec" _ "$tmp/node1" "$bb_abs" run \
  --schedule csv:s.csv --compute synthetic --timeout 60 >"$tmp/out.txt" 2>"$tmp/err.txt"
[ "$(cat "$tmp/rc.0" 2>/dev/null)" = 2 ] && [ "$(cat "$tmp/rc.1" 2>/dev/null)" = 2 ] &&
  [ "$(wc -l <"$tmp/err.txt")" = 1 ] &&
  grep -q "rank 1 built other configurations than rank 0" "$tmp/err.txt" && [ ! -s "$tmp/out.txt" ]
r=$?
check "ranks with other sweeps: exit 2, one line (got: $(head -c 300 "$tmp/err.txt"))" $r
[ $(($(date +%s) - start)) -lt 30 ]
check "ranks with other sweeps: no wait for the watchdog" $?

# The watchdog during the setup (rank 1 stalls before the first collective): exit 3 with the
# waiting line once, not exit 2 and not "rank 0: rank 0:".
start=$(date +%s)
timeout 120 "$MPIEXEC" -n 2 "$BB" run -M 4 --hidden 16 --timeout 1 --debug-stall-setup 1 \
  >"$tmp/out.txt" 2>"$tmp/err.txt"
rc=$?
[ $rc = 3 ] && [ "$(wc -l <"$tmp/err.txt")" = 1 ] && grep -Eq '^rank 0: waiting [^:]+$' "$tmp/err.txt"
r=$?
check "watchdog in the setup: exit 3 (got $rc), one line (got: $(head -c 300 "$tmp/err.txt"))" $r
[ $(($(date +%s) - start)) -lt 30 ]
check "watchdog in the setup fired within 30 s" $?

# Watchdog: rank 0 drops its sends; a wait exceeds --timeout 1: exit 3 and the waiting line.
start=$(date +%s)
timeout 120 "$MPIEXEC" -n 2 "$BB" run --schedule 1f1b -M 4 --hidden 16 --mb-size 4 --iters 1 \
  --warmup 0 --timeout 1 --debug-drop-sends 0 >"$tmp/out.txt" 2>"$tmp/err.txt"
rc=$?
check "watchdog exit 3 (got $rc)" $([ $rc = 3 ] && echo 0 || echo 1)
grep -Eq '^rank [01]: waiting RECV_[FB] chunk [0-9]+ mb [0-9]+ from rank [01]$' "$tmp/err.txt"
r=$?
check "watchdog line (got: $(head -c 300 "$tmp/err.txt"))" $r
[ $(($(date +%s) - start)) -lt 30 ]
check "watchdog fired within 30 s" $?

# A failing --check: the table says fail, every rank exits 1.
launch 2 --schedule 1f1b -M 4 --hidden 16 --mb-size 4 --iters 1 --warmup 0 --check \
  --debug-perturb-grads 1
[ "$(cat "$tmp/rc.0")" = 1 ] && [ "$(cat "$tmp/rc.1")" = 1 ]
check "failed check: exit 1 on every rank" $?
grep -q "^1f1b .* fail *$" "$tmp/out.txt" && grep -q "^check failed: 1f1b" "$tmp/out.txt"
r=$?
check "failed check reported (got: $(head -c 400 "$tmp/out.txt"))" $r

# A table that cannot reach standard output is an I/O error (one rank, started without mpiexec:
# under mpiexec a proxy, not the rank, writes the rank's stdout).
timeout 120 "$BB" run --schedule 1f1b -M 4 --hidden 16 --mb-size 4 --iters 1 --warmup 0 \
  >/dev/full 2>"$tmp/err.txt"
rc=$?
[ $rc = 4 ] && grep -q "cannot write standard output" "$tmp/err.txt"
r=$?
check "stdout on a full device: exit 4 (got $rc: $(tail -c 200 "$tmp/err.txt"))" $r

# Commands of one process (no MPI): exit code, exactly one stderr line, nothing left behind.
one() {  # name, expected exit code, expected stderr substring, command...
  local name=$1 want_rc=$2 want=$3 rc r
  shift 3
  "$@" >"$tmp/out1.txt" 2>"$tmp/err1.txt"
  rc=$?
  [ "$rc" = "$want_rc" ] && [ "$(wc -l <"$tmp/err1.txt")" = 1 ] && grep -q -- "$want" "$tmp/err1.txt"
  r=$?
  check "$name: exit $want_rc (got $rc), one stderr line with '$want' (got: $(head -c 300 "$tmp/err1.txt"))" $r
}
# A closed pipe: exit 4 with one line, not death by SIGPIPE (141). The listing is far larger
# than a pipe's buffer, so writes go on after `head` has gone.
# shellcheck disable=SC2016  # $1, $2 and PIPESTATUS belong to the inner shell
timeout 120 bash -c '"$1" show --schedule 1f1b -P 8 -M 4096 --lowered 2>"$2" | head -1 >/dev/null
  exit "${PIPESTATUS[0]}"' _ "$BB" "$tmp/errp.txt"
rc=$?
[ $rc = 4 ] && [ "$(wc -l <"$tmp/errp.txt")" = 1 ] && grep -q "cannot write standard output" "$tmp/errp.txt"
r=$?
check "show --lowered | head -1: exit 4 (got $rc), one line (got: $(head -c 200 "$tmp/errp.txt"))" $r
# sim --timeline on a write failure removes only a file it created: a symlink to a device that
# fails every write (/dev/full) stays, and so does the device.
ln -s /dev/full "$tmp/timeline.json"
one "sim --timeline into a symlink to /dev/full" 4 "error writing trace '$tmp/timeline.json'" \
  "$BB" sim --schedule 1f1b -P 2 -M 4 --t-f 1 --t-b 1 --timeline "$tmp/timeline.json"
[ -L "$tmp/timeline.json" ] && [ -c /dev/full ]
check "sim --timeline: the symlink and /dev/full are still there" $?

# Decide up front, then speak once: skip:/note: lines wait until the setup (run) or every
# configuration (sim) is through, so an error is the only line (issue 23).
reject "--schedule all with an --out that cannot be made: no skip: lines first" 2 \
  "x.h5" 2 --schedule all -M 4 --compute synthetic --out /nonexistent/x.h5
one "sim: a cost list one of the schedules cannot take, no note: first" 2 \
  "--t-f: a cost list needs 1 value or one per chunk (4 for interleaved P=2 M=4 v=2), got 2" \
  "$BB" sim --schedule 1f1b,interleaved -P 2 -M 4 -v 2 --t-f 1,2
# sim --steps is counted in the sweep's work estimate (it used to run for minutes).
one "sim --steps in the work estimate" 2 "would simulate about .* --steps 1000 counted" \
  "$BB" sim --schedule zb-h1 -P 512 -M 8192 --steps 1000

finish "run errors"
