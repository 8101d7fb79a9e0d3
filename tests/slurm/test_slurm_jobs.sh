#!/usr/bin/env bash
# The jobs/ scripts end to end in a real (local, single-node) SLURM 22.05:
#   0. bash -n and shellcheck on jobs/*.sbatch, jobs/common.sh, tools/*.sh and tests/slurm/*.sh;
#      DRY_RUN=1 runs of the scripts outside SLURM: the command lines they build (stage-size
#      defaults, EXTRA_ARGS last, OUT_DIR, a comma value, --immediate=STEP_WAIT), RESUME=auto
#      resuming only its own job's file (marker <file>.job), params.txt compared, a missing
#      jobs/common.sh refused; with a fake scontrol/sinfo/srun, the step's guard (issue 33): a
#      lost or down node requeues (exit 75), a failed probe requeues, REQUEUE_LIMIT (exit 69)
#   1. tools/slurm-local.sh up (idempotent), in its own state dir and ports (6827/6828)
#   2. a plain job: `srun --mpi=pmi2 -n 2` of a shell (SLURM_PROCID/LOCALID), of an MPI hello
#      (PMI2 wire-up with MPICH) and of `bubblebench run` without --out
#   3. jobs/sweep-array.sbatch over jobs/params/smoke.txt (2 tasks, 2 CPU ranks each,
#      synthetic stages), jobs/merge_index.py as a dependent job, and jobs/sweep-node.sbatch
#      (2 CPU ranks): job states from scontrol, then the HDF5 files with h5py (runs complete,
#      slurm_job_id / slurm_array_job_id / slurm_array_task_id at the root, index.h5 reaching
#      every task's runs)
#      Then: an array task requeued (resumes its file, appends to its log, params.txt kept),
#      a job failing with exit 2 (the log says the results file was not created), a watchdog
#      abort (exit 137, explained in the log), a comma value through sbatch --export, and a
#      step that SLURM cannot create (its CPUs held by another step): failed within STEP_WAIT
#   4. jobs/merge_index.py on hand-made task files (links and --copy), independent of `run`
#   5. tools/slurm-local.sh down (twice): the daemons are gone
# Never skips: if SLURM is missing or does not start, it fails with the daemon logs.
#   usage: tests/slurm/test_slurm_jobs.sh BUILD_DIR      (KEEP=1 keeps the temporary folder)
set -uo pipefail
BUILD=${1:?usage: $0 BUILD_DIR}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BB=$(cd "$BUILD" 2>/dev/null && pwd)/bubblebench
PY=/usr/bin/python3
SL=$ROOT/tools/slurm-local.sh
WAIT_JOBS=${WAIT_JOBS:-150}  # seconds for all jobs together
t0=$(date +%s)

# A private cluster: own state dir and ports (not a developer's tools/slurm-local.sh up on the
# defaults, not a system slurmctld), and none of an enclosing job's SLURM variables.
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM_|SBATCH_|SRUN_|SALLOC_)')
export BB_SLURM_CTLD_PORT=${BB_SLURM_CTLD_PORT:-6827}
export BB_SLURM_SLURMD_PORT=${BB_SLURM_SLURMD_PORT:-6828}
tmp=$(mktemp -d /tmp/bb-slurm-test.XXXXXX)
# A fixed state dir: if an earlier run was killed before its trap could stop the daemons,
# this run's first `down` finds them by their PID files and stops them.
STATE=${BB_SLURM_TEST_DIR:-/tmp/bb-slurm-test-state-$(id -u)}
# Two runs of this test at once (several worktrees on one machine) would share that state dir
# and those ports and stop each other's daemons: the second waits for the first.
exec 9>"$STATE.lock"
if ! flock -w 900 9; then
  echo "FAIL: another run of this test holds $STATE.lock for 900 s"
  exit 1
fi
"$ROOT/tools/slurm-local.sh" down "$STATE" >/dev/null 2>&1
rm -rf "$STATE"
fails=0
pass=0
check() {  # name, status
  if [ "$2" = 0 ]; then
    pass=$((pass + 1))
    echo "ok: $1"
  else
    echo "FAIL: $1"
    fails=$((fails + 1))
  fi
}
dump() {  # everything that helps after a failure
  local f
  for f in "$tmp"/*.out; do
    [ -f "$f" ] || continue
    echo "----- $f -----"
    tail -n 40 "$f"
  done
  if "$SL" status "$STATE" >/dev/null 2>&1; then
    squeue 2>&1 | head -n 20
  fi
  [ -f "$STATE/slurm.conf" ] && "$SL" logs "$STATE" 2>&1
}
cleanup() {
  "$SL" down "$STATE" >/dev/null 2>&1 || true
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $tmp and $STATE"; else rm -rf "$tmp" "$STATE"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- 0. static checks --------------------------------------------------------------------
for f in "$ROOT"/jobs/*.sbatch "$ROOT"/jobs/*.sh "$ROOT"/tools/*.sh "$ROOT"/tests/slurm/*.sh; do
  bash -n "$f"
  check "bash -n ${f#"$ROOT"/}" $?
done
if command -v shellcheck >/dev/null 2>&1; then
  for f in "$ROOT"/jobs/*.sbatch "$ROOT"/jobs/*.sh "$ROOT"/tools/*.sh "$ROOT"/tests/slurm/*.sh; do
    shellcheck -x "$f"
    check "shellcheck ${f#"$ROOT"/}" $?
  done
else
  check "shellcheck installed (apt-get install shellcheck)" 1
fi
$PY -c "import sys, h5py; compile(open(sys.argv[1]).read(), sys.argv[1], \"exec\")" "$ROOT/jobs/merge_index.py"
check "merge_index.py compiles; $PY has h5py" $?
[ -x "$BB" ]
check "bubblebench built at $BB" $?
# --- 0b. DRY_RUN: the command lines the scripts build, outside SLURM ----------------------
# Each script runs as job 77 (array 70, task 0) of cluster "testc", in a clean environment.
DRY=$tmp/dry
dry() {  # script VAR=value...: DRY_RUN=1 of jobs/<script>.sbatch; output in $tmp/dry.out
  local script=$1
  shift
  (cd "$ROOT" && env -i PATH="$PATH" HOME="${HOME:-/root}" SLURM_JOB_ID=77 \
    SLURM_ARRAY_JOB_ID=70 SLURM_ARRAY_TASK_ID=0 SLURM_CLUSTER_NAME=testc \
    SLURM_SUBMIT_DIR="$ROOT" BB="$BB" RESULTS_DIR="$DRY" DRY_RUN=1 "$@" \
    bash "jobs/$script.sbatch") >"$tmp/dry.out" 2>&1
}
cmdline() { sed -n "s|.*: srun --mpi=[^ ]* .*\($BB \)|\1|p" "$tmp/dry.out"; }  # "$BB run ..."
srunopts() { sed -n "s|.*: srun --mpi=[^ ]* \(.*\)$BB .*|\1|p" "$tmp/dry.out"; }  # "--x --y "
has() { grep -qF -- "$1" <<<"$(cmdline)"; }
refused() {  # exit status, words...: exit 2, one line on stderr naming the words, no srun
  local rc=$1 w
  shift
  [ "$rc" = 2 ] && [ "$(wc -l <"$tmp/dry.out")" = 1 ] && [ -z "$(cmdline)" ] || return 1
  for w in "$@"; do grep -qF -- "$w" "$tmp/dry.out" || return 1; done
}
mkdir -p "$DRY"
# Stage size: gemm defaults that measure the pipeline, not bubblebench's 64/1/8.
for s in sweep-node multi-node; do
  dry $s BACKEND=cpu && has " --hidden 256 --layers 2 --mb-size 32 "
  rc=$?  # before the $(...) in the name overwrites it
  check "DRY_RUN $s: cpu gemm stage 256/2/32 ($(cmdline))" $rc
  dry $s BACKEND=cuda && has " --hidden 2048 --layers 2 --mb-size 1024 "
  check "DRY_RUN $s: cuda gemm stage 2048/2/1024" $?
done
for s in sweep-node multi-node sweep-array; do
  dry $s BACKEND=cpu PARAMS=jobs/params/smoke.txt && [[ "$(srunopts)" == "--cpu-bind=cores --cpus-per-task=1 "* ]]
  rc=$?  # before the $(...) in the name overwrites it
  check "DRY_RUN $s: ranks bound to cores by default (srun $(srunopts))" $rc
done
dry sweep-node BACKEND=cpu CPU_BIND=none CPUS_PER_TASK=2 && [ "$(srunopts)" = "--cpu-bind=none --cpus-per-task=2 --immediate=120 " ]
check "DRY_RUN sweep-node: CPU_BIND=none CPUS_PER_TASK=2" $?
# Issue 33: no step waits forever. srun --immediate=STEP_WAIT on every script (0: SLURM's own
# unbounded wait); a bad value is refused.
for s in sweep-node multi-node sweep-array; do
  dry $s BACKEND=cpu PARAMS=jobs/params/smoke.txt STEP_WAIT=30 && [[ "$(srunopts)" == *" --immediate=30 "* ]]
  check "DRY_RUN $s: STEP_WAIT=30 gives srun --immediate=30" $?
done
dry sweep-node BACKEND=cpu STEP_WAIT=0 && [ -n "$(cmdline)" ] && [[ "$(srunopts)" != *immediate* ]]
check "DRY_RUN sweep-node: STEP_WAIT=0: no --immediate" $?
dry sweep-node BACKEND=cpu STEP_WAIT=soon
refused $? "STEP_WAIT=soon"
check "DRY_RUN sweep-node: STEP_WAIT=soon refused" $?
dry sweep-node BACKEND=cpu COMPUTE=synthetic && ! has "--hidden"
check "DRY_RUN sweep-node: no stage size with synthetic compute" $?
dry sweep-node BACKEND=cpu EXTRA_ARGS="--hidden 128" HIDDEN= && has "--hidden 128" &&
  [ "$(cmdline | grep -o -- '--hidden' | wc -l)" = 1 ] && has "--layers 2 --mb-size 32"
check "DRY_RUN sweep-node: EXTRA_ARGS --hidden replaces the default, once" $?
dry sweep-node BACKEND=cpu M_LIST='"4,8"' && has " -M 4,8 "
check "DRY_RUN sweep-node: M_LIST='\"4,8\"' (as --export passes it) gives -M 4,8" $?
# Resume: RESUME=auto continues OUT only for the job (id, cluster, command) in OUT.job.
dry sweep-node BACKEND=cpu
node_cmd=$(cmdline)
mkdir -p "$DRY/77" && : >"$DRY/77/sweep.h5"
dry sweep-node BACKEND=cpu
refused $? "sweep.h5 exists" "OUT=" "RESUME=1"
check "DRY_RUN sweep-node: OUT exists without a marker: refused, exit 2, one line" $?
printf 'job_id=76\ncluster=testc\ncommand=%s\n' "$node_cmd" >"$DRY/77/sweep.h5.job"
dry sweep-node BACKEND=cpu
refused $? "started by job 76"
check "DRY_RUN sweep-node: OUT of another job id: refused" $?
printf 'job_id=77\ncluster=other\ncommand=%s\n' "$node_cmd" >"$DRY/77/sweep.h5.job"
dry sweep-node BACKEND=cpu
refused $? "cluster other"
check "DRY_RUN sweep-node: OUT of the same job id on another cluster: refused" $?
printf 'job_id=77\ncluster=testc\ncommand=%s\n' "$node_cmd" >"$DRY/77/sweep.h5.job"
dry sweep-node BACKEND=cpu && [ "$(cmdline)" = "$node_cmd --resume" ]
check "DRY_RUN sweep-node: same job and command (a requeue): --resume" $?
dry sweep-node BACKEND=cpu M_LIST=4
refused $? "another command"
check "DRY_RUN sweep-node: same job id, another command: refused" $?
dry sweep-node BACKEND=cpu M_LIST=4 RESUME=1 && has " -M 4 " && has " --resume"
check "DRY_RUN sweep-node: RESUME=1 continues it anyway" $?
dry sweep-node BACKEND=cpu RESUME=0
refused $? "RESUME=0"
check "DRY_RUN sweep-node: RESUME=0 with OUT existing: refused" $?
dry sweep-node BACKEND=cpu M_LIST=4 FORCE=1 && has " --force" && ! has "--resume"
check "DRY_RUN sweep-node: FORCE=1 replaces it" $?
mkdir -p "$DRY/77" && : >"$DRY/77/multi-node.h5"
dry multi-node BACKEND=cpu
refused $? "multi-node.h5 exists"
check "DRY_RUN multi-node: OUT exists without a marker: refused" $?
# The array: EXTRA_ARGS after the line (the last value wins), OUT_DIR, params.txt, resume.
dry sweep-array PARAMS=jobs/params/smoke.txt ITERS=9 EXTRA_ARGS="--iters 3" &&
  [[ "$(cmdline)" == *" --iters 2 "*"--iters 3" ]] && ! has "--iters 9"
rc=$?  # before the $(...) in the name overwrites it
check "DRY_RUN sweep-array: EXTRA_ARGS after the line's flags ($(cmdline))" $rc
dry sweep-array PARAMS=jobs/params/smoke.txt OUT_DIR="$DRY/old" && has "--out $DRY/old/task-0.h5"
check "DRY_RUN sweep-array: OUT_DIR sets the folder of the task files" $?
mkdir -p "$DRY/70" && cp "$ROOT/jobs/params/gpu.txt" "$DRY/70/params.txt"
dry sweep-array PARAMS=jobs/params/smoke.txt
refused $? "differs from $DRY/70/params.txt"
check "DRY_RUN sweep-array: PARAMS differs from the saved params.txt: refused" $?
cp "$ROOT/jobs/params/smoke.txt" "$DRY/70/params.txt" && : >"$DRY/70/task-0.h5"
dry sweep-array PARAMS=jobs/params/smoke.txt
refused $? "task-0.h5 exists" "OUT_DIR=" "RESUME=1"
check "DRY_RUN sweep-array: task file without a marker: refused" $?
dry sweep-array PARAMS=jobs/params/smoke.txt RESUME=1 && has "--resume"
check "DRY_RUN sweep-array: RESUME=1 continues it" $?
# The shared code is found through JOBS_DIR (default $SLURM_SUBMIT_DIR/jobs): without it,
# one line naming the file and JOBS_DIR, exit 2.
for s in sweep-node multi-node sweep-array; do
  dry $s JOBS_DIR="$tmp/nowhere"
  refused $? "no $tmp/nowhere/common.sh" "repository root" "JOBS_DIR="
  check "DRY_RUN $s: no common.sh in JOBS_DIR: refused, exit 2, one line" $?
done

# Issue 22: the site's environment in one file, TRACE=, GPUs with the cuda backend, the
# array's default parameter file by backend, the headers for binding and requeue.
# shellcheck disable=SC2016  # expanded by the job, not here
printf 'echo "site file read: MPI_PLUGIN=${MPI_PLUGIN:-unset}"\n' >"$tmp/site.sh"
dry sweep-node BACKEND=cpu OUT="$DRY/i22/a.h5" SITE_SH="$tmp/site.sh" && grep -q "^site file read: MPI_PLUGIN=unset" "$tmp/dry.out" &&
  [ -n "$(cmdline)" ]
check "DRY_RUN sweep-node: SITE_SH is sourced before the script's settings" $?
dry sweep-node BACKEND=cpu SITE_SH="$tmp/no-site.sh"
refused $? "SITE_SH=$tmp/no-site.sh: no such file"
check "DRY_RUN sweep-node: a missing SITE_SH: refused" $?
dry sweep-node BACKEND=cpu OUT="$DRY/i22/a.h5" TRACE=1 && has "--trace $DRY/i22/a.traces "
check "DRY_RUN sweep-node: TRACE=1 traces beside OUT ($(cmdline))" $?
dry sweep-node BACKEND=cpu OUT="$DRY/i22/a.h5" TRACE="$tmp/tr" EXTRA_ARGS="--trace $tmp/mine" && has "--trace $tmp/mine" &&
  [ "$(cmdline | grep -o -- '--trace' | wc -l)" = 1 ]
check "DRY_RUN sweep-node: --trace in EXTRA_ARGS replaces TRACE" $?
dry sweep-node BACKEND=cuda OUT="$DRY/i22/a.h5" && [ -n "$(cmdline)" ] && grep -q "warning: the cuda backend, but this job has no GPUs: submit with BACKEND=cuda jobs/submit.sh" "$tmp/dry.out"
check "DRY_RUN sweep-node: cuda without GPUs is named (a real job stops)" $?
dry sweep-array BACKEND=cpu OUT_DIR="$DRY/p-cpu" && has "--backend cpu --schedule all -M 8,16,32 -v 1,2 --compute synthetic"
check "DRY_RUN sweep-array: the cpu backend's default PARAMS is jobs/params/cpu.txt ($(cmdline))" $?
dry sweep-array BACKEND=cuda OUT_DIR="$DRY/p-gpu" && has "--backend cuda --schedule all -M 8,16,32 -v 1,2 --compute synthetic"
check "DRY_RUN sweep-array: the cuda backend's default PARAMS is jobs/params/gpu.txt" $?
[ "$(cd "$ROOT" && BACKEND=cuda SUBMIT_DRY_RUN=1 jobs/submit.sh --ntasks=4 jobs/sweep-node.sbatch)" = "sbatch --gpus-per-node=4 --ntasks=4 jobs/sweep-node.sbatch" ] &&
  [ "$(cd "$ROOT" && BACKEND=cuda SUBMIT_DRY_RUN=1 jobs/submit.sh jobs/multi-node.sbatch)" = "sbatch --gpus-per-node=4 jobs/multi-node.sbatch" ] &&
  [ "$(cd "$ROOT" && BACKEND=cpu SUBMIT_DRY_RUN=1 jobs/submit.sh --ntasks=2 jobs/sweep-node.sbatch)" = "sbatch --ntasks=2 jobs/sweep-node.sbatch" ]
check "jobs/submit.sh: --gpus-per-node with BACKEND=cuda only" $?
for s in sweep-node multi-node sweep-array; do
  grep -q '^#SBATCH --cpus-per-task=1$' "$ROOT/jobs/$s.sbatch" && grep -q '^#SBATCH --signal=USR1@120$' "$ROOT/jobs/$s.sbatch" &&
    grep -q '^#SBATCH --requeue$' "$ROOT/jobs/$s.sbatch" && grep -q '^#SBATCH --open-mode=append$' "$ROOT/jobs/$s.sbatch"
  check "$s.sbatch: --cpus-per-task, --signal=USR1@120, --requeue, --open-mode=append" $?
done

# --- 0c. the step's guard against a broken allocation, with a fake SLURM ----------------------
# scontrol, sinfo and srun replaced by scripts (FAKE_* say what they answer; every call is
# logged in fake.log): a real run of jobs/sweep-node.sbatch as job 77 on nodes n[1-2], start 2
# (SLURM_RESTART_COUNT=1), outside SLURM.
FAKE=$tmp/fake-slurm
mkdir -p "$FAKE"
cat >"$FAKE/scontrol" <<'EOF'
#!/bin/bash
echo "scontrol $*" >>"$FAKE_LOG"
case "$1 $2" in
  "show job") printf 'JobId=77 JobName=x JobState=%s Restarts=1 ReqNodeList=(null) NodeList=%s BatchHost=n1 NumNodes=%s NumCPUs=2\n' \
    "${FAKE_STATE:-RUNNING}" "${FAKE_NODES:-n[1-2]}" "${FAKE_NUM:-2}" ;;
  "show hostnames") if [[ $3 =~ ^(.*)\[([0-9]+)-([0-9]+)\]$ ]]; then
      for ((i = BASH_REMATCH[2]; i <= BASH_REMATCH[3]; i++)); do echo "${BASH_REMATCH[1]}$i"; done
    else tr ',' '\n' <<<"$3"; fi ;;
  "requeue 77") exit "${FAKE_REQUEUE_RC:-0}" ;;
  *) exit 1 ;;
esac
EOF
cat >"$FAKE/sinfo" <<'EOF'
#!/bin/bash
echo "sinfo $*" >>"$FAKE_LOG"
printf '%s\n' "n1 allocated" "n2 ${FAKE_N2:-allocated}"
EOF
cat >"$FAKE/srun" <<'EOF'
#!/bin/bash
echo "srun $*" >>"$FAKE_LOG"
if [ "${*: -1}" = true ]; then  # the probe
  [ "${FAKE_PROBE_RC:-0}" = 0 ] || echo "srun: error: Task launch for StepId=77.1 failed on node n2: Communication connection failure" >&2
  exit "${FAKE_PROBE_RC:-0}"
fi
exit "${FAKE_STEP_RC:-0}"
EOF
chmod +x "$FAKE"/*
fake() {  # VAR=value...: jobs/sweep-node.sbatch as job 77 on n[1-2]; output in $tmp/fake.out
  : >"$tmp/fake.log"
  (cd "$ROOT" && env -i PATH="$FAKE:$PATH" HOME="${HOME:-/root}" SLURM_JOB_ID=77 \
    SLURM_CLUSTER_NAME=testc SLURM_SUBMIT_DIR="$ROOT" SLURM_JOB_NODELIST='n[1-2]' \
    SLURM_JOB_NUM_NODES=2 SLURM_NNODES=2 SLURM_RESTART_COUNT=1 FAKE_LOG="$tmp/fake.log" \
    BB="$BB" OUT="$FAKE/out/sweep.h5" BACKEND=cpu STEP_WAIT=7 "$@" bash jobs/sweep-node.sbatch) \
    >"$tmp/fake.out" 2>&1
}
steps() { grep -c "^srun .*$BB run" "$tmp/fake.log"; }          # main steps run
probes() { grep -c '^srun .* true$' "$tmp/fake.log"; }           # probes run
requeued() { grep -c '^scontrol requeue 77$' "$tmp/fake.log"; }  # requeue requests
count() { sed -n 's/^node_requeues=//p' "$FAKE/out/sweep.h5.job"; }
fake
rc=$?
[ $rc = 0 ] && [ "$(steps)" = 1 ] && [ "$(probes)" = 0 ] && [ "$(requeued)" = 0 ] &&
  grep -q "^srun --mpi=pmi2 --kill-on-bad-exit=1 --cpu-bind=cores --cpus-per-task=1 --immediate=7 " "$tmp/fake.log" &&
  grep -q "start 2 of job 77: slurmctld agrees, 2 node(s) n\[1-2\]" "$tmp/fake.out" && [ "$(count)" = 0 ]
check "fake SLURM: healthy allocation: one step with --immediate=7, no probe, no requeue (rc $rc)" $?
fake FAKE_NODES=n1 FAKE_NUM=1
rc=$?
[ $rc = 75 ] && [ "$(steps)" = 0 ] && [ "$(requeued)" = 1 ] && [ "$(count)" = 1 ] &&
  grep -q "the allocation changed since this start began: its environment says 2 node(s) n\[1-2\], slurmctld 1 node(s) n1 (a node was lost): requeueing job 77 (node requeue 1 of 3)" "$tmp/fake.out"
check "fake SLURM: environment 2 nodes, slurmctld 1 (a lost node): no step, requeued, exit 75 (rc $rc)" $?
fake FAKE_N2='down*'
rc=$?
[ $rc = 75 ] && [ "$(steps)" = 0 ] && [ "$(requeued)" = 1 ] && [ "$(count)" = 2 ] &&
  grep -q "node(s) of this job cannot run its step: n2 (down\*): requeueing job 77 (node requeue 2 of 3)" "$tmp/fake.out"
check "fake SLURM: a node down: no step, requeued (2nd: count 2 in the marker), exit 75 (rc $rc)" $?
fake FAKE_N2='allocated*' FAKE_STEP_RC=233 FAKE_PROBE_RC=1
rc=$?
[ $rc = 75 ] && [ "$(steps)" = 1 ] && [ "$(probes)" = 1 ] && [ "$(requeued)" = 1 ] &&
  grep -q "warning: node(s) not responding to slurmctld: n2 (allocated\*)" "$tmp/fake.out" &&
  grep -q "the step ended with exit 233 and a test step on the job's nodes fails (srun: error: Task launch for StepId=77.1 failed on node n2: Communication connection failure): requeueing job 77 (node requeue 3 of 3)" "$tmp/fake.out" &&
  grep -q "^srun --immediate=7 --mpi=none --nodes=2 --ntasks=2 --ntasks-per-node=1 .* true$" "$tmp/fake.log"
check "fake SLURM: a node not responding: the step is tried, fails, the probe fails: requeued (rc $rc)" $?
fake FAKE_STEP_RC=233 FAKE_PROBE_RC=1
rc=$?
[ $rc = 69 ] && [ "$(requeued)" = 0 ] && [ "$(grep -c 'error:' "$tmp/fake.out")" = 1 ] &&
  grep -q "error: the step ended with exit 233 .*; not requeued: requeued 3 time(s) for this already (REQUEUE_LIMIT=3); continue it in a new job with RESUME=1 OUT=$FAKE/out/sweep.h5 (exit 69)" "$tmp/fake.out"
check "fake SLURM: REQUEUE_LIMIT reached: not requeued, one error line, exit 69 (rc $rc)" $?
rm -f "$FAKE/out/sweep.h5.job"
fake FAKE_STEP_RC=137
rc=$?
[ $rc = 137 ] && [ "$(probes)" = 1 ] && [ "$(requeued)" = 0 ] && tail -n 1 "$tmp/fake.out" | grep -q "exit 137 = signal 9"
check "fake SLURM: the step fails on healthy nodes (the probe passes): its own exit 137, no requeue (rc $rc)" $?
fake FAKE_STEP_RC=2
rc=$?
[ $rc = 2 ] && [ "$(probes)" = 1 ] && [ "$(requeued)" = 0 ]
check "fake SLURM: exit 2 on healthy nodes: exit 2, no requeue (rc $rc)" $?
fake FAKE_STEP_RC=1 FAKE_PROBE_RC=1 FAKE_REQUEUE_RC=1
rc=$?
[ $rc = 69 ] && [ "$(requeued)" = 1 ] && grep -q "error: the step ended with exit 1 .*; scontrol requeue 77 failed: continue it in a new job with RESUME=1 OUT=" "$tmp/fake.out"
check "fake SLURM: scontrol requeue refused: one error line, exit 69 (rc $rc)" $?
fake FAKE_STATE=PENDING
rc=$?
[ $rc = 75 ] && [ "$(steps)" = 0 ] && [ "$(requeued)" = 0 ] && grep -q "slurmctld says job 77 is PENDING" "$tmp/fake.out"
check "fake SLURM: slurmctld requeued the job already: no step, no second requeue, exit 75 (rc $rc)" $?
rm -f "$FAKE/out/sweep.h5.job"
fake FAKE_NODES=n1 FAKE_NUM=1 REQUEUE_LIMIT=0
rc=$?
[ $rc = 69 ] && [ "$(requeued)" = 0 ] && grep -q "not requeued: requeued 0 time(s) for this already (REQUEUE_LIMIT=0)" "$tmp/fake.out"
check "fake SLURM: REQUEUE_LIMIT=0: a lost node fails the job at once, exit 69 (rc $rc)" $?

missing=""
for b in munged munge sinfo sbatch srun squeue scontrol slurmctld slurmd mpicc; do
  command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || missing="$missing $b"
done
[ -z "$missing" ]
check "SLURM, munge and MPICH installed (missing:${missing:- none}; apt-get install slurm-wlm munge libmpich-dev)" $?
if [ -n "$missing" ]; then
  echo "FAILED: $fails of $((pass + fails)) checks"
  exit 1
fi

# --- 1. bring-up -------------------------------------------------------------------------
# A daemon that dies as it starts: `up` fails, names it and prints that daemon's own output.
mkdir -p "$tmp/fakebin"
printf '#!/bin/sh\necho "fatal: test slurmctld refuses to start" >&2\nexit 1\n' >"$tmp/fakebin/slurmctld"
chmod +x "$tmp/fakebin/slurmctld"
PATH="$tmp/fakebin:$PATH" BB_SLURM_ATTEMPTS=2 "$SL" up "$tmp/fake-state" >"$tmp/fake-up.out" 2>"$tmp/fake-up.err"
rc=$?
[ $rc = 1 ] && [ ! -s "$tmp/fake-up.out" ] &&
  grep -q "FAILED: slurmctld: exited as it started" "$tmp/fake-up.err" &&
  grep -A1 -- "----- $tmp/fake-state/log/slurmctld.out" "$tmp/fake-up.err" | grep -q "test slurmctld refuses" &&
  [ "$(grep -c "start attempt . of 2 failed" "$tmp/fake-up.err")" = 2 ] &&
  "$SL" status "$tmp/fake-state" >/dev/null 2>&1
[ $? = 3 ] && [ $rc = 1 ]
rc=$?
[ $rc = 0 ] || cat "$tmp/fake-up.err"
check "a slurmctld that exits at start: up fails after 2 attempts with its own log, nothing left running" $rc
if ! conf=$("$SL" up "$STATE"); then
  check "tools/slurm-local.sh up (daemon logs above)" 1
  echo "FAILED: $fails of $((pass + fails)) checks"
  exit 1
fi
eval "$conf"
check "slurm up in $(($(date +%s) - t0)) s: $conf" 0
[ "$("$SL" up "$STATE")" = "$conf" ]
check "up again while up: no-op, same SLURM_CONF" $?
[ "$(sinfo -h -o %T)" = idle ]
check "sinfo: node idle" $?
cd "$ROOT" || exit 1 # SLURM_SUBMIT_DIR of the jobs: the repository

# --- 2. plain srun job ---------------------------------------------------------------------
cat >"$tmp/mpi_hello.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char** argv) {
  int rank, size, sum = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("mpi rank %d of %d sum %d\n", rank, size, sum);
  MPI_Finalize();
  return 0;
}
EOF
mpicc -o "$tmp/mpi_hello" "$tmp/mpi_hello.c"
check "mpicc mpi_hello" $?
cat >"$tmp/plain.sh" <<EOF
#!/bin/bash
# shellcheck disable=SC2016
srun --mpi=pmi2 -n 2 bash -c 'echo "task \$SLURM_PROCID local \$SLURM_LOCALID of \$SLURM_NTASKS job \$SLURM_JOB_ID"'
echo "step1 rc=\$?"
srun --mpi=pmi2 -n 2 "$tmp/mpi_hello"
echo "step2 rc=\$?"
# shellcheck disable=SC2016
srun --mpi=pmi2 -n 2 --cpu-bind=cores --cpus-per-task=1 bash -c 'echo "bound \$SLURM_PROCID \$(grep Cpus_allowed_list /proc/self/status | cut -f2)"'
echo "stepb rc=\$?"
srun --mpi=pmi2 -n 2 "$BB" run --schedule 1f1b,gpipe -M 4 --backend cpu --compute synthetic --t-f 1ms --t-b 1ms --warmup 0 --iters 2
echo "step3 rc=\$?"
EOF
plain=$(sbatch --parsable --job-name=bb-plain --ntasks=2 --time=00:05:00 \
  --output="$tmp/%x-%j.out" "$tmp/plain.sh")
check "sbatch plain srun job ($plain)" $?

# --- 3. the job scripts --------------------------------------------------------------------
RES=$tmp/results
aid=$(env BB="$BB" RESULTS_DIR="$RES" PARAMS=jobs/params/smoke.txt \
  sbatch --parsable --array=0-1 --ntasks=2 --time=00:05:00 --output="$tmp/%x-%A_%a.out" \
  jobs/sweep-array.sbatch)
check "sbatch jobs/sweep-array.sbatch --array=0-1 ($aid)" $?
merge=$(sbatch --parsable --job-name=bb-merge --dependency=afterany:"$aid" --ntasks=1 \
  --time=00:05:00 --output="$tmp/%x-%j.out" \
  --wrap "$PY $ROOT/jobs/merge_index.py $RES/$aid --expect 2")
check "sbatch merge_index.py --dependency=afterany:$aid ($merge)" $?
node=$(env BB="$BB" RESULTS_DIR="$RES" SCHEDULES=1f1b,zb-h1 M_LIST=4 V_LIST=1 BACKEND=cpu \
  COMPUTE=synthetic T_F=1ms T_B=1ms WARMUP=1 ITERS=2 \
  sbatch --parsable --ntasks=2 --time=00:05:00 --output="$tmp/%x-%j.out" jobs/sweep-node.sbatch)
check "sbatch jobs/sweep-node.sbatch --ntasks=2 ($node)" $?

bad=$(env BB="$BB" RESULTS_DIR="$RES" SCHEDULES=1f1b M_LIST=4 BACKEND=cpu COMPUTE=synthetic \
  EXTRA_ARGS="--iters 0" \
  sbatch --parsable --job-name=bb-bad --ntasks=2 --time=00:05:00 --output="$tmp/%x-%j.out" \
  jobs/sweep-node.sbatch)
check "sbatch jobs/sweep-node.sbatch with a bad argument ($bad)" $?
hang=$(env BB="$BB" RESULTS_DIR="$RES" SCHEDULES=1f1b M_LIST=2 V_LIST=1 BACKEND=cpu \
  COMPUTE=synthetic T_F=1s T_B=1ms TIMEOUT=0.2 \
  sbatch --parsable --job-name=bb-hang --ntasks=2 --time=00:05:00 --output="$tmp/%x-%j.out" \
  jobs/sweep-node.sbatch)
check "sbatch jobs/sweep-node.sbatch that trips the watchdog ($hang)" $?
comma=$(sbatch --parsable --job-name=bb-comma --ntasks=1 --time=00:05:00 --output="$tmp/%x-%j.out" \
  --export=ALL,BB="$BB",RESULTS_DIR="$RES",DRY_RUN=1,M_LIST='"4,8"' jobs/sweep-node.sbatch)
check "sbatch --export=ALL,M_LIST='\"4,8\"' jobs/sweep-node.sbatch ($comma)" $?

# Issue 33: a step SLURM cannot create ("Requested nodes are busy": here a step of the job's
# own, started by the site file, holds its CPUs) fails within STEP_WAIT instead of waiting
# for ever; the probe then fails the same way and, with REQUEUE_LIMIT=0, the job fails with
# one line (exit 69). Without --immediate it would wait until the hog ends (300 s).
cat >"$tmp/hog.sh" <<'EOF'
# shellcheck shell=bash
srun --ntasks=1 --mpi=none sleep 300 </dev/null >/dev/null 2>&1 &
for ((i = 0; i < 150; i++)); do scontrol show step "$SLURM_JOB_ID.0" >/dev/null 2>&1 && break; sleep 0.2; done
EOF
busy=$(env BB="$BB" RESULTS_DIR="$RES" SCHEDULES=1f1b M_LIST=4 V_LIST=1 BACKEND=cpu COMPUTE=synthetic \
  SITE_SH="$tmp/hog.sh" STEP_WAIT=5 REQUEUE_LIMIT=0 \
  sbatch --parsable --job-name=bb-busy --ntasks=2 --time=00:05:00 --output="$tmp/%x-%j.out" \
  jobs/sweep-node.sbatch)
check "sbatch jobs/sweep-node.sbatch whose step cannot be created, STEP_WAIT=5 ($busy)" $?

ids="$plain,$aid,$merge,$node,$bad,$hang,$comma,$busy"
deadline=$(($(date +%s) + WAIT_JOBS))
while [ -n "$(squeue -h -j "$ids" -o %i 2>/dev/null)" ] && [ "$(date +%s)" -lt "$deadline" ]; do
  sleep 1
done
[ -z "$(squeue -h -j "$ids" -o %i 2>/dev/null)" ]
rc=$?  # before the $(...) in the name overwrites it
check "all jobs finished within ${WAIT_JOBS} s ($(($(date +%s) - t0)) s since start)" $rc

# JobState / ExitCode of a job (one line per array task): "ArrayTaskId=JobId:State:Exit"
states() {
  scontrol show job -o "$1" 2>/dev/null | tr ' ' '\n' |
    awk -F= '/^JobId=/{j=$2} /^ArrayTaskId=/{a=$2} /^JobState=/{s=$2}
             /^ExitCode=/{print (a==""?"-":a) "=" j ":" s ":" $2; a=""}'
}
job_ok() {  # job id, name
  local st
  st=$(states "$1" | tr '\n' ' ')
  [ -n "$st" ] && ! grep -qv ':COMPLETED:0:0' <<<"$(states "$1")"
  check "$2 completed, exit 0 ($st)" $?
}
job_ok "$plain" "plain job"
out=$tmp/bb-plain-$plain.out
grep -q "task 0 local 0 of 2 job $plain" "$out" && grep -q "task 1 local 1 of 2 job $plain" "$out" &&
  grep -q 'step1 rc=0' "$out"
check "srun --mpi=pmi2 -n 2: tasks 0 and 1 with SLURM_LOCALID" $?
grep -q 'mpi rank 0 of 2 sum 1' "$out" && grep -q 'mpi rank 1 of 2 sum 1' "$out" && grep -q 'step2 rc=0' "$out"
check "srun --mpi=pmi2 -n 2 MPI hello (PMI2 + MPICH, allreduce)" $?
b0=$(sed -n 's/^bound 0 //p' "$out")
b1=$(sed -n 's/^bound 1 //p' "$out")
grep -q 'stepb rc=0' "$out" && [[ $b0 =~ ^[0-9]+$ ]] && [[ $b1 =~ ^[0-9]+$ ]] && [ "$b0" != "$b1" ]
check "srun --cpu-bind=cores --cpus-per-task=1: each task on its own core ($b0, $b1)" $?
grep -q 'step3 rc=0' "$out" && grep -qE '^gpipe +2 +4 ' "$out"
check "srun --mpi=pmi2 -n 2 bubblebench run (no --out)" $?

job_ok "$aid" "sweep-array tasks"
job_ok "$merge" "merge_index job"
job_ok "$node" "sweep-node job"

# Array task -> its own job id (for slurm_job_id in each task file).
task_jobs=$(states "$aid" | sed 's/:.*//' | tr '\n' ' ')
$PY - "$RES" "$aid" "$node" "$task_jobs" <<'PY'
import os, sys
import h5py

res, aid, node, task_jobs = sys.argv[1:5]
task_job = dict(kv.split("=") for kv in task_jobs.split())  # "0" -> job id
fails = 0

def ok(cond, what):
    global fails
    print(("ok: " if cond else "FAIL: ") + what)
    fails += 0 if cond else 1

def s(v):
    if isinstance(v, bytes):
        v = v.decode()
    if hasattr(v, "item"):
        v = v.item()
    return str(v)

def check_file(path, want_schedules, root):
    if not os.path.exists(path):
        ok(False, f"{path} exists (needs `bubblebench run --out`)")
        return
    with h5py.File(path, "r") as f:
        for k, v in root.items():
            ok(k in f.attrs and s(f.attrs[k]) == v,
               f"{os.path.basename(path)}: root attr {k} = {v} (got {s(f.attrs[k]) if k in f.attrs else 'none'})")
        runs = f.get("runs")
        ok(runs is not None, f"{os.path.basename(path)}: /runs")
        if runs is None:
            return
        got = sorted(s(runs[k].attrs.get("schedule", "?")) for k in runs if not k.startswith("."))
        ok(got == sorted(want_schedules), f"{os.path.basename(path)}: runs {got} == {sorted(want_schedules)}")
        for k in runs:
            g = runs[k]
            ok(s(g.attrs.get("status", "")) == "complete", f"{os.path.basename(path)}:{k} status complete")
            ok(s(g.attrs.get("P", "")) == "2", f"{os.path.basename(path)}:{k} P = 2")
            ok("step_time_s" in g and g["step_time_s"].shape == (2,), f"{os.path.basename(path)}:{k} step_time_s[2]")

check_file(f"{res}/{node}/sweep.h5", ["1f1b", "zb-h1"], {"slurm_job_id": node})
want = {"0": ["1f1b", "gpipe"], "1": ["zb-h1", "interleaved"]}
for t, scheds in want.items():
    check_file(f"{res}/{aid}/task-{t}.h5", scheds,
               {"slurm_array_job_id": aid, "slurm_array_task_id": t, "slurm_job_id": task_job.get(t, "?")})
idx = f"{res}/{aid}/index.h5"
if os.path.exists(idx):
    with h5py.File(idx, "r") as f:
        names = sorted(f["runs"])
        ok(len(names) == 4, f"index.h5: 4 runs ({names})")
        ok(all(s(f["runs"][n].attrs["status"]) == "complete" for n in names), "index.h5: runs readable through the links")
        ok(s(f.attrs.get("slurm_array_job_id", "")) == aid, "index.h5: slurm_array_job_id at the root")
        ok(sorted(f["tasks"]) == ["task-0", "task-1"], "index.h5: /tasks/task-0, task-1")
else:
    ok(False, f"{idx} exists (merge_index job)")
sys.exit(1 if fails else 0)
PY
check "HDF5 results of the jobs (h5py)" $?

# A job that fails before writing, a watchdog abort, a comma value through --export.
st=$(states "$bad")
log=$tmp/bb-bad-$bad.out
[[ $st == *:FAILED:2:0 ]] && tail -n 1 "$log" | grep -qF "exit 2; no results: $RES/$bad/sweep.h5 was not created" &&
  [ ! -e "$RES/$bad/sweep.h5" ]
check "bad argument: exit 2, the log says the results file was not created ($st)" $?
st=$(states "$hang")
log=$tmp/bb-hang-$hang.out
[[ $st == *:FAILED:137:0 ]] && grep -Eq '^rank [01]: waiting [^:]+$' "$log" &&
  tail -n 1 "$log" | grep -q "exit 137 = signal 9: SLURM killed the step.*watchdog exits 3"
check "watchdog under srun: exit 137, the log explains it and shows the watchdog's waiting line ($st)" $?
st=$(states "$busy")
log=$tmp/bb-busy-$busy.out
run_s=$(scontrol show job "$busy" 2>/dev/null | grep -oE 'RunTime=[0-9:-]+' | cut -d= -f2)
[[ $st == *:FAILED:69:0 ]] && [ "$(grep -c '^srun: error: Unable to create step for job .*: Requested nodes are busy' "$log")" = 1 ] &&
  [ "$(grep -c 'error:' "$log")" = 2 ] &&
  grep -q "bb-busy: error: the step ended with exit 1 and a test step on the job's nodes fails (srun: error: Unable to create step for job $busy: Requested nodes are busy); not requeued: requeued 0 time(s) for this already (REQUEUE_LIMIT=0)" "$log" &&
  [[ $run_s =~ ^00:00:[0-3][0-9]$ ]]
rc=$?  # before the $(...) in the name overwrites it
check "a step that cannot be created: srun gives up after STEP_WAIT=5 s, the probe too, one error line, exit 69, RunTime $run_s < 40 s ($st)" $rc
[ $rc = 0 ] || cat "$log"
grep -qE -- "srun --mpi=pmi2 .* -M 4,8 " "$tmp/bb-comma-$comma.out"
check "sbatch --export=ALL,M_LIST='\"4,8\"': the job gets -M 4,8" $?

# A requeued array task: the same job, so RESUME=auto resumes its file (every run skipped),
# and its log grows (--open-mode=append). SLURM holds a requeued job ~2 min: start it now.
t0_log=$(grep -c "array $aid task 0:" "$tmp/bb-array-${aid}_0.out")
params_before=$(stat -c %Y.%i "$RES/$aid/params.txt" 2>/dev/null)
scontrol requeue "${aid}_0" && scontrol update JobId="${aid}_0" StartTime=now
check "scontrol requeue ${aid}_0, StartTime=now" $?
deadline=$(($(date +%s) + 60))
until [ "$(states "${aid}_0" | grep -c ':COMPLETED:0:0')" = 1 ] &&
  [ "$(grep -c "array $aid task 0:" "$tmp/bb-array-${aid}_0.out")" = 2 ]; do
  [ "$(date +%s)" -lt "$deadline" ] || break
  sleep 1
done
log=$tmp/bb-array-${aid}_0.out
[ "$t0_log" = 1 ] && [ "$(grep -c "array $aid task 0:" "$log")" = 2 ] &&
  grep -q "requeued: resuming $RES/$aid/task-0.h5" "$log" &&
  [ "$(grep -c "skipped (complete in $RES/$aid/task-0.h5)" "$log")" = 2 ] &&
  [ "$(stat -c %Y.%i "$RES/$aid/params.txt")" = "$params_before" ]
rc=$?  # before the $(...) in the name overwrites it
check "requeued array task: resumed, runs skipped, log appended, params.txt kept ($(states "${aid}_0"))" $rc

# Near the time limit (#SBATCH --signal=USR1@120; here sent by hand): bubblebench stops
# between runs (exit 5), the job requeues itself, resumes its file and runs the rest.
usr1=$(env BB="$BB" RESULTS_DIR="$RES" SCHEDULES=1f1b,gpipe,zb-h1 M_LIST=4,8 V_LIST=1 \
  BACKEND=cpu COMPUTE=synthetic T_F=20ms T_B=20ms WARMUP=0 ITERS=5 EXTRA_ARGS=--no-calibrate \
  sbatch --parsable --job-name=bb-usr1 --ntasks=2 --time=00:05:00 --output="$tmp/%x-%j.out" \
  jobs/sweep-node.sbatch)
check "sbatch jobs/sweep-node.sbatch for SIGUSR1 ($usr1)" $?
log=$tmp/bb-usr1-$usr1.out
deadline=$(($(date +%s) + 60))
until grep -qE '^\[1/6\] .*elapsed' "$log" 2>/dev/null || [ "$(date +%s)" -ge "$deadline" ]; do sleep 0.2; done
scancel --signal=USR1 "$usr1"
check "scancel --signal=USR1 after the first run" $?
until grep -q "requeueing job $usr1" "$log" 2>/dev/null || [ "$(date +%s)" -ge "$deadline" ]; do sleep 0.5; done
# Started again while the old step 9.0 is still being torn down, srun's pmi2 fails ("failed
# to send temp kvs"): wait until the job is pending again, then a little more.
until squeue -h -j "$usr1" -o %T 2>/dev/null | grep -q PENDING || [ "$(date +%s)" -ge "$deadline" ]; do sleep 0.5; done
sleep 3
scontrol update JobId="$usr1" StartTime=now 2>/dev/null  # SLURM holds a requeued job ~2 min
until [ "$(states "$usr1" | grep -c ':COMPLETED:0:0')" = 1 ] || [ "$(date +%s)" -ge "$deadline" ]; do sleep 1; done
grep -q "note: SIGUSR1: stopped before run [2-6] of 6 (exit 5)" "$log" &&
  grep -q "requeueing job $usr1 to resume $RES/$usr1/sweep.h5" "$log" &&
  grep -q "requeued: resuming $RES/$usr1/sweep.h5" "$log" &&
  [ "$(grep -c "skipped (complete in $RES/$usr1/sweep.h5)" "$log")" -ge 1 ] &&
  [ "$("$PY" "$ROOT/tests/mpi/check_results.py" keys "$RES/$usr1/sweep.h5" | wc -l)" = 6 ]
rc=$?  # before the $(...) in the name overwrites it
check "SIGUSR1: stopped between runs, requeued, resumed, 6 complete runs ($(states "$usr1"))" $rc

# --- 4. merge_index.py on hand-made task files ------------------------------------------------
mkdir -p "$tmp/fake/42"
$PY - "$tmp/fake/42" <<'PY'
import sys
import h5py, numpy as np
d = sys.argv[1]
for t in (0, 1, 2):
    with h5py.File(f"{d}/task-{t}.h5", "w") as f:
        f.attrs.update({"schema_version": 1, "tool_version": "x", "slurm_array_job_id": "42",
                        "slurm_array_task_id": str(t), "slurm_job_id": str(43 + t)})
        for k in ("a", "b"):
            g = f.create_group(f"runs/{k}")
            g.attrs["status"] = "complete"
            g["step_time_s"] = np.full(3, t, dtype=float)
        f.create_group("runs/.partial-c").attrs["status"] = "writing"  # a killed task
open(f"{d}/task-3.h5", "w").write("not hdf5")  # a corrupt file: reported, not fatal
PY
$PY "$ROOT/jobs/merge_index.py" -q "$tmp/fake/42" 2>"$tmp/merge-fake.err"
rc=$?
[ $rc = 1 ] && grep -q 'task-3.h5: unreadable' "$tmp/merge-fake.err"
check "merge_index: corrupt task file reported, exit 1 (rc $rc)" $?
rm "$tmp/fake/42/task-3.h5"
$PY "$ROOT/jobs/merge_index.py" -q "$tmp/fake/42" --expect 3 &&
  $PY "$ROOT/jobs/merge_index.py" -q "$tmp/fake/42" --copy --out "$tmp/fake/merged.h5"
check "merge_index: links and --copy, exit 0" $?
$PY "$ROOT/jobs/merge_index.py" -q "$tmp/fake/42" --expect 4 --out "$tmp/fake/x.h5" 2>/dev/null
[ $? = 1 ]
check "merge_index: --expect 4 with 3 files exits 1" $?
mv "$tmp/fake/42" "$tmp/fake/moved"
(cd / && $PY - "$tmp/fake" <<'PY'
import sys
import h5py
d = sys.argv[1]
for path, kind in ((f"{d}/moved/index.h5", "external-links"), (f"{d}/merged.h5", "copy")):
    with h5py.File(path, "r") as f:
        assert f.attrs["index_kind"] == kind, dict(f.attrs)
        assert sorted(f["runs"]) == [f"task-{t}.{k}" for t in range(3) for k in "ab"], list(f["runs"])
        assert f["runs/task-2.b/step_time_s"][0] == 2.0
        assert f.attrs["slurm_array_job_id"] == "42" and "slurm_job_id" not in f.attrs
        assert f["tasks/task-1"].attrs["slurm_job_id"] == "44"
        assert len(f["run_sources"]) == 6
PY
)
check "merge_index: index readable after moving the folder; --copy self-contained" $?

# --- 5. teardown ---------------------------------------------------------------------------
[ $fails -ne 0 ] && dump  # while the daemons still answer
# A daemon is identified by PID and start time (a busy machine reuses PIDs within minutes).
started() { awk '{sub(/^.*\) /, ""); print $20}' "/proc/$1/stat" 2>/dev/null; }  # field 22
pids=$(cat "$STATE"/pids/*.pid 2>/dev/null | tr '\n' ' ')
declare -A t_start
for p in $pids; do t_start[$p]=$(started "$p"); done
"$SL" down "$STATE"
check "tools/slurm-local.sh down" $?
"$SL" down "$STATE"
check "down again: no-op" $?
left=""
for p in $pids; do
  # A daemon being reaped right now (a zombie a moment ago, gone the next) is gone: its state
  # must read as something other than Z, and its start time must still be the daemon's.
  st=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)
  if [ -n "$st" ] && [ "$st" != Z ] && [ "$(started "$p")" = "${t_start[$p]}" ]; then
    left="$left $p($(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | head -c 80))"
  fi
done
"$SL" status "$STATE" >/dev/null 2>&1
rc=$?
[ $rc = 3 ] && [ -z "$left" ] && [ -n "$pids" ]
check "daemons gone after down (pids $pids; status exit $rc; still running:${left:- none})" $?

echo "slurm test: $(($(date +%s) - t0)) s"
if [ $fails -ne 0 ]; then
  echo "FAILED: $fails of $((pass + fails)) checks"
  exit 1
fi
echo "all $pass checks passed"
