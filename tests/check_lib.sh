# Shared by test scripts (source it): a scratch folder $tmp removed at exit, and check NAME RC,
# which counts RC 0 as passed and prints "FAIL: NAME" otherwise; finish prints the counts and
# returns 0 only without failures.
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
