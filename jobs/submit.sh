#!/bin/bash
# bubblebench: sbatch with the GPUs the backend needs. With BACKEND=cuda (in the environment)
# it adds --gpus-per-node=N to the sbatch line — N = GPUS_PER_NODE, else the
# --ntasks-per-node given, else the --ntasks given, else the script's own #SBATCH
# --ntasks-per-node or --ntasks line (one rank per GPU) — so the cuda backend
# never runs without GPUs and the scripts themselves still run on GPU-less nodes (a GRES
# request there is refused). Other backends: sbatch unchanged. Options after the script
# go to the script as usual; a --gpus* option given here is kept and nothing is added.
#
#   BACKEND=cuda jobs/submit.sh --ntasks=8 jobs/sweep-node.sbatch           # 8 GPUs
#   BACKEND=cuda GPUS_PER_NODE=4 jobs/submit.sh --nodes=2 --ntasks-per-node=4 jobs/multi-node.sbatch
#   BACKEND=cuda jobs/submit.sh --array=0-3 --ntasks=4 jobs/sweep-array.sbatch  # params/gpu.txt
#   SUBMIT_DRY_RUN=1 ...   print the sbatch line instead of running it
set -euo pipefail
opts=() script_seen=0 ntasks="" per_node="" gpus_given=0
for a in "$@"; do
  if [ "$script_seen" = 0 ]; then
    case $a in
      --ntasks=*) ntasks=${a#*=} ;;
      --ntasks-per-node=*) per_node=${a#*=} ;;
      --gpus* | -G*) gpus_given=1 ;;
      -*) ;;
      *) script_seen=1 script=$a ;;
    esac
  fi
  opts+=("$a")
done
[ "$script_seen" = 1 ] || { echo "submit.sh: usage: [BACKEND=cuda] jobs/submit.sh [sbatch options] SCRIPT [args]" >&2; exit 2; }
extra=()
if [ "${BACKEND:-}" = cuda ] && [ "$gpus_given" = 0 ]; then
  from_script() { sed -n "s/^#SBATCH --$1=\([0-9][0-9]*\).*/\1/p" "$script" 2>/dev/null | tail -n 1; }
  n=${GPUS_PER_NODE:-${per_node:-${ntasks:-$(from_script ntasks-per-node)}}}
  n=${n:-$(from_script ntasks)}
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "submit.sh: BACKEND=cuda: how many GPUs per node? Give --ntasks=N or --ntasks-per-node=N (one rank per GPU), or GPUS_PER_NODE=N" >&2; exit 2; }
  extra=(--gpus-per-node="$n")
fi
if [ "${SUBMIT_DRY_RUN:-0}" = 1 ]; then
  echo "sbatch ${extra[*]}${extra[*]:+ }${opts[*]}"
else
  exec sbatch "${extra[@]}" "${opts[@]}"
fi
