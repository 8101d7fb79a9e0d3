#!/usr/bin/env bash
# Issue 18's sim figure, as docs/performance.md reports it: `sim --schedule S -P 512 -M 8192
# --t-f 1 --t-b 1 --t-w 1 --format json` (-v 2 for interleaved) for the nine schedules, 5 runs
# each, median wall / user / sys (s) and peak RSS (KiB) by /usr/bin/time. Given two binaries,
# they run in turn (old, new, old, ...) and the ratio new/old of the median walls is printed:
# the VM's speed changes by up to 1.4x within minutes, so only figures of one run compare.
# Run it on an idle machine. Usage: tools/sim-time.sh NEW_BINARY [OLD_BINARY]
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 NEW_BINARY [OLD_BINARY]" >&2; exit 2; }
NEW=$1
OLD=${2:-}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
median() { sort -n "$1" | sed -n 3p; }
echo "# $(date -u +%FT%TZ); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# schedule: [wall user sys rss_KiB] median of 5${OLD:+, old then new, new/old wall}"
for s in 1f1b naive gpipe interleaved zb-h1 zb-h2 zb-v dualpipe dualpipev; do
  v=()
  [ "$s" = interleaved ] && v=(-v 2)
  for _ in 1 2 3 4 5; do
    for which in old new; do
      bin=$NEW
      if [ "$which" = old ]; then
        [ -n "$OLD" ] || continue
        bin=$OLD
      fi
      /usr/bin/time -f "%e %U %S %M" -a -o "$TMP/$which" "$bin" sim --schedule "$s" -P 512 \
        -M 8192 "${v[@]}" --t-f 1 --t-b 1 --t-w 1 --format json > /dev/null
    done
  done
  if [ -n "$OLD" ]; then
    o=$(median "$TMP/old")
    n=$(median "$TMP/new")
    echo "$s: old [$o] new [$n] new/old $(awk -v a="${o%% *}" -v b="${n%% *}" 'BEGIN{printf "%.2f", b/a}')"
  else
    echo "$s: [$(median "$TMP/new")]"
  fi
  rm -f "$TMP/old" "$TMP/new"
done
