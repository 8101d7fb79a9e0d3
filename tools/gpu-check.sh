#!/usr/bin/env bash
# The GPU check of bubblebench (docs/gpu.md): one prepared script that a lent GPU machine runs
# in at most --budget seconds (default 480), every step under its own limit (--timeout, at most
# 120 s), going on past a failed step, and ending with one summary table. Steps:
#   unit       the CUDA unit tests (unit_tests --gtest_filter='Cuda*:DeviceMath*'), and with 2+
#              GPUs the NCCL test under mpiexec -n 2;
#   check      `run --check` of every schedule on transformer stages with the model's ends
#              (--model tiny, recompute off and on) at P=2, fp32 and then bf16; with 2+ GPUs
#              also over NCCL;
#   gemm       gemm_efficiency: the gpt2-small and gpt-1b transformer GEMM shapes (QKV,
#              attention out, MLP up/down, LM head; F, B and W) through the backend against
#              bare cuBLAS, fp32 (gate --min-fp32, 0.9) and bf16 (gate --min-bf16, 0.8);
#   stage      one transformer stage alone (P=1) at the gpt-1b and gpt2-small widths in bf16:
#              model FLOP/s and MFU (gpt-1b gated at --min-mfu, 0.4, of the dense bf16 peak);
#   sweep      a P=2 transformer sweep, --model gpt2-small in bf16, 1f1b/zb-v/dualpipev, M 4 and
#              8: the table (MFU, utilisation, peak memory, the attribution);
#   sanitizer  compute-sanitizer memcheck (fp32) and racecheck (bf16) of a small transformer
#              run with the ends and --check (P=1): 0 errors;
#   synthetic  synthetic compute at P=2: every row's |measured - simulated| bubble within
#              --bubble-tol (0.02) and its attribution residual within --resid-tol (0.02).
# Two ranks on one GPU (no second GPU) run under CUDA MPS, started here when none runs and
# stopped at exit (--mps auto). Exit 0 when nothing failed, 1 otherwise, 2 on bad arguments.
#
# Works without MPICH/HDF5 packages from a folder made by tools/pack-gpu.sh (--bindir DIR:
# binaries in DIR, shared libraries in DIR/lib, compute-sanitizer in DIR/sanitizer). It needs
# the NVIDIA driver, and the CUDA 13 libraries the pack does not carry.
#
# Usage: tools/gpu-check.sh [--bindir DIR] [--out DIR] [--backend cuda|cpu] [--only STEPS]
#                           [--budget S] [--timeout S] [--mps auto|on|off] [--mpiexec PATH]
#                           [--bubble-tol X] [--resid-tol X] [--min-fp32 X] [--min-bf16 X]
#                           [--min-mfu X]
#   --bindir DIR   bubblebench, unit_tests, gemm_efficiency (and mpiexec, hydra_pmi_proxy) are
#                  here; DIR/lib goes on LD_LIBRARY_PATH. Default: build-cuda/ or build/.
#   --out DIR      logs and summary.txt (default: gpu-check-<date> in the current directory)
#   --backend cpu  the same steps on the CPU backend where they make sense (tests the script)
#   --only STEPS   comma-separated subset of unit,check,gemm,stage,sweep,sanitizer,synthetic
#   --budget S     the whole script's limit: a step that would start with less than 20 s left is
#                  SKIP ("out of budget"); each step's limit is cut to what is left (480)
#   --timeout S    each step's limit, at most 120 (120)
set -u -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
bindir="" out="" backend="cuda" step_timeout=120 budget=480 mpiexec="" only="" mps=auto
bubble_tol=0.02 resid_tol=0.02 min_fp32=0.9 min_bf16=0.8 min_mfu=0.4
all_steps="unit,check,gemm,stage,sweep,sanitizer,synthetic"

usage() { sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --bindir) bindir="${2:?--bindir needs a folder}"; shift 2 ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --backend) backend="${2:?--backend needs cuda or cpu}"; shift 2 ;;
    --only) only="${2:?--only needs a list of steps}"; shift 2 ;;
    --budget) budget="${2:?--budget needs seconds}"; shift 2 ;;
    --timeout) step_timeout="${2:?--timeout needs seconds}"; shift 2 ;;
    --mps) mps="${2:?--mps needs auto, on or off}"; shift 2 ;;
    --mpiexec) mpiexec="${2:?--mpiexec needs a path}"; shift 2 ;;
    --bubble-tol) bubble_tol="${2:?}"; shift 2 ;;
    --resid-tol) resid_tol="${2:?}"; shift 2 ;;
    --min-fp32) min_fp32="${2:?}"; shift 2 ;;
    --min-bf16) min_bf16="${2:?}"; shift 2 ;;
    --min-mfu) min_mfu="${2:?}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$backend" in cuda|cpu) ;; *) echo "gpu-check: --backend cuda or cpu" >&2; exit 2 ;; esac
case "$mps" in auto|on|off) ;; *) echo "gpu-check: --mps auto, on or off" >&2; exit 2 ;; esac
for step in ${only//,/ }; do
  [[ ",$all_steps," == *",$step,"* ]] ||
    { echo "gpu-check: --only: unknown step '$step' ($all_steps)" >&2; exit 2; }
done
if ! [[ "$step_timeout" =~ ^[0-9]+$ ]] || [ "$step_timeout" -gt 120 ] || [ "$step_timeout" -lt 1 ]; then
  echo "gpu-check: --timeout: 1..120 seconds" >&2
  exit 2
fi
[[ "$budget" =~ ^[0-9]+$ ]] || { echo "gpu-check: --budget: seconds" >&2; exit 2; }
want() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }
started=$(date +%s)

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
  [ -d "$bindir/lib/ucx" ] && export UCX_MODULE_DIR="$bindir/lib/ucx"  # MPICH ch4:ucx's modules
fi
export PATH="$bindir:$PATH"  # a carried mpiexec finds hydra_pmi_proxy next to it
if [ -z "$mpiexec" ]; then
  if [ -x "$bindir/mpiexec" ]; then mpiexec="$bindir/mpiexec"; else mpiexec="$(command -v mpiexec || true)"; fi
fi
[ -n "$mpiexec" ] || { echo "gpu-check: no mpiexec (pack one with tools/pack-gpu.sh)" >&2; exit 2; }
BB="$bindir/bubblebench"

out="${out:-gpu-check-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# --- GPUs and MPS -----------------------------------------------------------------------------
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  { nvidia-smi -L; nvidia-smi; } > "$out/nvidia-smi.txt" 2>&1 || true
fi
echo "gpu-check: binaries $bindir, logs $out, backend $backend, GPUs $gpus, budget ${budget} s"
shared_gpu=0
[ "$backend" = cuda ] && [ "$gpus" -lt 2 ] && shared_gpu=1
mps_running=0
pipe_dir="${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}"
[ -S "$pipe_dir/control" ] && mps_running=1
if [ "$backend" = cuda ] && [ $mps_running -eq 0 ] && { [ "$mps" = on ] || { [ "$mps" = auto ] && [ $shared_gpu -eq 1 ]; }; }; then
  if command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
    export CUDA_MPS_PIPE_DIRECTORY="$out/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$out/mps-log"
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d; then
      trap 'echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 || true' EXIT
      mps_running=1
      echo "gpu-check: CUDA MPS started (stopped at exit)"
    else
      echo "gpu-check: nvidia-cuda-mps-control -d failed: ranks sharing the GPU time-slice" >&2
      unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    fi
  else
    echo "gpu-check: no nvidia-cuda-mps-control: ranks sharing the GPU time-slice" >&2
  fi
fi

# --- Steps ----------------------------------------------------------------------------------
names=() statuses=() seconds=() notes=()
record() { names+=("$1"); statuses+=("$2"); seconds+=("$3"); notes+=("$4"); }
set_last() { statuses[${#statuses[@]}-1]="$1"; notes[${#notes[@]}-1]="$2"; }

# run_step NAME LOG CMD...: PASS when CMD exits 0, FAIL otherwise, TIMEOUT at its limit (the
# step limit, cut to the budget left); SKIP without starting when under 20 s of budget are left.
run_step() {
  local name="$1" log="$2"; shift 2
  local left=$(( budget - ($(date +%s) - started) ))
  if [ "$left" -lt 20 ]; then
    echo "== $name: SKIP (out of budget)"
    record "$name" SKIP 0 "out of budget (${budget} s)"
    return 3
  fi
  local limit=$(( left < step_timeout ? left : step_timeout ))
  local t0 t1 rc dt status=PASS note="$log"
  t0=$(date +%s.%N)
  echo "== $name (limit ${limit} s)"; echo "\$ $*" > "$log"
  timeout --kill-after=10 "$limit" "$@" >> "$log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status=TIMEOUT note="no result within ${limit} s"
  elif [ $rc -ne 0 ]; then
    status=FAIL note="exit $rc: $(grep -v '^\$ ' "$log" | tail -n 2 | tr '\n' ' ' | cut -c1-160)"
  fi
  echo "   $status ($dt s)"
  record "$name" "$status" "$dt" "$note"
  return $rc
}

# The stdout of a `run` (its table) to a file of its own: mpiexec forwards stdout and stderr
# separately, so progress lines (stderr) could land inside the table.
# Used as: run_step NAME LOG "${to_file[@]}" TABLE CMD... (timeout runs programs, not functions).
# shellcheck disable=SC2016  # the inner bash expands "$@" and "$0"
to_file=(bash -c '"$@" >"$0"')

# A column of a run table: the values of HEADER, one per row (a row: a line of as many fields as
# the header, which `run` prints as "# schedule P M ...").
column() {  # TABLE HEADER
  awk -v want="$2" '
    $1 == "#" && $2 == "schedule" { for (i = 2; i <= NF; ++i) col[$i] = i - 1; n = NF - 1; next }
    n && !/^#/ && NF == n && (want in col) { print $col[want] }' "$1"
}

transport=mpi
[ "$backend" = cuda ] && [ "$gpus" -ge 2 ] && transport=nccl

# (a) Unit tests.
if want unit; then
  if [ -x "$bindir/unit_tests" ]; then
    log="$out/unit.log"
    run_step "unit Cuda* DeviceMath*" "$log" "$bindir/unit_tests" --gtest_filter='Cuda*:DeviceMath*'
    skipped=$(grep -c 'skipped: no CUDA device' "$log" || true)
    if [ "$backend" = cuda ] && [ "$skipped" -gt 0 ]; then
      set_last FAIL "a GPU is listed but CUDA cannot use it: $(grep -m1 'skipped: no CUDA' "$log")"
    elif [ "${statuses[${#statuses[@]}-1]}" = PASS ]; then
      set_last PASS "$(grep -m1 -E '^\[  PASSED  \]' "$log") $(grep -m1 -E '^\[  SKIPPED \]' "$log")"
    fi
    if [ "$backend" = cuda ] && [ "$gpus" -ge 2 ]; then
      run_step "unit CudaNccl* (2 ranks, 2 GPUs)" "$out/unit-nccl.log" \
        "$mpiexec" -n 2 "$bindir/unit_tests" --gtest_filter='CudaNccl*'
    fi
  else
    record "unit" SKIP 0 "no unit_tests in $bindir"
  fi
fi

# (b) --check of every schedule on transformer stages with the ends, fp32 and bf16.
check_step() {  # DTYPE TRANSPORT
  local log="$out/check-$1-$2.log" table="$out/check-$1-$2.table"
  run_step "check all schedules tiny $1 P=2 $2" "$log" "${to_file[@]}" "$table" \
    "$mpiexec" -n 2 "$BB" run --backend "$backend" --transport "$2" --dtype "$1" \
    --stage transformer --model tiny --schedule all -M 4 -v 2 --recompute=both --check \
    --warmup 0 --iters 1 --timeout 60 --no-calibrate || return
  local n pass; n=$(column "$table" check | wc -l); pass=$(column "$table" check | grep -c '^pass$')
  if [ "$n" -ge 20 ] && [ "$n" = "$pass" ]; then
    set_last PASS "$pass of $n configurations passed"
  else
    set_last FAIL "$pass of $n configurations passed (want >= 20, all)"
  fi
}
if want check; then
  check_step fp32 mpi
  check_step bf16 mpi
  if [ "$transport" = nccl ]; then check_step fp32 nccl; check_step bf16 nccl; fi
fi

# (c) GEMM efficiency at the presets' transformer shapes.
if want gemm && [ "$backend" = cuda ]; then
  if [ -x "$bindir/gemm_efficiency" ]; then
    log="$out/gemm.log"
    run_step "gemm efficiency gpt2-small, gpt-1b" "$log" "$bindir/gemm_efficiency" \
      --model gpt2-small,gpt-1b --tokens 8192 --dtype both --iters 10 \
      --min-ratio-fp32 "$min_fp32" --min-ratio-bf16 "$min_bf16"
    local_note="$(grep '^GEMM efficiency' "$log" | sed 's/ (cuBLAS time \/ backend time)//' | tr '\n' ';') gates fp32 $min_fp32, bf16 $min_bf16"
    # A failure's or timeout's own note (exit code, last lines) stays first.
    if [ "${statuses[${#statuses[@]}-1]}" = PASS ]; then notes[${#notes[@]}-1]="$local_note"
    else notes[${#notes[@]}-1]="${notes[${#notes[@]}-1]}; $local_note"; fi
  else
    record "gemm efficiency" SKIP 0 "no gemm_efficiency in $bindir"
  fi
fi

# (d) One transformer stage alone (P=1), bf16: model FLOP/s and MFU.
stage_step() {  # MODEL LAYERS MB_SIZE GATE
  local table="$out/stage-$1.table" mfu flops
  run_step "stage $1 P=1 bf16" "$out/stage-$1.log" "${to_file[@]}" "$table" \
    "$mpiexec" -n 1 "$BB" run --backend "$backend" --dtype bf16 --stage transformer --model "$1" \
    --model-layers "$2" --mb-size "$3" --schedule 1f1b -M 4 --warmup 2 --iters 5 --timeout 100 \
    --no-calibrate || return
  mfu=$(column "$table" MFU | head -n 1) flops=$(column "$table" GFLOP/s | head -n 1)
  if [ "$4" = gate ] && [ "$backend" = cuda ]; then
    if awk -v m="$mfu" -v g="$min_mfu" 'BEGIN { exit !(m + 0 >= g) }'; then
      set_last PASS "MFU $mfu (gate $min_mfu), $flops GFLOP/s"
    else
      set_last FAIL "MFU ${mfu:-n/a} below $min_mfu, $flops GFLOP/s"
    fi
  else
    set_last PASS "MFU ${mfu:-n/a}, $flops GFLOP/s (reported)"
  fi
}
if want stage; then
  if [ "$backend" = cuda ]; then
    stage_step gpt-1b 4 4 gate
    stage_step gpt2-small 12 8 report
  else
    stage_step tiny 4 8 report
  fi
fi

# (e) A P=2 transformer sweep: MFU, utilisation, peak memory, attribution.
if want sweep; then
  model=gpt2-small; [ "$backend" = cpu ] && model=tiny
  table="$out/sweep.table"
  run_step "sweep $model bf16 P=2 $transport" "$out/sweep.log" "${to_file[@]}" "$table" \
    "$mpiexec" -n 2 "$BB" run --backend "$backend" --transport "$transport" --dtype bf16 \
    --stage transformer --model "$model" --schedule 1f1b,zb-v,dualpipev -M 4,8 -v 2 --warmup 2 \
    --iters 5 --timeout 100 &&
    set_last PASS "$(column "$table" schedule | wc -l) runs; table in $table"
fi

# (f) compute-sanitizer memcheck and racecheck.
sanitizer=""
for s in "$bindir/sanitizer/bin/compute-sanitizer" "$(command -v compute-sanitizer || true)" \
  /usr/local/cuda/bin/compute-sanitizer; do
  [ -n "$s" ] && [ -x "$s" ] && { sanitizer="$s"; break; }
done
if want sanitizer && [ "$backend" = cuda ]; then
  if [ -z "$sanitizer" ]; then
    record "compute-sanitizer" SKIP 0 "no compute-sanitizer (tools/pack-gpu.sh --with-sanitizer)"
  else
    for tool in memcheck racecheck; do
      log="$out/sanitizer-$tool.log"
      # One rank started without mpiexec (an MPI singleton): the sanitizer sees the process.
      run_step "compute-sanitizer $tool" "$log" "$sanitizer" --tool "$tool" --error-exitcode 1 \
        "$BB" run --backend cuda --stage transformer --model tiny --model-layers 2 \
        --schedule zb-v,1f1b -M 2 --dtype "$([ $tool = memcheck ] && echo fp32 || echo bf16)" \
        --warmup 0 --iters 1 --check --no-calibrate --timeout 100
      set_last "${statuses[${#statuses[@]}-1]}" "$(grep -m1 'ERROR SUMMARY' "$log" || echo 'no ERROR SUMMARY line')"
      grep -q 'ERROR SUMMARY: 0 errors' "$log" || set_last FAIL "$(grep -m1 'ERROR SUMMARY' "$log" || echo 'no ERROR SUMMARY line')"
    done
  fi
fi

# (g) Synthetic compute: measured against simulated bubble, and the attribution's residual.
if want synthetic; then
  table="$out/synthetic.table"
  if run_step "synthetic P=2 $transport" "$out/synthetic.log" "${to_file[@]}" "$table" \
    "$mpiexec" -n 2 "$BB" run --backend "$backend" --transport "$transport" --compute synthetic \
    --schedule 1f1b,zb-h1,zb-h2,zb-v -M 8,16 --t-f 2ms --t-b 2ms --t-w 2ms --warmup 1 --iters 5 \
    --timeout 100; then
    awk -v tb="$bubble_tol" -v tr="$resid_tol" '
      $1 == "#" && $2 == "schedule" { for (i = 2; i <= NF; ++i) col[$i] = i - 1; cols = NF - 1; next }
      cols && !/^#/ && NF == cols {
        d = $col["measured"] - $col["sim"]; if (d < 0) d = -d
        r = $col["resid"]; ar = r < 0 ? -r : r
        ok = d <= tb + 1e-12 && ar <= tr + 1e-12
        printf "%-10s M=%-3s measured %s  sim %s  |diff| %.4f  resid %s  %s\n", $1, $col["M"],
               $col["measured"], $col["sim"], d, r, ok ? "ok" : "OVER"
        n++; if (!ok) bad++; if (d > wd) wd = d; if (ar > wr) wr = ar
      }
      END {
        printf "%d of 8 rows; worst |measured - sim| %.4f (tolerance %s), worst |residual| %.4f (tolerance %s)\n", n, wd, tb, wr, tr
        exit (n != 8 || bad > 0)
      }' "$table" > "$out/synthetic-rows.log"
    rc=$?
    sed 's/^/   /' "$out/synthetic-rows.log"
    status=PASS
    [ $rc -ne 0 ] && status=FAIL
    if [ $shared_gpu -eq 1 ] && [ $mps_running -eq 0 ]; then status=SKIP; fi
    set_last "$status" "$(tail -n 1 "$out/synthetic-rows.log")"
  fi
fi

# --- Summary --------------------------------------------------------------------------------
total=$(( $(date +%s) - started ))
echo
echo "== Summary: $(grep -m1 '^GPU 0' "$out/nvidia-smi.txt" 2>/dev/null || echo "backend $backend") ($total s; $out)"
{
  printf '%-8s %7s  %-40s %s\n' status seconds step result
  for i in "${!names[@]}"; do
    printf '%-8s %7s  %-40s %s\n' "${statuses[$i]}" "${seconds[$i]}" "${names[$i]}" "${notes[$i]}"
  done
} | tee "$out/summary.txt"
for f in "$out"/gemm.log "$out"/stage-*.table "$out"/sweep.table; do
  [ -f "$f" ] && { echo; echo "-- $(basename "$f")"; grep -v '^\$ ' "$f" | head -n 60; }
done
failed=$(grep -cE '^(FAIL|TIMEOUT) ' "$out/summary.txt" || true)
echo
if [ "$failed" -gt 0 ]; then
  echo "gpu-check: $failed step(s) failed or timed out"
  exit 1
fi
echo "gpu-check: every step passed or was skipped (see the table)"
