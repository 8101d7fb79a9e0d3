#!/usr/bin/env bash
# SLURM nodes on one machine (issues 23, 33): three slurmd, each in its own network namespace with
# its own address (10.79.0.1-3 on a bridge whose root-namespace end, 10.79.0.254, carries
# slurmctld) and its own UTS namespace (host names bbn1, bbn2, bbn3), all made by this test and
# removed at its end. jobs/multi-node.sbatch runs P=2, one rank per node; MPICH talks across the
# namespaces over TCP (UCX_TLS=tcp,self), so the cross-host paths run.
#   A. a job across two nodes: two hosts in the ranks table, per-rank clocks.
#   B. a lost node: node 2's slurmd and rank killed mid-sweep. Whatever comes first (the job's
#      step failing and the job requeueing itself, or slurmctld marking bbn2 DOWN and requeueing
#      it, or a requeued start on bbn2 before it is DOWN), the job must end requeued and
#      complete on healthy nodes, with the runs written before the kill kept and skipped.
#   C. a requeued start forced onto a dead node: SlurmdTimeout=0 (slurmctld stops pinging), a
#      requeued job, node 2 killed while it waits, bbn3 drained for that start: the start lands
#      on bbn[1-2]. Its step must fail within its bound (STEP_WAIT and srun's launch timeout),
#      the job requeue itself, and its next start go to bbn1 and bbn3 and complete.
# Timing is set, not hoped for: SlurmdTimeout=10 s (a lost node is marked not responding in
# 12-16 s and DOWN in 24-29 s here), cred_expire=20 (a requeued job is held 21 s once it has
# finished completing, which on a lost node is when that node is DOWN), MessageTimeout=10 s;
# every wait is for a state, with a bound. A failed check prints the job's log, its slurmctld
# lines, the logs of the node's slurmd and the stacks of ranks still running.
#   usage: two_node.sh [BUBBLEBENCH]    (make slurm-two-node; root, slurm-wlm, munge, iproute2)
#   KEEP=1 keeps the state folder (logs, results); exit 77: no root / no namespaces here
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BB=$(readlink -f "${1:-$ROOT/build/bubblebench}")
PY=${PY:-/usr/bin/python3}
# shellcheck source-path=SCRIPTDIR source=../check_lib.sh
. "$HERE/../check_lib.sh"
[ "$(id -u)" = 0 ] || { echo "two_node: needs root (network namespaces)"; exit 77; }
# One run at a time on a machine (ctest slurm.two_node and make slurm-two-node by several users):
# the namespaces, bridge and ports are fixed. flock holds the lock (not the daemons started here).
LOCK=/tmp/bb-two-node.lock
if [ "${BB_TWO_NODE_LOCKED:-}" != "$LOCK" ]; then
  flock -n "$LOCK" true || echo "two_node: waiting up to 900 s for $LOCK (another two_node run)"
  BB_TWO_NODE_LOCKED=$LOCK exec flock -w 900 -E 1 "$LOCK" bash "$0" "$@"
fi
for b in ip unshare nsenter munged slurmctld slurmd sbatch; do
  command -v "$b" >/dev/null || PATH=$PATH:/usr/sbin:/sbin
  command -v "$b" >/dev/null || { echo "two_node: no $b (apt-get install -y slurm-wlm munge iproute2)"; exit 77; }
done
[ -x "$BB" ] || { echo "two_node: no bubblebench at $BB (make build)"; exit 1; }
# Under the lock, namespaces left by a run that was killed (SIGKILL skips the cleanup) are empty
# and are made afresh below; a process in one, or slurmctld's port in use, is a run still up.
if [ -n "$(for n in 1 2 3; do ip netns pids "bb2n$n" 2>/dev/null; done)" ] ||
  (exec 3<>/dev/tcp/127.0.0.1/6917) 2>/dev/null; then
  echo "two_node: another two_node run is up (processes in namespace bb2n1..3, or port 6917 in use)"
  exit 1
fi
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM_|SBATCH_|SRUN_|SALLOC_)')
T0=$(date +%s)
NET=10.79.0
BR=bb2br0
NODES=(1 2 3)
SLURMD_TIMEOUT=10
CRED_EXPIRE=20               # a requeued job is held cred_expire + 1 s
MSG_TIMEOUT=10
STEP_WAIT=15                 # the jobs' bound on step creation (srun --immediate)
S=$tmp/slurm
mkdir -p "$S"/{state,run,log,munge,results}
pids=()
declare -A slurmd_pid
cleanup_nodes() {
  scancel --user=root >/dev/null 2>&1
  for n in "${NODES[@]}"; do  # slurmstepd and ranks too: whatever runs in a node's namespace
    for p in $(ip netns pids "bb2n$n" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  done
  {
    for p in "${pids[@]}"; do kill -TERM "$p"; done
    sleep 1
    for p in "${pids[@]}"; do kill -KILL "$p"; done
    wait
  } 2>/dev/null
  for n in "${NODES[@]}"; do ip netns del "bb2n$n" 2>/dev/null; done
  ip link del "$BR" 2>/dev/null
  if [ "${KEEP:-0}" = 1 ]; then echo "two_node: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup_nodes EXIT
trap 'exit 130' INT TERM
say() { echo "two_node: [+$(($(date +%s) - T0)) s] $*"; }

# What to read when a check fails: the job (state, log), what slurmctld logged about it and its
# nodes, each named node's slurmd log, and which daemons are still alive.
dump() {  # job id or "", node numbers...
  local id=$1 n f pat="Node"
  shift
  echo "----- sinfo -N"
  sinfo -N -o '%N %T %E' 2>&1
  if [ -n "$id" ]; then
    echo "----- scontrol show job $id"
    scontrol show job "$id" 2>&1 | grep -E 'JobState|Restarts|NodeList|StartTime|ExitCode'
    echo "----- $S/results/$id.out (last 40 lines)"
    grep -v '^#' "$S/results/$id.out" 2>/dev/null | tail -n 40
    pat="JobId=${id}[^0-9]|job ${id}[^0-9]"
  fi
  for n in "$@"; do pat="$pat|bbn$n"; done
  echo "----- $S/log/slurmctld.log: lines on ${id:+job $id and }nodes $* (last 40)"
  grep -E "$pat" "$S/log/slurmctld.log" | tail -n 40
  for n in "$@"; do
    for f in "$S/log/slurmd-bbn$n.log" "$S/log/slurmd$n.out"; do
      echo "----- $f (last 20 lines)"
      tail -n 20 "$f" 2>/dev/null
    done
  done
  echo "----- daemons alive: $(for p in "${pids[@]}"; do [ -d "/proc/$p" ] && printf '%s ' "$(tr '\0' ' ' </proc/"$p"/cmdline | cut -c1-40)"; done)"
  # ranks of this test still running (a step that does not end): where each one waits
  local in_finalize=0
  for p in $(pgrep -f -- "--out $S/results/" 2>/dev/null); do
    [ "$(readlink -f "/proc/$p/exe" 2>/dev/null)" = "$BB" ] || continue
    echo "----- rank pid $p ($(tr '\0' ' ' <"/proc/$p/environ" 2>/dev/null | grep -oE 'SLURMD_NODENAME=[^ ]+|SLURM_PROCID=[0-9]+' | tr '\n' ' ')): threads"
    command -v gdb >/dev/null || continue
    timeout 60 gdb -p "$p" -batch -ex 'thread apply all bt 25' 2>/dev/null | grep -E '^(#|Thread)' |
      head -n 80 >"$tmp/stack"
    cat "$tmp/stack"
    grep -q PMPI_Finalize "$tmp/stack" && in_finalize=$((in_finalize + 1))
  done
  [ "$in_finalize" = 0 ] ||
    echo "two_node: $in_finalize rank(s) stuck in MPI_Finalize (one in a PMI barrier, one in UCX progress): MPICH 4.0's UCX finalize deadlock across hosts (jobs/README.md, Troubleshooting), not the job script's"
}
# check, printing "ok: NAME" on a pass and on a failure the dump for the job and nodes given.
# The status comes first: it is expanded before the $(...) in the name can overwrite $?.
checkd() {  # status, name, job id, node numbers...
  check "$2" "$1"
  if [ "$1" = 0 ]; then echo "ok: $2"; else shift 2; dump "$@"; fi
}

# --- the network: a bridge in this namespace, a veth into each node's namespace ------------
ip link del "$BR" 2>/dev/null
if ! { ip link add "$BR" type bridge && ip addr add "$NET.254/24" dev "$BR" && ip link set "$BR" up; }; then
  echo "two_node: cannot make a bridge (no CAP_NET_ADMIN?)"
  exit 77
fi
for n in "${NODES[@]}"; do
  ip netns del "bb2n$n" 2>/dev/null
  if ! { ip netns add "bb2n$n" &&
    ip link add "bb2v$n" type veth peer name eth0 netns "bb2n$n" &&
    ip link set "bb2v$n" master "$BR" up &&
    ip netns exec "bb2n$n" ip addr add "$NET.$n/24" dev eth0 &&
    ip netns exec "bb2n$n" ip link set eth0 up &&
    ip netns exec "bb2n$n" ip link set lo up; }; then
    echo "two_node: cannot make network namespace bb2n$n"
    exit 77
  fi
done
for n in "${NODES[@]}"; do  # ARP warm-up
  ip netns exec "bb2n$n" bash -c "exec 3<>/dev/tcp/$NET.254/9 " 2>/dev/null
done
checkd 0 "network namespaces bb2n1..3 with their own addresses"

# --- munge (one key, one socket: the namespaces share the file system) ------------------------
dd if=/dev/urandom of="$S/munge/munge.key" bs=1024 count=1 status=none
chmod 0400 "$S/munge/munge.key"
chmod 0711 "$S/munge"
SOCK=$S/munge/munge.socket
munged -F --force --key-file="$S/munge/munge.key" --socket="$SOCK" \
  --pid-file="$S/munge/munged.pid" --log-file="$S/log/munged.log" \
  --seed-file="$S/munge/munged.seed" </dev/null >>"$S/log/munged.out" 2>&1 &
pids+=($!)

cpus=$(nproc)
mem_mb=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.4 }' /proc/meminfo)
export SLURM_CONF=$S/slurm.conf
# What every cluster of the project shares (munge on $SOCK, the state under $S, no accounting,
# cons_tres, pmi2, ...) from tools/slurm-local.sh with this test's cred_expire, then this
# cluster's own: no task affinity inside the namespaces, the timeouts above, requeue.
write_conf() {  # SlurmdTimeout
  {
    BB_SLURM_CRED_EXPIRE=$CRED_EXPIRE bash "$ROOT/tools/slurm-local.sh" common-conf "$S" || return 1
    cat <<EOF
ClusterName=bb2node
SlurmctldHost=$(hostname -s)($NET.254)
SlurmctldPort=6917
SlurmdPort=6918
SlurmdSpoolDir=$S/spool-%n
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd-%n.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd-%n.log
TaskPlugin=task/none
SlurmdTimeout=$1
MessageTimeout=$MSG_TIMEOUT
KillWait=3
JobRequeue=1
EOF
    for n in "${NODES[@]}"; do
      echo "NodeName=bbn$n NodeAddr=$NET.$n NodeHostname=bbn$n CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN"
    done
    echo "PartitionName=two Nodes=bbn[1-3] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
  } >"$SLURM_CONF.tmp" && mv -f "$SLURM_CONF.tmp" "$SLURM_CONF"
}
write_conf "$SLURMD_TIMEOUT" || exit 1
for ((i = 0; i < 100; i++)); do
  munge -S "$SOCK" -n </dev/null 2>/dev/null | unmunge -S "$SOCK" >/dev/null 2>&1 && break
  sleep 0.1
done
slurmctld -D -f "$SLURM_CONF" </dev/null >>"$S/log/slurmctld.out" 2>&1 &
pids+=($!)
for ((i = 0; i < 150; i++)); do scontrol ping 2>/dev/null | grep -q 'is UP' && break; sleep 0.2; done

start_node() {  # n: slurmd -N bbnN in namespace bb2nN with host name bbnN
  # nsenter, not `ip netns exec`: that one mounts a new /sys without the cgroup file systems,
  # and slurmd then refuses to start.
  mkdir -p "$S/spool-bbn$1"
  # shellcheck disable=SC2016  # expanded by the inner bash
  nsenter --net="/run/netns/bb2n$1" unshare --uts -- bash -c \
    'hostname "$1"; shift; exec "$@"' _ "bbn$1" \
    slurmd -D -N "bbn$1" -f "$SLURM_CONF" </dev/null >>"$S/log/slurmd$1.out" 2>&1 &
  pids+=($!)
  slurmd_pid[$1]=$!
}
kill_node() {  # n: its slurmd, then every process in its network namespace (slurmstepd, ranks)
  { kill -KILL "${slurmd_pid[$1]}" && wait "${slurmd_pid[$1]}"; } 2>/dev/null
  for p in $(ip netns pids "bb2n$1"); do kill -KILL "$p" 2>/dev/null; done
}
node_state() { sinfo -h -N -n "bbn$1" -o %T 2>/dev/null | head -n 1; }
responding() { [[ $(node_state "$1") != *'*' ]]; }  # slurmctld marks a node not responding with '*'
not_responding() { ! responding "$1"; }
all_idle() { [ "$(sinfo -h -N -o '%N %T' 2>/dev/null | grep -c ' idle$')" = "${#NODES[@]}" ]; }
wait_for() {  # seconds, command...: poll every 0.2 s until it succeeds; 1 if it never does
  local i
  for ((i = 0; i < $1 * 5; i++)); do "${@:2}" && return 0; sleep 0.2; done
  return 1
}
for n in "${NODES[@]}"; do start_node "$n"; done
wait_for 60 all_idle
checkd $? "three nodes idle ($(sinfo -h -N -o '%N:%T' | tr '\n' ' '))" "" "${NODES[@]}"
[ "$fails" = 0 ] || { finish two_node; exit; }
say "cluster up: SlurmdTimeout=$SLURMD_TIMEOUT s, requeue hold $((CRED_EXPIRE + 1)) s, MessageTimeout=$MSG_TIMEOUT s, STEP_WAIT=$STEP_WAIT s"

# --- jobs ------------------------------------------------------------------------------------
cd "$ROOT" || exit 1
export UCX_TLS=tcp,self UCX_NET_DEVICES=eth0
# MPICH 4.0's finalize deadlock across hosts (jobs/README.md, Troubleshooting) costs a step 20 s
# here instead of bubblebench's default 60 s; counted at the end.
export BB_FINALIZE_TIMEOUT=20
submit() {  # OUT, EXTRA_ARGS, extra sbatch args... -> job id
  local out=$1 extra=$2
  shift 2
  EXTRA_ARGS="$extra" BB="$BB" OUT="$out" BACKEND=cpu COMPUTE=synthetic T_F=1ms T_B=1ms SCHEDULES=1f1b,gpipe \
    M_LIST=4,8 V_LIST=1 CPU_BIND=none TIMEOUT=30 TOPOLOGY=0 STEP_WAIT=$STEP_WAIT \
    sbatch --parsable --nodes=2 --ntasks-per-node=1 --exclusive=user -o "$S/results/%j.out" \
    "$@" jobs/multi-node.sbatch
}
job() { scontrol show job -o "$1" 2>/dev/null | grep -oE " $2=[^ ]*" | cut -d= -f2; }  # id, field
state_is() { [ "$(job "$1" JobState)" = "$2" ]; }                                        # id, state
finished() {
  case "$(job "$1" JobState)" in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE) return 0 ;; esac
  return 1
}
# The last start of a job: its environment (the script's "job N on NODES" line, from
# SLURM_JOB_NODELIST) and slurmctld's view ("start K of job N: slurmctld agrees, ... NODES").
last_env() { grep -E "bb-multinode: job $1 on " "$S/results/$1.out" | tail -n 1 | sed 's/.* on \([^ ]*\) .*/\1/'; }
last_ctld() { grep -E "start [0-9]+ of job $1: slurmctld agrees" "$S/results/$1.out" | tail -n 1 | sed 's/.* //'; }
starts_on() {  # job id, nodes: its last start's environment and slurmctld both name NODES
  [ "$(last_env "$1")" = "$2" ] && [ "$(last_ctld "$1")" = "$2" ]
}
runs() { "$PY" -c 'import sys, h5py; print("\n".join(sorted(h5py.File(sys.argv[1], "r")["runs"])))' "$1" 2>/dev/null; }
has_runs() { [ "$(runs "$1" | grep -c .)" -ge 1 ]; }
# every run of FILE complete, and the runs listed in BEFORE among them
runs_kept() {  # file, before -> one line
  "$PY" - "$1" "$2" <<'PY'
import sys, h5py
before = open(sys.argv[2]).read().split()
with h5py.File(sys.argv[1], "r") as f:
    runs = sorted(f["runs"])
    assert len(runs) == 4, runs
    assert all(f["runs"][k].attrs["status"] == "complete" for k in runs), "a run not complete"
    assert all(k in runs for k in before), "a run written before the kill is gone"
    print(f"4 runs, the {len(before)} written before kept")
PY
}

# --- A. a job across two nodes -----------------------------------------------------------------
t=$(date +%s)
id=$(submit "$S/results/mn.h5" "--iters 5 --warmup 1")
wait_for 180 finished "$id"
st=$(job "$id" JobState)
[ "$st" = COMPLETED ]
checkd $? "A. multi-node job $id: $st in $(($(date +%s) - t)) s" "$id" 1 2
"$PY" - "$S/results/mn.h5" >"$tmp/hosts.txt" 2>&1 <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    runs = f["runs"]
    assert len(runs) == 4, f"{len(runs)} runs"
    for key in runs:
        g = runs[key]
        hosts = [h.decode() if isinstance(h, bytes) else h for h in g["ranks"]["host"]]
        assert hosts == ["bbn1", "bbn2"], hosts
        assert g.attrs["clock"] == "per-rank", g.attrs["clock"]
    print("hosts bbn1 bbn2, per-rank clocks, 4 runs")
PY
checkd $? "A. the results: two hosts and per-rank clocks ($(tail -n 1 "$tmp/hosts.txt"))"

# --- B. a lost node mid-sweep ------------------------------------------------------------------
t=$(date +%s)
id=$(submit "$S/results/lost.h5" "--iters 400 --warmup 1" --requeue)
wait_for 120 has_runs "$S/results/lost.h5"
runs "$S/results/lost.h5" >"$tmp/before-B.txt"
kept=$(grep -c . "$tmp/before-B.txt")
where=$(job "$id" NodeList)
kill_node 2
t_kill=$(date +%s)
say "B. job $id on $where: node 2 killed after $kept run(s), $((t_kill - t)) s after submission"
[ "$kept" -ge 1 ] && [ "$kept" -lt 4 ] && [ "$where" = "bbn[1-2]" ]
checkd $? "B. the kill came mid-sweep ($kept of 4 runs) on a job on bbn[1-2] ($where)" "$id" 2
# Whatever order SLURM and the job take, the end is the same: COMPLETED after a requeue.
# Meanwhile: when the job is first requeued, and when slurmctld first marks bbn2 not responding.
t_requeue="" t_noresp=""
for ((i = 0; i < 300 * 5; i++)); do
  st=$(job "$id" JobState)
  [ -z "$t_requeue" ] && [ "$(job "$id" Restarts)" -ge 1 ] 2>/dev/null && t_requeue=$(($(date +%s) - t_kill))
  [ -z "$t_noresp" ] && ! responding 2 && t_noresp=$(($(date +%s) - t_kill))
  finished "$id" && break
  sleep 0.2
done
st=$(job "$id" JobState)
restarts=$(job "$id" Restarts)
out=$S/results/$id.out
by_ctld=$(grep -c "requeue job JobId=$id due to failure of node" "$S/log/slurmctld.log")
by_job=$(grep -c "requeueing job $id (node requeue" "$out")
[ "$st" = COMPLETED ] && [ "${restarts:-0}" -ge 1 ]
checkd $? "B. lost node: job $id requeued ${t_requeue:-never} s after the kill (by slurmctld: $by_ctld, by the job: $by_job; bbn2 not responding after ${t_noresp:-never} s), then $st, $((${restarts:-0} + 1)) starts, $(($(date +%s) - t_kill)) s after the kill" "$id" 2
first_env=$(grep -m 1 -E "bb-multinode: job $id on " "$out" | sed 's/.* on \([^ ]*\) .*/\1/')
[ "$first_env" = "bbn[1-2]" ] && starts_on "$id" "bbn[1,3]"
checkd $? "B. the last start went to healthy nodes, its environment its own (first start: $first_env; last: environment $(last_env "$id"), slurmctld $(last_ctld "$id"))" "$id" 2
runs_kept "$S/results/lost.h5" "$tmp/before-B.txt" >"$tmp/after.txt" 2>&1
checkd $? "B. resumed without loss ($(tail -n 1 "$tmp/after.txt"))" "$id"
[ "$(grep -c "skipped (complete in $S/results/lost.h5)" "$out")" -ge "$kept" ] &&
  grep -q "requeued: resuming $S/results/lost.h5" "$out"
checkd $? "B. the requeued job skipped the $kept run(s) it had" "$id"
grep -E "exit [0-9]+; (results|no results)|requeueing job $id|temporarily disabled|Unable to create step|Node failure" "$out" |
  sed "s|^|B. job log: |"
# node 2 back for C: slurmd started, the node resumed (it is DOWN), all three idle
start_node 2
wait_for 30 responding 2
[[ $(node_state 2) == down* ]] && scontrol update NodeName=bbn2 State=RESUME  # unless ReturnToService=2 did
wait_for 60 all_idle
checkd $? "B. node 2 back: three nodes idle ($(sinfo -h -N -o '%N:%T' | tr '\n' ' '))" "" 2

# --- C. a requeued start forced onto a dead node -------------------------------------------------
# SlurmdTimeout=0: slurmctld no longer pings nodes, so it cannot learn that node 2 is gone before
# the job's requeued start lands there.
write_conf 0 && scontrol reconfigure
slurmd_timeout_is() { scontrol show config | grep -qE "^SlurmdTimeout += $1 sec"; }
wait_for 30 slurmd_timeout_is 0
checkd $? "C. scontrol reconfigure: SlurmdTimeout=0"
id=$(submit "$S/results/forced.h5" "--iters 400 --warmup 1" --requeue)
wait_for 120 has_runs "$S/results/forced.h5"
runs "$S/results/forced.h5" >"$tmp/before-C.txt"
kept=$(grep -c . "$tmp/before-C.txt")
scontrol requeue "$id"
wait_for 60 state_is "$id" PENDING
r=$?
wait_for 30 all_idle
checkd $((r + $?)) "C. job $id requeued by hand after $kept run(s): PENDING, all nodes idle" "$id" 1 2 3
kill_node 2
scontrol update NodeName=bbn3 State=DRAIN Reason="two_node: keep the forced start off bbn3" >/dev/null
sleep 1
[ "$(node_state 2)" = idle ]
checkd $? "C. node 2 killed while the job waits; slurmctld still says bbn2 $(node_state 2)" "$id" 2
scontrol update JobId="$id" StartTime=now
wait_for 60 state_is "$id" RUNNING
t_start=$(date +%s)
where=$(job "$id" NodeList)
scontrol update NodeName=bbn3 State=RESUME >/dev/null
[ "$where" = "bbn[1-2]" ]
checkd $? "C. the requeued start landed on the dead node: job $id RUNNING on $where" "$id" 1 2
# The bound: the step's creation (STEP_WAIT) and launch (MessageTimeout), then the probe's, and
# a margin for a loaded machine.
bound=$((2 * (STEP_WAIT + MSG_TIMEOUT) + 30))
not_running() { ! state_is "$1" RUNNING; }
wait_for "$bound" not_running "$id"
r=$?
took=$(($(date +%s) - t_start))
out=$S/results/$id.out
grep -q "requeueing job $id (node requeue 1 of" "$out"
checkd $((r + $?)) "C. on the dead node the step failed and the job requeued itself in $took s (bound $bound s; now $(job "$id" JobState))" "$id" 2
grep -E "exit [0-9]+; (results|no results)|requeueing job $id" "$out" | tail -n 2 | sed "s|^|C. job log: |"
# slurmctld learns it when its messages to bbn2 fail (each after MessageTimeout)
wait_for $((3 * MSG_TIMEOUT)) not_responding 2
checkd $? "C. slurmctld marked bbn2 not responding ($(node_state 2)): the next start does not go there" "$id" 2
# SlurmdTimeout back: slurmctld sets bbn2 DOWN, which ends the job's completion there; the job
# starts again after its requeue hold, on bbn1 and bbn3, and completes.
write_conf "$SLURMD_TIMEOUT" && scontrol reconfigure
wait_for 240 finished "$id"
st=$(job "$id" JobState)
[ "$st" = COMPLETED ] && starts_on "$id" "bbn[1,3]"
checkd $? "C. job $id $st $(($(date +%s) - t_start)) s after the forced start; its last start on healthy nodes (environment $(last_env "$id"), slurmctld $(last_ctld "$id"))" "$id" 2 3
runs_kept "$S/results/forced.h5" "$tmp/before-C.txt" >"$tmp/after.txt" 2>&1 &&
  [ "$(grep -c "skipped (complete in $S/results/forced.h5)" "$out")" -ge "$kept" ]
checkd $? "C. resumed without loss, the $kept run(s) before skipped ($(tail -n 1 "$tmp/after.txt"))" "$id"
grep -c "step creation temporarily disabled" "$out" >/dev/null &&
  say "C. note: srun waited for step creation in this job (bounded by --immediate=$STEP_WAIT)"

bounded=$(cat "$S"/results/*.out 2>/dev/null | grep -c "MPI_Finalize did not return")
fired_in=$(grep -c "MPI_Finalize did not return" "$S"/results/*.out 2>/dev/null | grep -v ':0$' |
  sed "s|^$S/results/\([0-9]*\)\.out:\(.*\)|job \1: \2|" | paste -sd, - | sed "s/,/, /g")
say "MPI_Finalize bound (BB_FINALIZE_TIMEOUT=$BB_FINALIZE_TIMEOUT s) fired in $bounded rank(s) of this test's jobs${fired_in:+ ($fired_in)}"
echo "two_node: $(($(date +%s) - T0)) s in all (load $(cut -d' ' -f1-3 /proc/loadavg))"
finish two_node
