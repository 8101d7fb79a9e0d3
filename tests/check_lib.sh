# Shared by test scripts (source it: `. "$(dirname "$0")/../check_lib.sh"`): strict mode, the
# script's folder in $HERE, a scratch folder $tmp removed at exit, and check NAME RC, which
# counts RC 0 as passed and prints "FAIL: NAME" otherwise; finish prints the counts and returns
# 0 only without failures. Also: a refusal of `$BB` (refused), one run whose failure ends the
# test (run_or_exit) and the retries of a timing test (retry_attempts).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
pass=0
check() {  # name, condition result
  if [ "$2" = 0 ]; then pass=$((pass + 1)); else echo "FAIL: $1"; fails=$((fails + 1)); fi
}
finish() {  # what was tested
  echo "$1: $pass passed, $fails failed"
  [ "$fails" = 0 ]
}

# `$BB ARGS` is refused: exit 2 and exactly one line on stderr, which holds `want`.
refused() {  # want, args...
  local want=$1
  shift
  timeout 30 "$BB" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" = 2 ] || { echo "  rc=$rc for: $*"; cat "$tmp/err"; }
  [ "$(wc -l <"$tmp/err")" = 1 ] || { echo "  stderr lines: $(wc -l <"$tmp/err") for: $*"; cat "$tmp/err"; }
  grep -q -- "$want" "$tmp/err" || { echo "  missing '$want' in: $(cat "$tmp/err")"; return 1; }
  [ "$rc" = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ]
}

# Runs a command with stdout in ${tmp}/out.json and stderr in ${tmp}/err.txt; when it fails, prints
# its exit code and stderr and ends the test (exit 1).
run_or_exit() {  # command...
  "$@" >"$tmp/out.json" 2>"$tmp/err.txt"
  local rc=$?
  if [ $rc != 0 ]; then
    echo "FAIL: exit $rc"
    cat "$tmp/err.txt"
    exit 1
  fi
}

# Timing on a shared 2-core machine is noisy (another process can delay a sleeping rank by
# milliseconds): calls the test's attempt() up to three times in all, until one returns 0.
# attempt() returns 2 when a run fails outright, which is not noise: no retry. The tolerance
# itself is never relaxed. Returns 0 when an attempt passed.
retry_attempts() {  # label
  local try rc
  for try in 1 2 3; do
    attempt
    rc=$?
    [ $rc = 0 ] && { echo "$1: passed on attempt $try"; return 0; }
    [ $rc = 2 ] && return 1
    echo "$1: attempt $try outside the tolerance"
  done
  return 1
}
