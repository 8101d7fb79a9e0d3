#!/usr/bin/env bash
# Two SLURM nodes on one machine (issue 23): each slurmd in its own network namespace with its
# own address (10.79.0.1, 10.79.0.2 on a bridge whose root-namespace end, 10.79.0.254, carries
# slurmctld) and its own UTS namespace (host names bbn1, bbn2), all made by this test and
# removed at its end. jobs/multi-node.sbatch then runs P=2, one rank per node; MPICH talks
# across the namespaces over TCP (UCX_TLS=tcp,self), so the cross-host paths run: two hosts in
# the ranks table, per-rank clocks, local rank 0 on each node.
# Then a lost node: node 2's slurmd and rank are killed mid-sweep; the job must fail (not hang),
# and after the node is back `scontrol requeue` must resume the file without losing a run.
#   usage: two_node.sh [BUBBLEBENCH]          (make slurm-two-node; root, slurm-wlm, munge)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BB=$(readlink -f "${1:-$ROOT/build/bubblebench}")
PY=${PY:-/usr/bin/python3}
# shellcheck source-path=SCRIPTDIR source=../check_lib.sh
. "$HERE/../check_lib.sh"
[ "$(id -u)" = 0 ] || { echo "two_node: needs root (network namespaces)"; exit 77; }
for b in ip unshare munged slurmctld slurmd sbatch; do
  command -v "$b" >/dev/null || PATH=$PATH:/usr/sbin:/sbin
  command -v "$b" >/dev/null || { echo "two_node: no $b (apt-get install -y slurm-wlm munge iproute2)"; exit 77; }
done
if ip netns list | grep -q '^bb2n' || (exec 3<>/dev/tcp/127.0.0.1/6917) 2>/dev/null; then
  echo "two_node: another two_node run is up (namespace bb2n1/bb2n2 or port 6917 in use)"
  exit 1
fi
T0=$(date +%s)
NET=10.79.0
BR=bb2br0
S=$tmp/slurm
mkdir -p "$S"/{state,run,log,munge,results}
pids=()
cleanup_nodes() {
  scancel --user=root >/dev/null 2>&1
  for n in 1 2; do  # slurmstepd and ranks too: whatever runs in a node's namespace
    for p in $(ip netns pids "bb2n$n" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  done
  {
    for p in "${pids[@]}"; do kill -TERM "$p"; done
    sleep 1
    for p in "${pids[@]}"; do kill -KILL "$p"; done
    wait
  } 2>/dev/null
  for n in 1 2; do ip netns del "bb2n$n" 2>/dev/null; done
  ip link del "$BR" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup_nodes EXIT
logs() {
  local f
  for f in "$S"/log/*; do echo "----- $f"; tail -n 25 "$f"; done
}

# --- the network: a bridge in this namespace, a veth into each node's namespace ------------
ip link del "$BR" 2>/dev/null
ip link add "$BR" type bridge && ip addr add "$NET.254/24" dev "$BR" && ip link set "$BR" up ||
  { echo "two_node: cannot make a bridge"; exit 77; }
for n in 1 2; do
  ip netns del "bb2n$n" 2>/dev/null
  ip netns add "bb2n$n"
  ip link add "bb2v$n" type veth peer name eth0 netns "bb2n$n"
  ip link set "bb2v$n" master "$BR" up
  ip netns exec "bb2n$n" ip addr add "$NET.$n/24" dev eth0
  ip netns exec "bb2n$n" ip link set eth0 up
  ip netns exec "bb2n$n" ip link set lo up
done
ip netns exec bb2n1 bash -c "exec 3<>/dev/tcp/$NET.254/9 " 2>/dev/null  # ARP warm-up
check "network namespaces with their own addresses" 0

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
# cons_tres, pmi2, ...) from tools/slurm-local.sh, then this cluster's own: no task affinity
# inside the namespaces, a short SlurmdTimeout so that a lost node is noticed, requeue.
{
  bash "$ROOT/tools/slurm-local.sh" common-conf "$S" || exit 1
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
SlurmdTimeout=10
KillWait=3
JobRequeue=1
NodeName=bbn1 NodeAddr=$NET.1 NodeHostname=bbn1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
NodeName=bbn2 NodeAddr=$NET.2 NodeHostname=bbn2 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=two Nodes=bbn1,bbn2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
} >"$SLURM_CONF"
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
  nsenter --net="/run/netns/bb2n$1" unshare --uts -- bash -c \
    'hostname "$1"; shift; exec "$@"' _ "bbn$1" \
    slurmd -D -N "bbn$1" -f "$SLURM_CONF" </dev/null >>"$S/log/slurmd$1.out" 2>&1 &
  pids+=($!)
  eval "slurmd$1=$!"
}
mkdir -p "$S/spool-bbn1" "$S/spool-bbn2"
slurmd1="" slurmd2=""
start_node 1
start_node 2
idle() { [ "$(sinfo -h -N -o '%N %T' 2>/dev/null | grep -c ' idle')" = 2 ]; }
for ((i = 0; i < 200; i++)); do idle && break; sleep 0.2; done
idle
r=$?
check "two nodes idle (sinfo: $(sinfo -h -N -o '%N:%T' | tr '\n' ' '))" $r
[ $r = 0 ] || { logs; finish two_node; exit; }
echo "two_node: cluster up in $(($(date +%s) - T0)) s"

# --- a multi-node job across the namespaces ----------------------------------------------------
cd "$ROOT" || exit 1
export UCX_TLS=tcp,self UCX_NET_DEVICES=eth0
submit() {  # OUT, EXTRA_ARGS, extra sbatch args... -> job id
  local out=$1 extra=$2
  shift 2
  EXTRA_ARGS="$extra" BB="$BB" OUT="$out" BACKEND=cpu COMPUTE=synthetic T_F=1ms T_B=1ms SCHEDULES=1f1b,gpipe \
    M_LIST=4,8 V_LIST=1 CPU_BIND=none TIMEOUT=30 TOPOLOGY=0 \
    sbatch --parsable --nodes=2 --ntasks-per-node=1 --exclusive=user -o "$S/results/%j.out" \
    "$@" jobs/multi-node.sbatch
}
wait_job() {  # id, seconds -> the job's final state on stdout
  local i st
  for ((i = 0; i < $2 * 5; i++)); do
    st=$(scontrol show job "$1" 2>/dev/null | grep -oE 'JobState=[A-Z_]+' | cut -d= -f2)
    case "$st" in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE)
      echo "$st"; return 0 ;;
    esac
    sleep 0.2
  done
  echo "${st:-unknown}"
}
t=$(date +%s)
id=$(submit "$S/results/mn.h5" "--iters 5 --warmup 1")
st=$(wait_job "$id" 180)
[ "$st" = COMPLETED ]
r=$?
check "multi-node job $id: $st in $(($(date +%s) - t)) s" $r
[ $r = 0 ] || { tail -n 30 "$S/results/$id.out"; logs; }
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
check "the results: two hosts and per-rank clocks ($(tail -n 1 "$tmp/hosts.txt"))" $?

# --- a lost node: node 2's slurmd and rank killed mid-sweep, the job fails, a requeue resumes --
t=$(date +%s)
id=$(submit "$S/results/lost.h5" "--iters 400 --warmup 1" --requeue)
for ((i = 0; i < 600; i++)); do  # until the first run is written
  "$PY" -c 'import sys, h5py; sys.exit(0 if len(h5py.File(sys.argv[1], "r")["runs"]) >= 1 else 1)' \
    "$S/results/lost.h5" 2>/dev/null && break
  sleep 0.2
done
"$PY" -c 'import sys, h5py; print("\n".join(sorted(h5py.File(sys.argv[1], "r")["runs"])))' \
  "$S/results/lost.h5" >"$tmp/before.txt" 2>/dev/null
kept=$(wc -l <"$tmp/before.txt")
# node 2 goes: its slurmd, then every process in its network namespace (the rank, slurmstepd)
{ kill -KILL "$slurmd2" && wait "$slurmd2"; } 2>/dev/null
for p in $(ip netns pids bb2n2); do kill -KILL "$p" 2>/dev/null; done
# The job must end (not hang): failed, or requeued by SLURM itself (--requeue: "requeue job
# due to failure of node bbn2", back to PENDING with Restarts=1).
for ((i = 0; i < 600; i++)); do
  info=$(scontrol show job "$id" 2>/dev/null)
  st=$(grep -oE 'JobState=[A-Z_]+' <<<"$info" | cut -d= -f2)
  restarts=$(grep -oE 'Restarts=[0-9]+' <<<"$info" | cut -d= -f2)
  case "$st" in FAILED | NODE_FAIL | CANCELLED) break ;; esac
  [ "$st" = PENDING ] && [ "${restarts:-0}" -ge 1 ] && { st=REQUEUED; break; }
  sleep 0.2
done
case "$st" in FAILED | NODE_FAIL | CANCELLED | REQUEUED) r=0 ;; *) r=1 ;; esac
check "lost node: job $id ended $st in $(($(date +%s) - t)) s, $kept runs written before" $r
[ "$kept" -ge 1 ] && [ "$kept" -lt 4 ]
check "lost node: the kill came mid-sweep ($kept of 4 runs)" $?
start_node 2
scontrol update NodeName=bbn2 State=RESUME >/dev/null 2>&1
for ((i = 0; i < 200; i++)); do idle && break; sleep 0.2; done
[ "$st" = REQUEUED ] || scontrol requeue "$id" 2>&1 | head -n 2
scontrol update JobId="$id" StartTime=now 2>&1 | head -n 2  # no requeue delay
t=$(date +%s)
st=$(wait_job "$id" 300)
[ "$st" = COMPLETED ]
r=$?
check "requeue of job $id: $st in $(($(date +%s) - t)) s" $r
[ $r = 0 ] || { tail -n 30 "$S/results/$id.out"; logs; }
"$PY" - "$S/results/lost.h5" "$tmp/before.txt" >"$tmp/after.txt" 2>&1 <<'PY'
import sys, h5py
before = open(sys.argv[2]).read().split()
with h5py.File(sys.argv[1], "r") as f:
    runs = sorted(f["runs"])
    assert len(runs) == 4, runs
    assert all(k in runs for k in before), "a run written before the kill is gone"
    print(f"4 runs, the {len(before)} written before the kill kept")
PY
check "requeue resumed without loss ($(tail -n 1 "$tmp/after.txt"))" $?
grep -q "skipped (complete in" "$S/results/$id.out"
check "the requeued job skipped the runs it had" $?
echo "two_node: $(($(date +%s) - T0)) s in all"
finish two_node
