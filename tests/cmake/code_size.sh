#!/usr/bin/env bash
# The size limits of design §2.1: bench/cli/run.cpp at most 500 lines, and no function longer
# than 120 lines in src/, bench/ (C++) or analysis/ (Python functions and methods; issue 30).
# universal-ctags gives each function's first and last line. Exit 77 (skipped) without
# universal-ctags.
# usage: code_size.sh SOURCE_DIR
set -uo pipefail
SRC=${1:?usage: $0 source-dir}
MAX_FUNCTION=120
MAX_RUN_CPP=500
if ! ctags --version 2>/dev/null | grep -q 'Universal Ctags'; then
  echo "skip: universal-ctags is not installed (make deps installs it)"
  exit 77
fi
fails=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

lines=$(wc -l <"$SRC/bench/cli/run.cpp")
if [ "$lines" -le $MAX_RUN_CPP ]; then
  echo "ok: bench/cli/run.cpp has $lines lines (at most $MAX_RUN_CPP)"
else
  echo "FAIL: bench/cli/run.cpp has $lines lines (at most $MAX_RUN_CPP)"
  fails=$((fails + 1))
fi

# one row per function definition: LENGTH FILE:LINE NAME
(cd "$SRC" && ctags -R --languages=C++ --kinds-C++=f --fields=+ne -x \
  --_xformat='%{end} %{line} %F %N' src bench &&
  ctags -R --languages=Python --kinds-Python=fm --fields=+ne -x \
    --_xformat='%{end} %{line} %F %N' analysis) >"$tmp" 2>/dev/null
count=$(awk 'NF >= 4' "$tmp" | wc -l)
# the listing must see the code it judges: run.cpp's functions, the core's, the analysis'
for where in ' bench/cli/run.cpp ' ' src/schedule/' ' src/sim/' ' analysis/bbanalysis/plots.py '; do
  if [ "$count" -lt 500 ] || ! grep -q "$where" "$tmp"; then
    echo "FAIL: ctags listed $count functions, none in '$where' (expected src/, bench/, analysis/)"
    exit 1
  fi
done
long=$(awk -v max=$MAX_FUNCTION 'NF >= 4 { n = $1 - $2 + 1; if (n > max) print n " lines: " $3 ":" $2 " " $4 }' "$tmp")
if [ -z "$long" ]; then
  longest=$(awk 'NF >= 4 { n = $1 - $2 + 1; print n " lines: " $3 ":" $2 " " $4 }' "$tmp" | sort -rn | head -1)
  echo "ok: $count functions in src/, bench/ and analysis/, none over $MAX_FUNCTION lines (longest $longest)"
else
  echo "FAIL: functions over $MAX_FUNCTION lines:"
  while IFS= read -r row; do echo "  $row"; done <<<"$long"
  fails=$((fails + 1))
fi
exit $((fails > 0))
