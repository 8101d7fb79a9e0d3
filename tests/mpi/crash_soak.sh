#!/usr/bin/env bash
# Crash safety of `run --out` (issue 23): a sweep is killed at a random moment, under CPU load,
# by one of SIGKILL, SIGINT, SIGTERM sent to rank 0 or to the launcher (mpiexec), alternately.
# After each kill:
#   - the file, if it exists, opens with h5py and holds only complete, readable runs, and they
#     are the first k runs of the sweep (each write is all or nothing; a kill while run k+1 was
#     written leaves exactly the file of run k);
#   - `--resume` exits 0, skips exactly those k runs (one `skipped` line each), writes the rest,
#     and leaves the k runs' contents (attributes, every dataset) unchanged;
#   - no process of the trial is left, no `.bb-tmp` or `.lock` file after the resume.
# Prints one line per failed trial and a count per signal; exit 0 only without failures.
#   usage: crash_soak.sh BUBBLEBENCH MPIEXEC [TRIALS_PER_SIGNAL]     (make crash-soak N=50)
# Environment: LOAD (busy-loop processes, default nproc; 0: none), ITERS (default 1000),
#   MLIST (-M of the sweep, default "32,64"),
#   DELAY_MS="min max" (kill after a random delay, default "400 4500"), PY (/usr/bin/python3),
#   SIGNALS (default "KILL INT TERM").
set -uo pipefail
BB=${1:?usage: $0 bubblebench mpiexec [trials per signal]}
MPIEXEC=${2:?}
N=${3:-50}
PY=${PY:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
LOAD=${LOAD:-$(nproc)}
ITERS=${ITERS:-1000}
read -r DMIN DMAX <<<"${DELAY_MS:-400 4500}"
SIGNALS=${SIGNALS:-KILL INT TERM}
tmp=$(mktemp -d /tmp/bb-crash.XXXXXX)
loadpids=()
launcher=
cleanup() {
  [ -n "$launcher" ] && kill -KILL -- "-$launcher" 2>/dev/null
  for p in "${loadpids[@]}"; do kill "$p" 2>/dev/null; done
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < LOAD; i++)); do
  yes >/dev/null &
  loadpids+=($!)
done
sweep=(--schedule "1f1b,gpipe,zb-h1" -M "${MLIST:-32,64}" --compute synthetic --t-f 0 --t-b 0
  --iters "$ITERS" --timeout 120)

# The sweep's runs in order, from a dry listing of the run keys: the order a sweep writes them.
order() { grep -oE '^\[[0-9]+/[0-9]+\] [^:]+' "$1" | sed 's/^\[[0-9]*\/[0-9]*\] //'; }

# Starts the sweep (own session, default signal dispositions), rank PIDs in $tmp/pid.R.
start() {  # out-file extra-args...
  local out=$1
  shift
  rm -f "$tmp"/pid.*
  # shellcheck disable=SC2016  # $$, $PMI_RANK, $0 and $@ belong to the inner shell
  setsid env --default-signal=INT,TERM "$MPIEXEC" -n 2 \
    bash -c 'echo $$ >"'"$tmp"'/pid.$PMI_RANK"; exec "$0" "$@"' \
    "$BB" run "${sweep[@]}" --out "$out" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt" &
  launcher=$!
}

# Waits for the launcher (at most 60 s), then kills whatever of its session is left.
reap() {  # -> launcher's exit status
  local i rc
  for ((i = 0; i < 600; i++)); do
    kill -0 "$launcher" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL -- "-$launcher" 2>/dev/null
  wait "$launcher" 2>/dev/null
  rc=$?
  launcher=
  return $rc
}

declare -A trials fails before_file
total_fail=0
t0=$(date +%s)
for sig in $SIGNALS; do
  trials[$sig]=0
  fails[$sig]=0
  before_file[$sig]=0
done
for ((t = 0; t < N; t++)); do
  for sig in $SIGNALS; do
    trials[$sig]=$((trials[$sig] + 1))
    target=$([ $((t % 2)) = 0 ] && echo rank0 || echo launcher)
    f=$tmp/r.h5
    rm -f "$f" "$f".*
    start "$f"
    delay=$((DMIN + RANDOM % (DMAX - DMIN + 1)))
    sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
    if [ "$target" = rank0 ]; then
      pid=$(cat "$tmp/pid.0" 2>/dev/null)
      [ -n "$pid" ] && kill "-$sig" "$pid" 2>/dev/null
    else
      kill "-$sig" "$launcher" 2>/dev/null
    fi
    reap
    rc=$?
    what="trial $t SIG$sig -> $target after ${delay} ms (launcher exit $rc)"
    problem=""
    if [ ! -e "$f" ]; then
      before_file[$sig]=$((before_file[$sig] + 1))
      : >"$tmp/keys0.txt"
    elif ! "$PY" "$HERE/crash_check.py" "$f" >"$tmp/keys0.txt" 2>"$tmp/check.err"; then
      problem="after the kill: $(tail -n 1 "$tmp/check.err" | head -c 300)"
    fi
    k=$(wc -l <"$tmp/keys0.txt")
    if [ -z "$problem" ]; then
      # Resume, unkilled, then compare.
      start "$f" --resume
      reap
      rc=$?
      order "$tmp/err.txt" >"$tmp/order.txt"
      skipped=$(grep -c 'skipped (complete in' "$tmp/err.txt")
      if [ $rc != 0 ]; then
        problem="resume exit $rc: $(grep -v '^\[' "$tmp/err.txt" | head -c 300)"
      elif ! "$PY" "$HERE/crash_check.py" "$f" >"$tmp/keys1.txt" 2>"$tmp/check.err"; then
        problem="after resume: $(tail -n 1 "$tmp/check.err" | head -c 300)"
      elif [ "$(wc -l <"$tmp/keys1.txt")" != 6 ]; then
        problem="after resume $(wc -l <"$tmp/keys1.txt") runs, not 6"
      elif [ "$skipped" != "$k" ]; then
        problem="resume skipped $skipped runs, the file held $k"
      elif [ -n "$(comm -23 <(sort "$tmp/keys0.txt") <(sort "$tmp/keys1.txt"))" ]; then
        problem="resume changed a run written before the kill"
      elif [ -e "$f.bb-tmp" ] || [ -e "$f.lock" ]; then
        problem="left behind: $(cd "$tmp" && ls r.h5.*)"
      else
        # The k runs kept are the first k of the sweep (the sweep writes in this order).
        head -n "$k" "$tmp/order.txt" | sed 's/[ ,]\+/_/g' >"$tmp/first.txt"
        cut -f1 "$tmp/keys0.txt" >"$tmp/kept.txt"
        while read -r label; do
          grep -q "^${label}_" "$tmp/kept.txt" || problem="run '$label' (of the first $k) not kept"
        done <"$tmp/first.txt"
      fi
    fi
    # Nothing of the trial may still run.
    for p in "$tmp"/pid.*; do
      [ -f "$p" ] || continue
      if kill -0 "$(cat "$p")" 2>/dev/null; then problem="$problem; rank $(cat "$p") still running"; fi
    done
    if [ -n "$problem" ]; then
      fails[$sig]=$((fails[$sig] + 1))
      total_fail=$((total_fail + 1))
      echo "FAIL: $what: $problem"
      if [ "${KEEP:-0}" = 1 ]; then cp "$f" "$tmp/fail-$t-$sig.h5" 2>/dev/null; fi
    else
      echo "ok: $what: $k of 6 runs kept, resumed"
    fi
  done
done
line="crash-soak ($LOAD load processes, --iters $ITERS, kill after ${DMIN}-${DMAX} ms, $(($(date +%s) - t0)) s):"
for sig in $SIGNALS; do
  line="$line SIG$sig ${trials[$sig]} trials ${fails[$sig]} failures (${before_file[$sig]} before the file existed);"
done
echo "$line"
[ "$total_fail" = 0 ]
