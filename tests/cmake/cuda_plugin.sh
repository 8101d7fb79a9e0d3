#!/usr/bin/env bash
# bubblebench links no CUDA library: the CUDA backend and NCCL transport are the plugin
# libbb_cuda.so, loaded with dlopen for --backend cuda (src/runtime/cuda_plugin.hpp). Checks
# that ldd finds no cuBLAS, cuBLASLt, NCCL or CUDA runtime in bubblebench, that a missing or
# foreign plugin is one clear line with exit 2, and, where the build made the plugin and the
# machine has no GPU, that the plugin loads and says there is no device.
# usage: cuda_plugin.sh BUBBLEBENCH MPIEXEC
set -uo pipefail
BB=${1:?usage: $0 bubblebench mpiexec}
MPIEXEC=${2:?usage: $0 bubblebench mpiexec}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() {  # name, condition result
  if [ "$2" = 0 ]; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi
}
cuda_re='lib(cublas|cublasLt|nccl|cudart)\.so'

ldd "$BB" >"$tmp/ldd.txt" 2>&1
check "ldd runs on bubblebench" $?
linked=$(grep -Eo "$cuda_re[^ ]*" "$tmp/ldd.txt" | tr '\n' ' ')
[ -z "$linked" ]
check "bubblebench links no CUDA library${linked:+ (links $linked)}" $?

# expect NAME EXIT_CODE TEXT [ENV=VALUE...]: run --backend cuda on one rank
expect() {
  local name=$1 code=$2 text=$3
  shift 3
  env "$@" timeout 60 "$MPIEXEC" -n 1 "$BB" run -M 2 --iters 1 --warmup 0 --backend cuda \
    --transport mpi >"$tmp/out.txt" 2>"$tmp/err.txt"
  local rc=$?
  [ "$rc" = "$code" ] && grep -qF -- "$text" "$tmp/err.txt"
  local ok=$?
  check "$name (exit $rc: $(head -c 300 "$tmp/err.txt" | tr '\n' ' '))" $ok
}
expect "a missing plugin" 2 "--backend cuda: the CUDA plugin: /nonexistent/libbb_cuda.so" \
  BB_CUDA_PLUGIN=/nonexistent/libbb_cuda.so
libm=$(ldd "$BB" | awk '$1 ~ /^libm\.so/ { print $3 }')
if [ -n "$libm" ]; then
  expect "a library that is not the plugin" 2 "is not a bubblebench CUDA plugin" \
    BB_CUDA_PLUGIN="$libm"
fi

plugin="$(dirname "$BB")/libbb_cuda.so"
if [ -f "$plugin" ]; then
  # ldd into a file first: with pipefail, grep -q closing the pipe early makes ldd die of
  # SIGPIPE and the pipeline fail although cuBLAS is there (a CI failure at cd2de12)
  ldd "$plugin" >"$tmp/ldd_plugin.txt" 2>&1
  grep -q 'libcublas\.so' "$tmp/ldd_plugin.txt"
  check "the plugin carries cuBLAS" $?
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    expect "the plugin loads and finds no GPU" 2 "--backend cuda: no CUDA device"
  fi
else
  echo "note: no plugin beside $BB (a build without CUDA)"
  expect "no plugin in a build without CUDA" 2 "--backend cuda: the CUDA plugin: libbb_cuda.so"
fi

[ $fails = 0 ] && echo "cuda_plugin: all passed"
exit $((fails > 0))
