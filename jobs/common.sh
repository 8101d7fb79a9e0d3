# shellcheck shell=bash disable=SC2154  # user_args, srun_extra: set by the sourcing script
# bubblebench: the shell code that jobs/sweep-node.sbatch, jobs/multi-node.sbatch and
# jobs/sweep-array.sbatch share. Sourced by them, not run: each script keeps its settings
# (defaults, OUT), its checks and its own steps, and calls these in this order:
#   say, die, unq                       messages, errors (exit 2), --export quotes
#   (on sourcing) the site's modules and environment: jobs/site.sh, or SITE_SH=FILE
#   pick_backend                        GPUS of this node; BACKEND=auto -> cuda or cpu
#   share_warning N WHERE               warn when N cuda ranks share fewer GPUs
#   gemm_stage_defaults                 HIDDEN LAYERS MB_SIZE for gemm stages (not sweep-array)
#   build_args                          args: `run`, the variables' flags, --out, --trace
#                                       (TRACE), user_args
#   resume_or_start KEY WHO NEW         RESUME/FORCE against the marker OUT.job
#   launch                              refuse cuda without GPUs; print the srun line; DRY_RUN=1
#                                       stops there; else write the marker, check the
#                                       allocation, run the step (bounded by STEP_WAIT),
#                                       report how it ended (exit 5: requeue; a node that
#                                       cannot run it: requeue, exit 75, or 69), exit
# The script sets first: BB OUT SCHEDULES M_LIST V_LIST BACKEND COMPUTE MPI_PLUGIN,
# user_args (EXTRA_ARGS, split; sweep-array: the parameter line, then EXTRA_ARGS) and, before
# launch, srun_extra (SRUN_ARGS, split, plus the script's own srun options).
#
# sbatch runs a copy of the script from its spool directory, so a script finds this file
# through JOBS_DIR (default $SLURM_SUBMIT_DIR/jobs: submit from the repository root), not
# beside itself; the job reads it when it starts, not when it is submitted.

say() { echo "[$(date +%T)] ${SLURM_JOB_NAME:-bb}: $*"; }
die() {
  echo "${SLURM_JOB_NAME:-bb}: error: $*" >&2
  exit 2
}

# The site's part: modules to load, PATH/LD_LIBRARY_PATH, MPI and CUDA variables. Edit
# jobs/site.sh (the one place for them), or point SITE_SH at another file; every script
# sources it here, before anything else runs.
if [ -n "${SITE_SH:-}" ]; then
  [ -r "$SITE_SH" ] || die "SITE_SH=$SITE_SH: no such file"
  # shellcheck source=/dev/null
  . "$SITE_SH"
elif [ -r "${JOBS_DIR:-.}/site.sh" ]; then
  # shellcheck source=site.sh source-path=SCRIPTDIR
  . "${JOBS_DIR:-.}/site.sh"
fi

# Values given as --export=ALL,NAME='"a,b"' arrive with their quotes: drop one pair.
unq() {
  local v=$1
  [[ $v == \"*\" && ${#v} -ge 2 ]] && v=${v:1:${#v}-2}
  printf '%s' "$v"
}

# GPUs of this node: what SLURM allocated, else what the driver shows.
gpus_on_node() {
  if [ -n "${SLURM_GPUS_ON_NODE:-}" ]; then
    echo "$SLURM_GPUS_ON_NODE"
  elif command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true
  else
    echo 0
  fi
}
pick_backend() {  # sets GPUS; BACKEND=auto becomes cuda if the node has GPUs, else cpu
  GPUS=$(gpus_on_node)
  if [ "$BACKEND" = auto ]; then
    if [ "${GPUS:-0}" -gt 0 ]; then BACKEND=cuda; else BACKEND=cpu; fi
  fi
}
share_warning() {  # ranks where ("on this node", "per node"): say so if cuda ranks outnumber GPUS
  if [ "$BACKEND" = cuda ] && [ "${GPUS:-0}" -lt "$1" ]; then
    say "warning: $1 ranks $2 but $GPUS GPU(s): ranks will share devices"
  fi
}

# The argument list: the user's arguments (user_args) first decide; a variable adds its flag
# only when set and when the user's arguments do not already give that flag. They come last.
given() {  # flag [alias...]: 0 if the user's arguments contain it
  local a f
  for a in "${user_args[@]}"; do
    for f in "$@"; do
      [[ $a == "$f" || $a == "$f="* ]] && return 0
      [[ $f == -? && $a == "$f"?* ]] && return 0  # -M8
    done
  done
  return 1
}
value_of() {  # flag: the last value the user's arguments give it (--flag V or --flag=V)
  local i v=""
  for ((i = 0; i < ${#user_args[@]}; i++)); do
    case ${user_args[i]} in
      "$1") v=${user_args[i + 1]:-} ;;
      "$1"=*) v=${user_args[i]#*=} ;;
    esac
  done
  printf '%s' "$v"
}
opt() {  # value flag [alias...]
  local v
  v=$(unq "$1")
  shift
  [ -n "$v" ] && ! given "$@" && args+=("$1" "$v")
  return 0
}
switch() {  # 0|1 flag
  [ "$(unq "$1")" = 1 ] && ! given "$2" && args+=("$2")
  return 0
}

# GEMM stages big enough to measure the pipeline: with bubblebench's defaults (h 64, b 8,
# 1 layer) an action takes about one message hop and the bubble measured is mostly overhead.
# A variable set, even empty, keeps its value.
gemm_stage_defaults() {
  local compute backend size
  compute=$(value_of --compute)
  backend=$(value_of --backend)
  if [ "${compute:-${COMPUTE:-gemm}}" = gemm ]; then
    if [ "${backend:-$BACKEND}" = cuda ]; then size=(2048 2 1024); else size=(256 2 32); fi
    HIDDEN=${HIDDEN-${size[0]}} LAYERS=${LAYERS-${size[1]}} MB_SIZE=${MB_SIZE-${size[2]}}
  fi
}

build_args() {  # args=(run <the variables' flags> --out OUT <user_args>); --out given: OUT from it
  args=(run)
  opt "$SCHEDULES" --schedule -s
  opt "$M_LIST" -M
  opt "$V_LIST" -v
  opt "$BACKEND" --backend
  opt "${TRANSPORT:-}" --transport
  opt "$COMPUTE" --compute
  opt "${T_F:-}" --t-f
  opt "${T_B:-}" --t-b
  opt "${T_W:-}" --t-w
  opt "${T_FB:-}" --t-fb
  opt "${HIDDEN:-}" --hidden
  opt "${LAYERS:-}" --layers
  opt "${MB_SIZE:-}" --mb-size
  opt "${DTYPE:-}" --dtype
  opt "${WARMUP:-}" --warmup
  opt "${ITERS:-}" --iters
  opt "${SYNC:-}" --sync
  opt "${TIMEOUT:-}" --timeout
  switch "${CHECK:-0}" --check
  if given --out; then
    OUT=$(value_of --out)
    case "$OUT" in /*) ;; *) OUT=$PWD/$OUT ;; esac
  else
    args+=(--out "$OUT")
  fi
  # TRACE=DIR: Chrome traces of every run (run --trace DIR); TRACE=1: beside OUT, in
  # OUT's name with .traces instead of .h5.
  local trace
  trace=$(unq "${TRACE:-}")
  [ "$trace" = 1 ] && trace=${OUT%.h5}.traces
  [ -n "$trace" ] && [ "$trace" != 0 ] && ! given --trace && args+=(--trace "$trace")
  args+=("${user_args[@]}")
}

# Continue OUT or start it. OUT.job (the marker, written when the job starts) records which
# job writes OUT and with which command; RESUME=auto resumes only when both are this job's,
# i.e. when SLURM requeued it. A job id seen again (a fresh slurmctld state, two clusters
# sharing RESULTS_DIR) or another command finds OUT and stops instead of adding to it.
marker() { printf 'job_id=%s\ncluster=%s\ncommand=%s\n' "$JOB_KEY" "${SLURM_CLUSTER_NAME:-}" "${cmd[*]}"; }
not_ours() {  # who ("job"): why OUT is not this job's to resume (prints nothing if it is)
  local j c m
  [ -f "$MARK" ] || { echo "no $MARK records which job wrote it"; return 0; }
  j=$(sed -n 's/^job_id=//p' "$MARK")
  c=$(sed -n 's/^cluster=//p' "$MARK")
  m=$(sed -n 's/^command=//p' "$MARK")
  if [ "$j" != "$JOB_KEY" ] || [ "$c" != "${SLURM_CLUSTER_NAME:-}" ]; then
    echo "it was started by $1 $j${c:+ on cluster $c}"
  elif [ "$m" != "${cmd[*]}" ]; then
    echo "it was started by $1 $j with another command (see $MARK)"
  fi
}
# job key (job_id= in the marker), who ("job", "array task"), the setting for a new file
# ("OUT=<new file>"): adds --resume or --force to args, or stops the job (exit 2).
resume_or_start() {
  local who=$2 new=$3 a why
  JOB_KEY=$1
  FORCE=$(unq "${FORCE:-0}")
  given --force && FORCE=1
  RESUME=$(unq "${RESUME:-auto}")
  given --resume && RESUME=1
  case "$RESUME" in auto | 0 | 1) ;; *) die "RESUME=$RESUME: want auto, 1 or 0" ;; esac
  MARK=$OUT.job
  # how a new job continues OUT, for the messages of a job that gives up
  case $new in
    OUT_DIR=*) RESUME_HINT="RESUME=1 OUT_DIR=$(dirname "$OUT")" ;;
    *) RESUME_HINT="RESUME=1 OUT=$OUT" ;;
  esac
  cmd=("$BB")
  for a in "${args[@]}"; do
    case $a in --resume | --force) ;; *) cmd+=("$a") ;; esac
  done
  if [ "$FORCE" = 1 ]; then
    [ "$RESUME" = 1 ] && die "FORCE=1 and RESUME=1 exclude each other (replace OUT or continue it)"
    switch 1 --force
  elif [ "$RESUME" = 1 ]; then
    switch 1 --resume
    [ -e "$OUT" ] || say "RESUME=1, but $OUT does not exist: starting it"
  elif [ -e "$OUT" ]; then
    why=$(not_ours "$who")
    [ "$RESUME" = 0 ] && die "$OUT exists (RESUME=0): set $new, RESUME=1 to continue it, or FORCE=1 to replace it"
    [ -z "$why" ] || die "$OUT exists and $why: not touching it. Set $new for a new sweep, or RESUME=1 to continue this one (FORCE=1 replaces it)"
    say "requeued: resuming $OUT (the runs already complete are skipped)"
    switch 1 --resume
  fi
}

# --- The step, bounded ------------------------------------------------------------------------
# No step waits forever (issue 33). srun gets --immediate=STEP_WAIT: SLURM has STEP_WAIT seconds
# to create the step, else srun fails ("Unable to create step") instead of retrying "step
# creation temporarily disabled" until the time limit. Before the step, the allocation is read
# afresh from slurmctld (the environment is only what this start was given); after a failed
# step, a one-task-per-node test step (the probe, bounded the same way) tells a node that
# cannot run steps from the benchmark's own failure. A job whose nodes cannot run its step
# requeues itself (exit 75) to resume OUT on its next start, at most REQUEUE_LIMIT times; then
# it fails with one line (exit 69).
STEP_WAIT=$(unq "${STEP_WAIT:-120}")
REQUEUE_LIMIT=$(unq "${REQUEUE_LIMIT:-3}")
[[ $STEP_WAIT =~ ^[0-9]+$ ]] || die "STEP_WAIT=$STEP_WAIT: want seconds (0: wait as long as SLURM does)"
[[ $REQUEUE_LIMIT =~ ^[0-9]+$ ]] || die "REQUEUE_LIMIT=$REQUEUE_LIMIT: want a count"
step_bound=()
[ "$STEP_WAIT" = 0 ] || step_bound=(--immediate="$STEP_WAIT")

# Requeues of this job for nodes that could not run its step: node_requeues= in the marker,
# counted only when the marker is this job's (a RESUME=1 of another job's file starts at 0).
past_requeues() {
  local n=0
  if [ -f "$MARK" ] && [ "$(sed -n 's/^job_id=//p' "$MARK")" = "$JOB_KEY" ] &&
    [ "$(sed -n 's/^cluster=//p' "$MARK")" = "${SLURM_CLUSTER_NAME:-}" ]; then
    n=$(sed -n 's/^node_requeues=//p' "$MARK")
    [[ $n =~ ^[0-9]+$ ]] || n=0
  fi
  echo "$n"
}
write_marker() {
  marker >"$MARK.tmp.$$" && printf 'node_requeues=%s\n' "$NODE_REQUEUES" >>"$MARK.tmp.$$" &&
    mv -f "$MARK.tmp.$$" "$MARK"
}

# why: this allocation cannot run the step. Requeue the job (exit 75) or, past REQUEUE_LIMIT or
# when SLURM refuses, fail with one line (exit 69). A requeued job keeps its id, so its next
# start resumes OUT (RESUME=auto); slurmctld has marked a node that did not answer as not
# responding by then, so that start does not go to it.
requeue_broken() {
  local why=$1
  if [ "$NODE_REQUEUES" -ge "$REQUEUE_LIMIT" ]; then
    echo "${SLURM_JOB_NAME:-bb}: error: $why; not requeued: requeued $NODE_REQUEUES time(s) for this already (REQUEUE_LIMIT=$REQUEUE_LIMIT); continue it in a new job with $RESUME_HINT (exit 69)" >&2
    exit 69
  fi
  NODE_REQUEUES=$((NODE_REQUEUES + 1))
  write_marker
  local next="resumes $OUT"
  [ -e "$OUT" ] || next="starts $OUT"
  say "$why: requeueing job $SLURM_JOB_ID (node requeue $NODE_REQUEUES of $REQUEUE_LIMIT); its next start $next (exit 75)"
  if ! scontrol requeue "$SLURM_JOB_ID" 2>&1; then
    echo "${SLURM_JOB_NAME:-bb}: error: $why; scontrol requeue $SLURM_JOB_ID failed: continue it in a new job with $RESUME_HINT (exit 69)" >&2
    exit 69
  fi
  exit 75
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2" | head -n 1; }  # NAME, `scontrol -o` line
hosts() { scontrol show hostnames "$1" 2>/dev/null | tr '\n' ' '; }

# The allocation now, from slurmctld, against what this start's environment says: a node lost
# since the job started (slurmctld shrinks a job whose node went down while it was completing
# a requeue: srun then says "SLURM_JOB_NUM_NODES ... conflicts with allocated node count") or
# a node down or not responding means the step cannot run here.
check_allocation() {
  local info state nodes num env_nodes env_num states bad
  if ! info=$(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null) || [ -z "$info" ]; then
    say "warning: scontrol show job $SLURM_JOB_ID failed: the allocation is not checked before the step"
    return 0
  fi
  state=$(field JobState "$info")
  case "$state" in
    RUNNING | CONFIGURING) ;;
    *) say "slurmctld says job $SLURM_JOB_ID is $state (requeued or ending while this start began): no step (exit 75)"
      exit 75 ;;
  esac
  nodes=$(field NodeList "$info")
  num=$(field NumNodes "$info")
  num=${num%%-*}
  env_nodes=${SLURM_JOB_NODELIST:-${SLURM_NODELIST:-}}
  env_num=${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-}}
  if [ -n "$env_nodes" ] && { [ "$(hosts "$nodes")" != "$(hosts "$env_nodes")" ] || [ "$num" != "${env_num:-$num}" ]; }; then
    requeue_broken "the allocation changed since this start began: its environment says $env_num node(s) $env_nodes, slurmctld $num node(s) $nodes (a node was lost)"
  fi
  # A node down or failed cannot run the step; one that is only not responding (slurmctld adds
  # '*' to its state: a missed ping, maybe a busy node) gets the step, bounded like any other.
  # Draining nodes still run jobs.
  states=$(sinfo -h -N -n "$nodes" -o '%N %T' 2>/dev/null | sort -u)
  bad=$(awk '$2 ~ /^(down|fail)\*?$/ { printf "%s%s (%s)", sep, $1, $2; sep = ", " }' <<<"$states")
  [ -z "$bad" ] || requeue_broken "node(s) of this job cannot run its step: $bad"
  bad=$(awk '$2 ~ /\*$/ { printf "%s%s (%s)", sep, $1, $2; sep = ", " }' <<<"$states")
  [ -z "$bad" ] || say "warning: node(s) not responding to slurmctld: $bad; trying the step (it fails within STEP_WAIT=$STEP_WAIT s and its launch if they are gone)"
  say "start $((${SLURM_RESTART_COUNT:-0} + 1)) of job $SLURM_JOB_ID: slurmctld agrees, $num node(s) $nodes"
}

# 0 if a step of one task per node runs `true` on every node of the job within STEP_WAIT (and
# its launch); else 1, with srun's first error line in PROBE_ERR.
probe_nodes() {
  local n=${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-1}} err
  err=$(timeout -k 5 $((STEP_WAIT > 0 ? STEP_WAIT + 60 : 600)) srun "${step_bound[@]}" --mpi=none \
    --nodes="$n" --ntasks="$n" --ntasks-per-node=1 --cpus-per-task=1 --cpu-bind=none \
    --kill-on-bad-exit=1 true 2>&1 >/dev/null) && return 0
  PROBE_ERR=$(grep -m 1 -i 'error' <<<"$err" || true)
  PROBE_ERR=${PROBE_ERR:-${err%%$'\n'*}}
  PROBE_ERR=${PROBE_ERR:-no step within $((STEP_WAIT + 60)) s}
  return 1
}

# The step: print it; unless DRY_RUN=1, write the marker, check the allocation, run the step,
# say how it ended, and exit with srun's status (75 after requeueing for a node that cannot run
# it; 69 when that is not possible).
launch() {
  local rc=0 backend msg
  # The CUDA backend needs the GPUs requested (sbatch --gpus-per-node=N, which jobs/submit.sh
  # adds when BACKEND=cuda): without them every rank would fail to find a device.
  backend=$(value_of --backend)
  if [ "${backend:-$BACKEND}" = cuda ] && [ "${GPUS:-0}" = 0 ]; then
    msg="the cuda backend, but this job has no GPUs: submit with BACKEND=cuda jobs/submit.sh [sbatch options] SCRIPT (it adds --gpus-per-node), or sbatch --gpus-per-node=N"
    if [ "${DRY_RUN:-0}" = 1 ]; then say "warning: $msg"; else die "$msg"; fi
  fi
  # Ranks bound to cores (issue 19: unbound ranks running identical stages differed by 20 %
  # in busy time): each rank gets CPUS_PER_TASK cores of its own. SRUN_ARGS (already in
  # srun_extra, after these) can override both; CPU_BIND=none turns binding off.
  srun_extra=(--cpu-bind="${CPU_BIND:-cores}" --cpus-per-task="${CPUS_PER_TASK:-${SLURM_CPUS_PER_TASK:-1}}"
    "${step_bound[@]}" "${srun_extra[@]}")
  say "srun --mpi=$MPI_PLUGIN ${srun_extra[*]} $BB ${args[*]}"
  [ "${DRY_RUN:-0}" = 1 ] && exit 0
  mkdir -p "$(dirname "$OUT")"
  NODE_REQUEUES=$(past_requeues)
  write_marker
  check_allocation
  srun --mpi="$MPI_PLUGIN" --kill-on-bad-exit=1 "${srun_extra[@]}" "$BB" "${args[@]}" || rc=$?
  if [ -e "$OUT" ]; then say "exit $rc; results: $OUT"; else say "exit $rc; no results: $OUT was not created"; fi
  # Exit 5: SIGUSR1 (#SBATCH --signal=USR1@120, before the time limit) stopped the sweep
  # between runs; requeued, the job resumes OUT (RESUME=auto: its own marker) and runs the rest.
  if [ "$rc" = 5 ] && [ -n "${SLURM_JOB_ID:-}" ]; then
    say "stopped between runs before the time limit: requeueing job $SLURM_JOB_ID to resume $OUT"
    if scontrol requeue "$SLURM_JOB_ID"; then exit 0; fi
    say "scontrol requeue failed: resume by hand (RESUME=1 OUT=$OUT)"
  fi
  # A failed step on a node that cannot run steps (lost mid-sweep, or the step never started):
  # requeue. A step that failed on healthy nodes is the benchmark's own failure: its exit code.
  if [ "$rc" != 0 ] && [ "$rc" != 5 ] && ! probe_nodes; then
    requeue_broken "the step ended with exit $rc and a test step on the job's nodes fails ($PROBE_ERR)"
  fi
  # Under srun, a rank's MPI_Abort (the watchdog's exit 3, a failed write's 4) makes SLURM
  # kill the whole step: srun then reports 137, not bubblebench's code.
  [ "$rc" -ge 128 ] && say "exit $rc = signal $((rc - 128)): SLURM killed the step. A rank's MPI_Abort shows as 137 under srun (bubblebench's watchdog exits 3 under mpiexec, a failed write 4), and so does a rank the OOM killer ended: the cause is the rank's one-line message above (the watchdog's is 'rank R: waiting ...')"
  exit "$rc"
}
