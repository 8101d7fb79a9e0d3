#!/usr/bin/env bash
# The "Same results" check of docs/performance.md: `sim --format json` of two binaries over a
# fixed grid (all nine schedules, v = 2 and 3 for interleaved, (P, M) from (3, 12) to (512, 8192),
# uniform and uneven per-chunk costs, FB overlap, latency, several steps), each case's stdout,
# stderr and exit code in one file, then `diff -r` of the two folders. Exit status 0 when every
# case is byte for byte the same. About 30 s per binary at P = 512 on the 2-core VM.
# Usage: tools/sim-compare.sh OLD_BINARY NEW_BINARY [WORK_DIR]
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OLD_BINARY NEW_BINARY [WORK_DIR]" >&2; exit 2; }
for b in "$1" "$2"; do [ -x "$b" ] || { echo "sim-compare: $b is not executable" >&2; exit 2; }; done
WORK=${3:-$(mktemp -d)}
scheds="naive gpipe 1f1b interleaved zb-h1 zb-h2 zb-v dualpipe dualpipev"
costs=("--t-f 1 --t-b 1 --t-w 1" "--t-f 1 --t-b 2 --t-w 1" "--t-f 1.3 --t-b 0.7 --t-w 0.2"
       "--t-f 2 --t-b 1 --t-w 0.5 --t-fb 2.5" "--t-f 1 --t-b 1 --t-w 1 --latency 0.25 --steps 6")
each_cost() {  # each_cost N CMD...: CMD with each of the first N cost sets appended
  local n=$1 c cost
  shift
  for c in "${costs[@]:0:n}"; do
    read -ra cost <<< "$c"
    "$@" "${cost[@]}"
  done
}
grid() {  # calls "$@" with every case's arguments appended
  local s v pm P M
  for s in $scheds; do
    local vs=1
    [ "$s" = interleaved ] && vs="2 3"
    for v in $vs; do
      for pm in "4 8" "8 64" "16 256" "64 1024" "6 7" "5 20" "3 12"; do
        read -r P M <<< "$pm"
        each_cost 3 "$@" --schedule "$s" -v "$v" -P "$P" -M "$M"
      done
      for pm in "128 4096" "96 6000" "256 2048" "64 16384"; do
        read -r P M <<< "$pm"
        each_cost 5 "$@" --schedule "$s" -v "$v" -P "$P" -M "$M"
      done
      "$@" --schedule "$s" -v "$v" -P 512 -M 8192 --t-f 1 --t-b 1 --t-w 1
      "$@" --schedule "$s" -v "$v" -P 512 -M 8192 --t-f 1 --t-b 2 --t-w 1 --steps 3
      "$@" --schedule "$s" -v "$v" -P 32 -M 4096 --t-f 1 --t-b 1 --t-w 0 --latency 0.5 --steps 2
    done
  done
  # uneven per-stage / per-chunk costs
  for s in 1f1b zb-h1 gpipe; do
    "$@" --schedule "$s" -P 4 -M 64 --t-f 1,2,1,3 --t-b 2,2,1,1 --t-w 1,0.5,1,1
  done
  "$@" --schedule interleaved -v 2 -P 4 -M 64 --t-f 1,2,1,3,1,1,2,1 --t-b 2 --t-w 1
  for s in 1f1b zb-h1 zb-h2 gpipe naive; do
    "$@" --schedule "$s" -P 4 -M 64 --t-f 1 --t-b 1 --t-w 1,1,1,50
    "$@" --schedule "$s" -P 4 -M 16 --t-f 1 --t-b 1 --t-w 1,1,1,50 --steps 2
    "$@" --schedule "$s" -P 8 -M 256 --t-f 1 --t-b 1,1,1,1,1,1,1,9 --t-w 1 --latency 0.5
    "$@" --schedule "$s" -P 8 -M 256 --t-f 4,1,1,1,1,1,1,1 --t-b 1 --t-w 0
  done
  for s in zb-v dualpipe dualpipev; do
    "$@" --schedule "$s" -P 4 -M 64 --t-f 1 --t-b 1 --t-w 1,1,1,1,1,1,1,50
    "$@" --schedule "$s" -P 4 -M 64 --t-f 1 --t-b 1 --t-w 50,1,1,1,1,1,1,1
  done
}
one() {  # one BINARY OUT_DIR args...
  local bin=$1 out=$2
  shift 2
  local f
  f=$out/$(echo "$*" | tr ' /' '_+').txt
  "$bin" sim "$@" --format json > "$f" 2>&1
  echo "rc=$?" >> "$f"
}
mkdir -p "$WORK/old" "$WORK/new"
grid one "$1" "$WORK/old"
grid one "$2" "$WORK/new"
n=$(find "$WORK/new" -name '*.txt' | wc -l)
if diff -r "$WORK/old" "$WORK/new" > "$WORK/diff.txt"; then
  echo "sim-compare: $n cases, identical ($WORK)"
else
  echo "sim-compare: $n cases, $(grep -c '^diff' "$WORK/diff.txt") differ: $WORK/diff.txt" >&2
  exit 1
fi
