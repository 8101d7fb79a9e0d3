#!/usr/bin/env bash
# Packs prebuilt bubblebench binaries for a GPU machine that has the NVIDIA driver (and
# usually CUDA) but not MPICH, HDF5, OpenBLAS, GoogleTest...: the binaries, the CUDA plugin
# libbb_cuda.so (into lib/), MPICH's mpiexec and hydra_pmi_proxy, UCX's transport modules, and
# every shared library they need that is not part of the C runtime or the driver, into one
# folder. Run it there with
#   tools/gpu-check.sh --bindir DIR
#
# Usage: tools/pack-gpu.sh [--build DIR] [--out DIR] [--archive FILE] [--with-cuda-libs]
#                          [--with-sanitizer]
#   --build DIR       the CMake build folder (default: build-cuda/, else build/)
#   --out DIR         the folder to fill (default: gpu-pack/); its lib/ gets the libraries
#   --archive FILE    also write the folder as one xz-compressed tar (about 110 MB of files,
#                     mostly MPICH and OpenBLAS, become about 25 MB); unpack with tar xf FILE
#   --with-cuda-libs  also carry cuBLAS, cuBLASLt and NCCL (about 800 MB); by default only
#                     libcudart (0.7 MB) is carried and the GPU machine must provide CUDA 13's
#                     libcublas.so.13, libcublasLt.so.13 and libnccl.so.2
#   --with-sanitizer  also carry CUDA 13.0's compute-sanitizer (into sanitizer/, about 40 MB,
#                     10 MB compressed; gpu-check.sh's sanitizer step): the toolkit's if it
#                     has one, else PyPI's nvidia-cuda-sanitizer-api 13.0.85 (pip download)
# gemm_efficiency comes from the build folder (CMake builds it with the CUDA plugin).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
build="" out="gpu-pack" cuda_libs=0 archive="" sanitizer=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="${2:?}"; shift 2 ;;
    --out) out="${2:?}"; shift 2 ;;
    --archive) archive="${2:?}"; shift 2 ;;
    --with-cuda-libs) cuda_libs=1; shift ;;
    --with-sanitizer) sanitizer=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "pack-gpu: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$build" ]; then
  for d in "$repo/build-cuda" "$repo/build"; do [ -x "$d/bubblebench" ] && { build="$d"; break; }; done
fi
if [ -z "$build" ] || [ ! -x "$build/bubblebench" ]; then
  echo "pack-gpu: no bubblebench in ${build:-build-cuda/ or build/}" >&2
  exit 2
fi
mkdir -p "$out/lib"
out="$(cd "$out" && pwd)"

bins=()
for b in bubblebench unit_tests bench_sim gemm_efficiency; do
  if [ -x "$build/$b" ]; then cp -f "$build/$b" "$out/"; bins+=("$out/$b"); fi
done
# The CUDA plugin (the CUDA backend and NCCL transport, which bubblebench loads with dlopen for
# --backend cuda; unit_tests and gemm_efficiency link it): into lib/, where all find it.
if [ -f "$build/libbb_cuda.so" ]; then
  cp -f "$build/libbb_cuda.so" "$out/lib/"
  bins+=("$out/lib/libbb_cuda.so")
else
  echo "pack-gpu: warning: no $build/libbb_cuda.so (a build without CUDA): --backend cuda will not work" >&2
fi
nvcc="$(command -v nvcc || true)"
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc

# compute-sanitizer: a folder of its own (bin/ and its libraries), found by gpu-check.sh.
if [ $sanitizer -eq 1 ]; then
  rm -rf "$out/sanitizer"
  cs_dir=""
  for d in /usr/local/cuda/compute-sanitizer /usr/local/cuda-13.0/compute-sanitizer; do
    [ -x "$d/compute-sanitizer" ] && { cs_dir="$d"; break; }
  done
  if [ -n "$cs_dir" ]; then
    mkdir -p "$out/sanitizer/bin"
    cp -a "$cs_dir/." "$out/sanitizer/bin/"
  else
    wheels="$(mktemp -d)"
    python3 -m pip download --quiet --no-deps --dest "$wheels" "nvidia-cuda-sanitizer-api==13.0.85"
    python3 -m zipfile -e "$wheels"/nvidia_cuda_sanitizer_api-*.whl "$wheels/x"
    mkdir -p "$out/sanitizer"
    cp -a "$wheels/x/nvidia/cu13/." "$out/sanitizer/"
    chmod +x "$out/sanitizer/bin/compute-sanitizer"
    rm -rf "$wheels"
  fi
  echo "pack-gpu: compute-sanitizer: $("$out/sanitizer/bin/compute-sanitizer" --version | tail -n 1)"
fi

# MPICH's launcher: mpiexec (Hydra) finds hydra_pmi_proxy next to itself or on PATH.
if mpiexec_path="$(command -v mpiexec)"; then
  cp -f "$(readlink -f "$mpiexec_path")" "$out/mpiexec"
  bins+=("$out/mpiexec")
fi
if proxy="$(command -v hydra_pmi_proxy)"; then
  cp -f "$(readlink -f "$proxy")" "$out/hydra_pmi_proxy"
  bins+=("$out/hydra_pmi_proxy")
fi

# Libraries that stay on the target: the C runtime, the loader, the driver.
skip_re='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libutil\.so|libcuda\.so|libnvidia-|libgcc_s\.so)'
big_cuda_re='^(libcublas\.so|libcublasLt\.so|libnccl\.so)'

copy_deps() {  # copy_deps FILE...: the non-skipped libraries FILEs need
  local f name path
  for f in "$@"; do
    ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' |
    while read -r name path; do
      [[ "$name" =~ $skip_re ]] && continue
      if [[ "$name" =~ $big_cuda_re ]] && [ $cuda_libs -eq 0 ]; then continue; fi
      [ -e "$out/lib/$name" ] || cp -fL "$path" "$out/lib/$name"
    done
  done
}
copy_deps "${bins[@]}"

# UCX loads its transports (shared memory, verbs) as modules at run time.
ucx_dir=""
for d in /usr/lib/x86_64-linux-gnu/ucx /usr/lib64/ucx /usr/lib/ucx; do [ -d "$d" ] && { ucx_dir="$d"; break; }; done
if [ -e "$out/lib/libucp.so.0" ] && [ -n "$ucx_dir" ]; then
  mkdir -p "$out/lib/ucx"
  for m in "$ucx_dir"/*.so.0; do
    [ -e "$m" ] || continue
    cp -fL "$m" "$out/lib/ucx/$(basename "$m")"
  done
  copy_deps "$out"/lib/ucx/*.so.0
fi

cp -f "$here/gpu-check.sh" "$out/"
cat > "$out/README.txt" <<TXT
bubblebench GPU pack, made $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
on $(hostname) with CUDA $("$nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' || echo '?').

On the GPU machine (NVIDIA driver for CUDA 13, i.e. >= 580; CUDA 13 cuBLAS and NCCL unless
packed with --with-cuda-libs):
  ./gpu-check.sh --bindir "\$PWD"                 (from this folder)
  or, in a checkout:  tools/gpu-check.sh --bindir /path/to/this/folder
By hand: export LD_LIBRARY_PATH=\$PWD/lib:\$LD_LIBRARY_PATH UCX_MODULE_DIR=\$PWD/lib/ucx PATH=\$PWD:\$PATH
(bubblebench loads lib/libbb_cuda.so, the CUDA backend, for --backend cuda; BB_CUDA_PLUGIN=FILE
names another.)
         mpiexec -n 2 ./bubblebench run --schedule 1f1b -M 8 --backend cuda --transport mpi --check
TXT

missing=$(for b in "${bins[@]}"; do LD_LIBRARY_PATH="$out/lib" ldd "$b" 2>/dev/null | grep 'not found' || true; done | sort -u)
echo "pack-gpu: $out: $(find "$out" -mindepth 1 -maxdepth 1 ! -name lib | wc -l) files, $(find "$out/lib" -mindepth 1 -maxdepth 1 | wc -l) libraries, $(du -sh "$out" | cut -f1)"
if [ -n "$missing" ]; then
  echo "pack-gpu: not carried (must exist on the GPU machine):"
  while IFS= read -r line; do echo "  $line"; done <<<"$missing"
fi
if [ -n "$archive" ]; then
  tar -C "$(dirname "$out")" -cJf "$archive" "$(basename "$out")"
  echo "pack-gpu: $archive: $(du -sh "$archive" | cut -f1) (tar xf it, then run $(basename "$out")/gpu-check.sh)"
fi
