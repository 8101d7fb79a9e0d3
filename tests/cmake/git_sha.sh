#!/usr/bin/env bash
# The git sha a build records is that of the sources it compiles (cmake/BbGitSha.cmake): a tiny
# project using the module is configured once in a scratch git repository, then rebuilt after
# a commit (new sha without re-running CMake), after an edit of a tracked file (`-dirty`), with
# nothing changed (the generated source is not rewritten, nothing recompiles) and after the
# edit is undone. A copy without git metadata and a folder inside another repository build
# with "unknown". And bubblebench itself reports the sha its build generated (--version).
# usage: git_sha.sh SOURCE_DIR [BUBBLEBENCH]
set -uo pipefail
SRC=${1:?usage: $0 source_dir [bubblebench]}
BB=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() {  # name, condition result
  if [ "$2" = 0 ]; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi
}
g() { git -C "$tmp/p" -c user.name=t -c user.email=t@example.com -c commit.gpgsign=false "$@"; }

mkdir -p "$tmp/p/cmake"
cp "$SRC/cmake/BbGitSha.cmake" "$SRC/cmake/bb_git_sha_write.cmake" "$tmp/p/cmake/"
cat >"$tmp/p/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(sha_probe CXX)
include(cmake/BbGitSha.cmake)
bb_git_sha_source(${CMAKE_BINARY_DIR}/generated/bb_git_sha.cpp)
add_executable(probe main.cpp ${CMAKE_BINARY_DIR}/generated/bb_git_sha.cpp)
add_dependencies(probe bb_git_sha)
CM
cat >"$tmp/p/main.cpp" <<'CPP'
#include <cstdio>
namespace bb {
const char* build_git_sha();
}
int main() { std::puts(bb::build_git_sha()); }
CPP
g init -q && g add -A && g commit -q -m one
build() {  # build dir -> the probe's output
  cmake --build "$1" >"$1.log" 2>&1 || { cat "$1.log"; return 1; }
  "$1/probe"
}
cmake -S "$tmp/p" -B "$tmp/b" >/dev/null || { echo "FAIL: configure"; exit 1; }
head1=$(g rev-parse --short=12 HEAD)
got=$(build "$tmp/b")
[ "$got" = "$head1" ]
check "first build: $got = HEAD $head1" $?

echo "// two" >>"$tmp/p/main.cpp"
g commit -q -am two
head2=$(g rev-parse --short=12 HEAD)
got=$(build "$tmp/b")
[ "$got" = "$head2" ] && [ "$head2" != "$head1" ]
check "after a commit, without re-running CMake: $got = HEAD $head2" $?

echo "// an uncommitted edit" >>"$tmp/p/main.cpp"
got=$(build "$tmp/b")
[ "$got" = "$head2-dirty" ]
check "a tracked file edited: $got = $head2-dirty" $?

gen=$tmp/b/generated/bb_git_sha.cpp
before=$(stat -c %Y.%s "$gen")
sleep 1.1
got=$(build "$tmp/b")
[ "$got" = "$head2-dirty" ] && [ "$(stat -c %Y.%s "$gen")" = "$before" ] &&
  ! grep -q "Building CXX" "$tmp/b.log"
check "nothing changed: the generated source is not rewritten, nothing recompiles" $?

echo scratch >"$tmp/p/untracked.txt"
g checkout -q -- main.cpp
got=$(build "$tmp/b")
[ "$got" = "$head2" ]
check "edit undone (an untracked file does not count): $got = $head2" $?

mkdir "$tmp/q" && cp -r "$tmp/p/cmake" "$tmp/p/CMakeLists.txt" "$tmp/p/main.cpp" "$tmp/q/"
cmake -S "$tmp/q" -B "$tmp/qb" >/dev/null && got=$(build "$tmp/qb")
[ "$got" = unknown ]
check "a copy without git metadata: $got" $?

mkdir "$tmp/p/sub" && cp -r "$tmp/q/cmake" "$tmp/q/CMakeLists.txt" "$tmp/q/main.cpp" "$tmp/p/sub/"
cmake -S "$tmp/p/sub" -B "$tmp/sb" >/dev/null && got=$(build "$tmp/sb")
[ "$got" = unknown ]
check "a folder inside another repository: $got" $?

if [ -n "$BB" ]; then
  sha=$("$BB" --version | sed -nE 's/^bubblebench [^ ]+ \((.*)\)$/\1/p')
  [ -n "$sha" ] && grep -qF "return \"$sha\";" "$(dirname "$BB")/generated/bb_git_sha.cpp"
  check "bubblebench --version names the sha its build generated ($sha)" $?
fi

echo "git sha: $fails failures"
[ $fails = 0 ]
