#!/usr/bin/env bash
# Everything a person with a GPU machine runs to check bubblebench's GPU path (docs/gpu.md):
#   1. the GPU unit tests (unit_tests --gtest_filter='Cuda*'; with 2+ GPUs also the NCCL test
#      under mpiexec -n 2),
#   2. `run --check` of every schedule with --backend cuda: --transport mpi on 2 ranks (they
#      share one GPU if there is only one), and --transport nccl with one rank per GPU when
#      there are 2+ GPUs (P = 2, and P = 4 with 4+ GPUs),
#   3. `run --check --dtype bf16` of every schedule (tolerance 1e-4, docs/gpu.md) and a small
#      sweep with GEMM compute,
#   4. a sweep with synthetic compute, and its measured bubble fraction against the simulator's
#      (each row within --bubble-tol, default 0.02),
#   5. the GEMM-efficiency benchmark (tools/gemm_efficiency.cu: the stage's GEMM shapes through
#      the backend vs bare cuBLAS; fp32 must reach --min-ratio, default 0.8; bf16 is reported),
# then prints a summary. Exit 0 when nothing failed, 1 otherwise, 2 on bad arguments.
#
# Works without MPICH/HDF5 packages when given a folder of prebuilt binaries made by
# tools/pack-gpu.sh (--bindir DIR: binaries in DIR, shared libraries in DIR/lib). It needs the
# NVIDIA driver, and the CUDA 13 runtime libraries unless the pack carries them.
#
# Usage: tools/gpu-check.sh [--bindir DIR] [--out DIR] [--backend cuda|cpu] [--quick]
#                           [--only STEPS] [--mps auto|on|off] [--bubble-tol X] [--min-ratio X]
#                           [--timeout SECONDS] [--mpiexec PATH]
#   --bindir DIR   bubblebench, unit_tests (and gemm_efficiency, mpiexec, hydra_pmi_proxy) are
#                  here; DIR/lib is put on LD_LIBRARY_PATH. Default: build-cuda/ or build/ of
#                  this checkout.
#   --out DIR      logs (default: gpu-check-<date> in the current directory)
#   --backend cpu  runs the same steps on the CPU backend (tests the script without a GPU)
#   --quick        no GEMM sweep and a smaller GEMM benchmark (the checks all run)
#   --only STEPS   comma-separated subset of: unit,check,bf16,sweep,synthetic,gemm (default all)
#   --mps MODE     CUDA MPS, so that ranks sharing a GPU run their kernels side by side instead
#                  of taking turns (time-slicing inflates every action's GPU time and the
#                  bubble). auto (default): started here, and stopped at exit, when 2 ranks must
#                  share the only GPU and no MPS daemon runs yet; on: always; off: never (the
#                  synthetic comparison is then skipped on one GPU: it would measure turn-taking)
#   --bubble-tol X largest |measured - simulated| bubble fraction with synthetic compute (0.02)
#   --min-ratio X  smallest fp32 GEMM-efficiency ratio, backend vs bare cuBLAS (0.8)
#   --timeout S    limit of each step (default 900)
#   --mpiexec P    the mpiexec to use (default: DIR/mpiexec if present, else mpiexec on PATH)
set -u -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
bindir="" out="" backend="cuda" quick=0 step_timeout=900 mpiexec="" only="" mps=auto
bubble_tol=0.02 min_ratio=0.8

usage() { sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --bindir) bindir="${2:?--bindir needs a folder}"; shift 2 ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --backend) backend="${2:?--backend needs cuda or cpu}"; shift 2 ;;
    --quick) quick=1; shift ;;
    --only) only="${2:?--only needs a list of steps}"; shift 2 ;;
    --mps) mps="${2:?--mps needs auto, on or off}"; shift 2 ;;
    --bubble-tol) bubble_tol="${2:?--bubble-tol needs a number}"; shift 2 ;;
    --min-ratio) min_ratio="${2:?--min-ratio needs a number}"; shift 2 ;;
    --timeout) step_timeout="${2:?--timeout needs seconds}"; shift 2 ;;
    --mpiexec) mpiexec="${2:?--mpiexec needs a path}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$backend" in cuda|cpu) ;; *) echo "gpu-check: --backend cuda or cpu" >&2; exit 2 ;; esac
case "$mps" in auto|on|off) ;; *) echo "gpu-check: --mps auto, on or off" >&2; exit 2 ;; esac
for step in ${only//,/ }; do
  case "$step" in unit|check|bf16|sweep|synthetic|gemm) ;;
    *) echo "gpu-check: --only: unknown step '$step' (unit,check,bf16,sweep,synthetic,gemm)" >&2; exit 2 ;;
  esac
done
want() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }

if [ -z "$bindir" ]; then
  for d in "$repo/build-cuda" "$repo/build"; do
    if [ -x "$d/bubblebench" ]; then bindir="$d"; break; fi
  done
fi
if [ -z "$bindir" ] || [ ! -x "$bindir/bubblebench" ]; then
  echo "gpu-check: no bubblebench in ${bindir:-build-cuda/ or build/}: build it or pass --bindir" >&2
  exit 2
fi
bindir="$(cd "$bindir" && pwd)"
if [ -d "$bindir/lib" ]; then
  export LD_LIBRARY_PATH="$bindir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # UCX (under MPICH ch4:ucx) loads its transports as modules.
  [ -d "$bindir/lib/ucx" ] && export UCX_MODULE_DIR="$bindir/lib/ucx"
fi
export PATH="$bindir:$PATH"  # a carried mpiexec finds hydra_pmi_proxy next to it
if [ -z "$mpiexec" ]; then
  if [ -x "$bindir/mpiexec" ]; then mpiexec="$bindir/mpiexec"; else mpiexec="$(command -v mpiexec || true)"; fi
fi
if [ -z "$mpiexec" ]; then
  echo "gpu-check: no mpiexec (pack one with tools/pack-gpu.sh or install MPICH)" >&2
  exit 2
fi

out="${out:-gpu-check-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# --- GPUs ----------------------------------------------------------------------------------
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  nvidia-smi -L > "$out/nvidia-smi.txt" 2>&1 || true
  nvidia-smi >> "$out/nvidia-smi.txt" 2>&1 || true
fi
echo "gpu-check: binaries $bindir, logs $out, backend $backend, GPUs: $gpus, mpiexec: $mpiexec"
if [ "$backend" = cuda ] && [ "$gpus" -eq 0 ]; then
  echo "gpu-check: warning: nvidia-smi lists no GPU; the CUDA steps will fail or skip" >&2
fi

# --- MPS ------------------------------------------------------------------------------------
# Ranks share a GPU when there are fewer GPUs than the 2 ranks of the checks and sweeps.
shared_gpu=0
[ "$backend" = cuda ] && [ "$gpus" -lt 2 ] && shared_gpu=1
mps_running=0  # a daemon of someone else's (default pipe directory) or of this script
pipe_dir="${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}"
[ -S "$pipe_dir/control" ] && mps_running=1
if [ "$backend" = cuda ] && [ $mps_running -eq 0 ] && { [ "$mps" = on ] || { [ "$mps" = auto ] && [ $shared_gpu -eq 1 ]; }; }; then
  if ! command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
    echo "gpu-check: no nvidia-cuda-mps-control on PATH: ranks sharing a GPU will time-slice" >&2
    [ "$mps" = on ] && exit 2
  else
    export CUDA_MPS_PIPE_DIRECTORY="$out/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$out/mps-log"
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d; then
      trap 'echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 || true' EXIT
      mps_running=1
      echo "gpu-check: CUDA MPS started (pipes in $CUDA_MPS_PIPE_DIRECTORY, stopped at exit)"
    else
      echo "gpu-check: nvidia-cuda-mps-control -d failed (see $CUDA_MPS_LOG_DIRECTORY)" >&2
      [ "$mps" = on ] && exit 1
      unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    fi
  fi
elif [ "$backend" = cuda ] && [ $mps_running -eq 1 ] && [ "$mps" != off ]; then
  echo "gpu-check: using the CUDA MPS daemon already running ($pipe_dir)"
fi
[ "$mps" = off ] && [ $mps_running -eq 1 ] && \
  echo "gpu-check: --mps off, but an MPS daemon runs ($pipe_dir): CUDA programs will use it" >&2

# --- Steps ---------------------------------------------------------------------------------
names=() statuses=() seconds=() notes=()
record() { names+=("$1"); statuses+=("$2"); seconds+=("$3"); notes+=("$4"); }

# run_step NAME LOG CMD...: PASS when CMD exits 0, FAIL otherwise (TIMEOUT on the limit).
run_step() {
  local name="$1" log="$2"; shift 2
  local t0 t1 rc
  t0=$(date +%s.%N)
  echo "== $name" ; echo "   $*" ; echo "\$ $*" > "$log"
  timeout --kill-after=30 "$step_timeout" "$@" >> "$log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  local dt; dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  local status=PASS note="$log"
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status=TIMEOUT
  elif [ $rc -ne 0 ]; then
    status=FAIL
    note="exit $rc: $(grep -v '^\$ ' "$log" | tail -n 2 | tr '\n' ' ' | cut -c1-160)"
  fi
  echo "   $status ($dt s)"
  record "$name" "$status" "$dt" "$note"
  return $rc
}

# 1. Unit tests.
if ! want unit; then :
elif [ -x "$bindir/unit_tests" ]; then
  log="$out/unit-cuda.log"
  run_step "unit tests Cuda*" "$log" "$bindir/unit_tests" --gtest_filter='Cuda*'
  # With a GPU, "no CUDA device" skips mean the CUDA runtime cannot use it (driver too old…).
  if [ "$backend" = cuda ] && [ "$gpus" -gt 0 ] && grep -q 'skipped: no CUDA device' "$log"; then
    statuses[${#statuses[@]}-1]=FAIL
    notes[${#notes[@]}-1]="GPU present but: $(grep -m1 'skipped: no CUDA device' "$log")"
  elif [ "$gpus" -eq 0 ] && grep -q 'skipped: no CUDA device' "$log"; then
    statuses[${#statuses[@]}-1]=SKIP
    notes[${#notes[@]}-1]="$(grep -m1 'skipped: no CUDA device' "$log")"
  fi
  if [ "$backend" = cuda ] && grep -q 'skipped: no CUDA device' "$log"; then
    echo "gpu-check: CUDA cannot use a device here: $(grep -m1 'skipped: no CUDA device' "$log" | sed 's/^skipped: //')" >&2
    echo "gpu-check: stopping (the unit tests skipped; nothing else can run on the GPU)" >&2
    exit 1
  fi
  if [ "$backend" = cuda ] && [ "$gpus" -ge 2 ]; then
    log="$out/unit-nccl.log"
    run_step "unit tests CudaNccl* (2 ranks)" "$log" \
      "$mpiexec" -n 2 "$bindir/unit_tests" --gtest_filter='CudaNccl*'
    if grep -q 'SKIPPED' "$log"; then
      statuses[${#statuses[@]}-1]=FAIL
      notes[${#notes[@]}-1]="NCCL test skipped: $(grep -m1 'skipped:' "$log")"
    fi
  fi
else
  record "unit tests" SKIP 0 "no unit_tests in $bindir"
fi

# 2. --check on every schedule.
schedules="naive gpipe 1f1b interleaved zb-h1 zb-h2 zb-v dualpipe dualpipev"
check_all() {  # check_all P TRANSPORT
  local P="$1" transport="$2" s extra M=$(( 2 * $1 ))
  for s in $schedules; do
    extra=()
    [ "$s" = interleaved ] && extra=(-v 2)
    run_step "check $s P=$P $transport" "$out/check-$s-P$P-$transport.log" \
      "$mpiexec" -n "$P" "$bindir/bubblebench" run --schedule "$s" -M "$M" "${extra[@]}" \
      --backend "$backend" --transport "$transport" --check --hidden 128 --layers 2 \
      --mb-size 32 --warmup 0 --iters 1 --timeout 120
  done
  run_step "check 1f1b,zb-v P=$P $transport recompute" "$out/check-recompute-P$P-$transport.log" \
    "$mpiexec" -n "$P" "$bindir/bubblebench" run --schedule 1f1b,zb-v -M "$M" --recompute=both \
    --backend "$backend" --transport "$transport" --check --hidden 128 --layers 2 --mb-size 32 \
    --warmup 0 --iters 1 --timeout 120
}
if want check; then
  check_all 2 mpi
  if [ "$backend" = cuda ] && [ "$gpus" -ge 2 ]; then
    check_all 2 nccl
    [ "$gpus" -ge 4 ] && check_all 4 nccl
  fi
fi

# The sweeps' placement: one rank per GPU with NCCL when there are enough GPUs; else 2 ranks
# over MPI, sharing the GPU (side by side under MPS, else time-sliced).
P=2 transport=mpi
if [ "$backend" = cuda ] && [ "$gpus" -ge 2 ]; then
  transport=nccl
  [ "$gpus" -ge 4 ] && P=4
fi

# 3. bf16 --check and a small sweep.
if [ "$backend" = cuda ] && want bf16; then
  for s in $schedules; do
    extra=()
    [ "$s" = interleaved ] && extra=(-v 2)
    run_step "check $s P=2 mpi bf16" "$out/check-$s-P2-mpi-bf16.log" \
      "$mpiexec" -n 2 "$bindir/bubblebench" run --schedule "$s" -M 4 "${extra[@]}" --backend cuda \
      --transport mpi --dtype bf16 --check --hidden 256 --layers 2 --mb-size 64 --warmup 1 \
      --iters 3 --timeout 120
  done
fi
if [ $quick -eq 0 ] && want sweep; then
  sweep_hidden=1024 sweep_rows=256
  [ "$backend" = cpu ] && { sweep_hidden=128; sweep_rows=32; }
  run_step "sweep gemm P=$P $transport" "$out/sweep-gemm.log" \
    "$mpiexec" -n "$P" "$bindir/bubblebench" run --schedule 1f1b,zb-h1,zb-v,dualpipev -M 8,16 \
    --backend "$backend" --transport "$transport" --compute gemm --hidden "$sweep_hidden" \
    --layers 2 --mb-size "$sweep_rows" --warmup 2 --iters 5 --timeout 300
fi

# 4. Synthetic compute: the measured bubble fraction against the simulator's.
# bubble_vs_sim TABLE ROWS: one line per row of TABLE (run's stdout alone: mpiexec forwards stdout
# and stderr separately, so progress lines can land inside the table when they share a file),
# then the worst difference; exit 1 when a row's |measured - sim| exceeds $bubble_tol, or when
# not exactly ROWS rows could be read.
bubble_vs_sim() {
  awk -v tol="$bubble_tol" -v want="$2" '
    # The header line is "# schedule P M ...": run prints it as a comment, so rows lack the "#".
    $1 == "#" && $2 == "schedule" && $0 ~ / measured / { for (i = 2; i <= NF; ++i) col[$i] = i - 1; head = 1; next }
    head && /^#/ { next }
    head && /^measured/ { head = 0 }
    head && NF > 0 {
      if (NF < col["sim"] || $col["measured"] !~ /^[0-9.e+-]+$/ || $col["sim"] !~ /^[0-9.e+-]+$/) {
        printf "unreadable row: %s\n", $0; unreadable++; next
      }
      d = $col["measured"] - $col["sim"]; if (d < 0) d = -d
      printf "%-10s P=%s M=%-3s measured %s  sim %s  |diff| %.4f  %s\n", $1, $col["P"], $col["M"],
             $col["measured"], $col["sim"], d, (d <= tol + 1e-12 ? "ok" : "OVER")
      n++; if (d > tol + 1e-12) bad++; if (d > worst) worst = d
    }
    END {
      printf "synthetic bubble vs simulator: %d of %d rows, worst |diff| %.4f (tolerance %s)\n", n, want, worst, tol
      exit (n != want || unreadable > 0 || bad > 0)
    }' "$1"
}
if want synthetic; then
  # The table (stdout) to a file of its own, the progress lines (stderr) to the log.
  table="$out/sweep-synthetic.table"
  # shellcheck disable=SC2016  # the inner bash expands "$@" and "$0", not this one
  if run_step "sweep synthetic P=$P $transport" "$out/sweep-synthetic.log" \
    bash -c '"$@" >"$0"' "$table" \
    "$mpiexec" -n "$P" "$bindir/bubblebench" run --schedule 1f1b,zb-h1,zb-h2,zb-v -M 8,16 \
    --backend "$backend" --transport "$transport" --compute synthetic --t-f 2ms --t-b 2ms \
    --t-w 2ms --warmup 1 --iters 5 --timeout 300; then
    cat "$table" >> "$out/sweep-synthetic.log"
    bubble_vs_sim "$table" 8 > "$out/synthetic-vs-sim.log"
    rc=$?
    echo "== synthetic bubble vs simulator"
    sed 's/^/   /' "$out/synthetic-vs-sim.log"
    status=PASS note="$(tail -n 1 "$out/synthetic-vs-sim.log")"
    [ $rc -ne 0 ] && status=FAIL
    if [ $shared_gpu -eq 1 ] && [ $mps_running -eq 0 ]; then
      status=SKIP note="ranks time-slice one GPU without MPS (not comparable); $note"
    fi
    echo "   $status"
    record "synthetic bubble vs sim" "$status" 0.0 "$note"
  fi
fi

# 5. GEMM efficiency.
if [ "$backend" = cuda ] && want gemm; then
  bench="$bindir/gemm_efficiency"
  if [ ! -x "$bench" ]; then
    nvcc="$(command -v nvcc || true)"
    [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
    if [ -n "$nvcc" ] && [ -f "$repo/tools/gemm_efficiency.cu" ]; then
      arch=-arch=sm_90; [ "$gpus" -gt 0 ] && arch=-arch=native
      bench="$out/gemm_efficiency"
      run_step "build gemm_efficiency" "$out/gemm-build.log" "$nvcc" -std=c++20 \
        --expt-relaxed-constexpr -O3 "$arch" -I "$repo/src" "$repo/tools/gemm_efficiency.cu" \
        "$repo/src/runtime/cuda/cuda_backend.cpp" "$repo/src/runtime/cuda/host_staging.cpp" \
        "$repo/src/runtime/cuda/kernels.cu" -lcublas -o "$bench"
    fi
  fi
  if [ -x "$bench" ]; then
    # shellcheck disable=SC2054  # commas are bubblebench LISTs, not array separators
    if [ $quick -eq 1 ]; then sizes=(--hidden 1024 --mb-size 512); else sizes=(--hidden 1024,4096 --mb-size 512,2048); fi
    run_step "gemm efficiency fp32" "$out/gemm-efficiency.log" "$bench" "${sizes[@]}" \
      --dtype fp32 --min-ratio "$min_ratio"
    notes[${#notes[@]}-1]="$(grep -m1 '^GEMM efficiency' "$out/gemm-efficiency.log") (gate $min_ratio)"
    run_step "gemm efficiency bf16" "$out/gemm-efficiency-bf16.log" "$bench" "${sizes[@]}" \
      --dtype bf16
    notes[${#notes[@]}-1]="$(grep -m1 '^GEMM efficiency' "$out/gemm-efficiency-bf16.log") (reported, no gate)"
  else
    record "gemm efficiency" SKIP 0 "no gemm_efficiency in $bindir and no nvcc to build it"
  fi
fi

# --- Summary -------------------------------------------------------------------------------
echo
echo "== Summary ($out)"
for i in "${!names[@]}"; do
  printf '%-8s %7ss  %-40s %s\n' "${statuses[$i]}" "${seconds[$i]}" "${names[$i]}" "${notes[$i]}"
done | tee "$out/summary.txt"
failed=$(grep -cE '^(FAIL|TIMEOUT) ' "$out/summary.txt" || true)
for f in "$out"/sweep-*.log "$out"/gemm-efficiency*.log; do
  [ -f "$f" ] && { echo; echo "-- $(basename "$f")"; grep -v '^\$ ' "$f" | head -n 40; }
done
echo
if [ "$failed" -gt 0 ]; then
  echo "gpu-check: $failed step(s) failed"
  exit 1
fi
echo "gpu-check: all steps passed (or skipped, see above)"
