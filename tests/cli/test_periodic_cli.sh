#!/usr/bin/env bash
# The periodic passes behind the commands: sim, validate and show --lowered give the same output
# on the lists in periodic form (the default) as with every pass flat (BB_FLAT_PASSES=1), for
# every built-in schedule, at sizes where the periodic engine jumps and where it does not, with
# costs it takes (dyadic, link times) and costs it leaves to the plain engine (0.1).
BB=${1:?usage: $0 path/to/bubblebench}
# shellcheck source-path=SCRIPTDIR source=../check_lib.sh
. "$(dirname "$0")/../check_lib.sh"  # $tmp, check NAME RC, finish
# Same stdout and exit code both ways.
both() {  # name, args...
  local name=$1; shift
  timeout 120 "$BB" "$@" >"$tmp/p.out" 2>"$tmp/p.err"
  local rp=$?
  BB_FLAT_PASSES=1 timeout 120 "$BB" "$@" >"$tmp/f.out" 2>"$tmp/f.err"
  local rf=$?
  if [ "$rp" != 0 ] || [ "$rf" != 0 ]; then
    echo "  exit $rp (periodic) / $rf (flat) for: $*"; head -3 "$tmp/p.err" "$tmp/f.err"
    check "$name" 1
    return
  fi
  cmp -s "$tmp/p.out" "$tmp/f.out" || { echo "  outputs differ for: $*"; diff "$tmp/p.out" "$tmp/f.out" | head -5; }
  check "$name" $?
}

costs_exact="--t-f 1 --t-b 2 --t-w 1"
costs_link="--t-f 1 --t-b 1 --t-w 0.5 --latency 0.25 --act-bytes 8"
costs_inexact="--t-f 0.1 --t-b 0.3 --t-w 0.2"
all=naive,gpipe,1f1b,interleaved,zb-h1,zb-h2,zb-v,dualpipe,dualpipev
for size in "4 16" "8 64" "16 256"; do
  set -- $size
  P=$1 M=$2
  for c in "$costs_exact" "$costs_link" "$costs_inexact"; do
    # shellcheck disable=SC2086
    both "sim P=$P M=$M ($c)" sim -s "$all" -P "$P" -M "$M" -v 2,3 $c --format json
  done
  [ "$P" = 8 ] && continue
  for s in naive gpipe 1f1b interleaved zb-h1 zb-h2 zb-v dualpipe dualpipev; do
    v=1
    [ "$s" = interleaved ] && v=2
    both "validate $s P=$P M=$M v=$v" validate -s "$s" -P "$P" -M "$M" -v "$v"
    [ "$P" = 4 ] && both "show --lowered $s P=$P M=$M v=$v" show -s "$s" -P "$P" -M "$M" -v "$v" --lowered --format csv
  done
done

# A schedule the periodic validation refuses is reported as the flat one reports it.
printf '# bubblebench schedule\n# name=bad\n# P=2\n# M=2\n# v=1\n# placement=looped\n# lowered=0\n0F0,0F0,0BW0,0BW1\n1F0,1BW0,1F1,1BW1\n' >"$tmp/bad.csv"
timeout 30 "$BB" validate --csv "$tmp/bad.csv" >"$tmp/vp.out" 2>&1
rp=$?
BB_FLAT_PASSES=1 timeout 30 "$BB" validate --csv "$tmp/bad.csv" >"$tmp/vf.out" 2>&1
rf=$?
[ "$rp" = 1 ] && [ "$rp" = "$rf" ] && cmp -s "$tmp/vp.out" "$tmp/vf.out"
check "invalid csv: same report both ways" $?

echo "periodic cli: $pass passed, $fails failed"
[ "$fails" = 0 ]
