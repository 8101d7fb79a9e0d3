#!/usr/bin/env bash
# A throw-away single-node SLURM (22.05) on this machine, for trying the jobs/ scripts and for
# tests/slurm. No systemd, no cgroups, no accounting, no GRES; everything it writes (config,
# munge key and socket, state, spool, logs, PID files) lives under one state directory, so it
# never touches a system munged/slurmctld/slurmd or /etc.
#
#   tools/slurm-local.sh up     [STATE_DIR]   start munged, slurmctld, slurmd; wait until the
#                                             node is idle; print `export SLURM_CONF=...`
#   tools/slurm-local.sh down   [STATE_DIR]   cancel the jobs, stop the daemons by PID, wait
#                                             until they are gone (idempotent)
#   tools/slurm-local.sh status [STATE_DIR]   daemons and sinfo; exit 0 if up, 3 if not
#   tools/slurm-local.sh logs   [STATE_DIR]   print the daemon logs
#   tools/slurm-local.sh common-conf [STATE_DIR]  print the slurm.conf lines every cluster of
#                                             this project shares (tests/slurm/two_node.sh too)
#
# STATE_DIR defaults to $BB_SLURM_DIR, else /tmp/bb-slurm-$UID. `up` prints only the export
# line on stdout (everything else goes to stderr), so this works:
#   eval "$(tools/slurm-local.sh up)"; sbatch ...; tools/slurm-local.sh down
# Environment (all optional):
#   BB_SLURM_CTLD_PORT  slurmctld port (default 6817)   BB_SLURM_SLURMD_PORT  slurmd port (6818)
#   BB_SLURM_WAIT       seconds to wait for the node to be idle / daemons to go (default 30)
#   BB_SLURM_CPUS       CPUs of the node (default: nproc)
#   BB_SLURM_ATTEMPTS   cold starts tried before `up` gives up (default 3)
#   BB_SLURM_CRED_EXPIRE  AuthInfo cred_expire (>= 5 s; SLURM's default 120): the lifetime of a
#                       step's credential, and how long a requeued job is held before it may
#                       start again (cred_expire + 1 s)
# `up` starts one daemon at a time and waits until each is ready (munged: a credential round
# trip; slurmctld: `scontrol ping`; slurmd: the node idle). A failed start prints the failing
# daemon's own log first and is retried from scratch ("start attempt N of M failed").
# Needs: apt-get install -y slurm-wlm munge. Runs as root (SlurmUser/SlurmdUser = the caller;
# slurmd must be root to start jobs as other users, which is not needed here).
set -euo pipefail

cmd=${1:-}
S=${2:-${BB_SLURM_DIR:-/tmp/bb-slurm-$(id -u)}}
CTLD_PORT=${BB_SLURM_CTLD_PORT:-6817}
SLURMD_PORT=${BB_SLURM_SLURMD_PORT:-6818}
WAIT=${BB_SLURM_WAIT:-30}
ATTEMPTS=${BB_SLURM_ATTEMPTS:-3}
NODE=localhost

usage() {
  sed -n '2,31p' "$0" >&2
  exit 2
}
log() { echo "slurm-local: $*" >&2; }

case "$cmd" in up | down | status | logs | common-conf) ;; *) usage ;; esac
case "$S" in /*) ;; *) S="$PWD/$S" ;; esac

CONF=$S/slurm.conf
MUNGE_DIR=$S/munge
MUNGE_SOCKET=$MUNGE_DIR/munge.socket
PIDS=$S/pids
LOGS=$S/log
DAEMONS=(munged slurmctld slurmd)
export SLURM_CONF=$CONF

# --- PIDs ----------------------------------------------------------------------------------
# A recorded PID counts only while that process is still the daemon we started: its command
# line names the daemon and this state directory (a stale file, or a PID reused by some other
# process after a reboot or a crash, is ignored and removed).
pid_of() {  # daemon -> prints the live PID, or nothing
  local f=$PIDS/$1.pid pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f" 2>/dev/null || true)
  case "$pid" in '' | *[!0-9]*) return 0 ;; esac
  [ -r "/proc/$pid/cmdline" ] || return 0
  local cl
  cl=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
  case "$cl" in *"$1"*"$S"*) echo "$pid" ;; esac
}

alive() { [ -n "$(pid_of "$1")" ]; }

stop_daemon() {  # daemon: TERM, wait, then KILL; always removes the PID file
  local name=$1 pid i
  pid=$(pid_of "$name")
  if [ -n "$pid" ]; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < WAIT * 10; i++)); do
      [ -d "/proc/$pid" ] || break
      # a zombie (our own child, in a test harness shell) counts as gone
      [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] && break
      sleep 0.1
    done
    if [ -d "/proc/$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]; then
      log "$name ($pid) ignored SIGTERM for ${WAIT}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
    fi
    log "stopped $name ($pid)"
  fi
  rm -f "$PIDS/$name.pid"
}

print_logs() {  # [daemon first]: every daemon's log file and stdio, the one named first
  local d
  [ -n "${1:-}" ] && daemon_log "$1" 80
  for d in "${DAEMONS[@]}"; do
    [ "$d" = "${1:-}" ] && continue
    case "$d" in munged) daemon_log "$d" 15 ;; *) daemon_log "$d" 40 ;; esac
  done
}

# Exit 1 after printing the logs (the failing daemon's own log first) and stopping what a
# start began; FATAL=1 makes it exit 2 (during a start: a failure a retry cannot mend).
STARTING=0
FAILED_DAEMON=""
FATAL=0
fail() {
  log "FAILED: $*"
  if alive slurmctld; then sinfo -N -l >&2 2>&1 || true; fi
  print_logs "$FAILED_DAEMON"
  if [ "$STARTING" = 1 ]; then  # leave nothing half-started behind
    STARTING=0
    for d in slurmd slurmctld munged; do stop_daemon "$d"; done
  fi
  [ "$FATAL" = 1 ] && exit 2
  exit 1
}

port_busy() {  # port -> 0 if something listens on 127.0.0.1:port
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

node_state() { sinfo -h -n "$NODE" -o %T 2>/dev/null | head -n 1; }

# --- config --------------------------------------------------------------------------------
# The settings every cluster of this project shares (this one, and the two nodes of
# tests/slurm/two_node.sh, which prints them with `common-conf`): munge on the socket under the
# state directory, the saved state there, no accounting and no mail, cons_tres by core,
# config_overrides, pmi2 for MPICH's srun, nodes back in service on their own. The caller adds
# the cluster's name, hosts and ports, the daemons' files, the task plugin, timeouts and nodes.
common_conf() {
  cat <<EOF
SlurmUser=$(id -un)
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET${BB_SLURM_CRED_EXPIRE:+,cred_expire=$BB_SLURM_CRED_EXPIRE}
StateSaveLocation=$S/state
ProctrackType=proctrack/linuxproc
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=pmi2
MailProg=/bin/true
ReturnToService=2
InactiveLimit=0
MinJobAge=300
EOF
}

write_conf() {
  local cpus mem_mb
  cpus=${BB_SLURM_CPUS:-$(nproc)}
  [[ $cpus =~ ^[1-9][0-9]*$ ]] || fail "BB_SLURM_CPUS=$cpus: want a positive number"
  # 90 % of the machine's memory: a node reporting less than configured would be drained
  # (config_overrides below prevents that too; memory is not a consumable with CR_Core).
  mem_mb=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)
  [ "${mem_mb:-0}" -ge 1 ] || mem_mb=1000
  {
    echo "# Written by tools/slurm-local.sh: a minimal single-node SLURM under $S"
    common_conf
    cat <<EOF
ClusterName=bblocal
SlurmctldHost=$NODE
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
TaskPlugin=task/affinity
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SlurmdTimeout=300
KillWait=5
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
  } >"$CONF"
}

# A daemon's own log: its log file, then what it printed before opening it (stdio).
daemon_log() {  # daemon [lines]
  local f n=${2:-60}
  for f in "$LOGS/$1.log" "$LOGS/$1.out"; do
    if [ -s "$f" ]; then
      echo "----- $f (last $n lines) -----" >&2
      tail -n "$n" "$f" >&2 || true
    else
      echo "----- $f: empty -----" >&2
    fi
  done
}

fail_daemon() {  # daemon, message: that daemon's own log first, then the others'
  FAILED_DAEMON=$1
  fail "$1: $2"
}

gone() {  # pid -> 0 if the process is gone (a zombie counts as gone)
  [ -d "/proc/$1" ] || return 0
  [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]
}

# Start a daemon in its own session, stdio to a log file, PID recorded. Until the child has
# exec'd the daemon, /proc/PID/cmdline is this script's, so pid_of (and alive) would call the
# daemon dead: wait here until the exec is visible, so that no later check races with it.
start_bg() {  # name, command...
  local name=$1 pid i
  shift
  setsid "$@" </dev/null >>"$LOGS/$name.out" 2>&1 &
  pid=$!
  echo "$pid" >"$PIDS/$name.pid"
  for ((i = 0; i < WAIT * 50; i++)); do
    [ -n "$(pid_of "$name")" ] && return 0
    gone "$pid" && fail_daemon "$name" "exited as it started (pid $pid)"
    sleep 0.02
  done
  kill -KILL "$pid" 2>/dev/null || true
  fail_daemon "$name" "pid $pid did not become $name within ${WAIT}s"
}

# Poll every 0.2 s until the command succeeds; the daemons named must stay alive meanwhile.
wait_for() {  # description, seconds, "daemon daemon...", command...
  local what=$1 secs=$2 need=$3 i d
  shift 3
  for ((i = 0; i < secs * 5; i++)); do
    for d in $need; do
      alive "$d" || fail_daemon "$d" "exited while waiting for: $what"
    done
    "$@" && return 0
    sleep 0.2
  done
  fail_daemon "${need##* }" "$what (waited ${secs}s)"
}

munge_ok() { munge -S "$MUNGE_SOCKET" -n </dev/null 2>/dev/null | unmunge -S "$MUNGE_SOCKET" >/dev/null 2>&1; }
ctld_ok() { scontrol ping 2>/dev/null | grep -q 'is UP'; }
node_idle() {
  case "$(node_state)" in idle*) return 0 ;; esac
  return 1
}

# One attempt at a cold start, one daemon after the other, each ready before the next starts:
# munged (a credential round trip), slurmctld (answers `scontrol ping`), slurmd (the node is
# idle). Runs in a subshell: fail() stops what it started and exits 1 (retried) or 2 (not).
start_once() {
  STARTING=1
  mkdir -p "$S" "$PIDS" "$LOGS" "$S/state" "$S/spool" "$S/run" "$MUNGE_DIR"
  chmod 0755 "$S"
  chmod 0711 "$MUNGE_DIR"  # munged refuses group/other-writable dirs; others may reach the socket
  rm -f "$S/run/slurmctld.pid" "$S/run/slurmd.pid" "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock" \
    "$MUNGE_DIR/munged.pid"
  local d p
  for d in "${DAEMONS[@]}"; do : >"$LOGS/$d.log" && : >"$LOGS/$d.out"; done
  for p in "$CTLD_PORT" "$SLURMD_PORT"; do
    port_busy "$p" && FATAL=1 fail "port $p is in use (another slurmctld/slurmd?): set BB_SLURM_CTLD_PORT / BB_SLURM_SLURMD_PORT"
  done
  write_conf

  # munge: a private key and socket (never the system's /etc/munge, /run/munge). The key is
  # complete (written under a temporary name, then renamed) before munged can read it.
  if [ ! -s "$MUNGE_DIR/munge.key" ]; then
    dd if=/dev/urandom of="$MUNGE_DIR/munge.key.tmp" bs=1024 count=1 status=none
    chmod 0400 "$MUNGE_DIR/munge.key.tmp"
    mv -f "$MUNGE_DIR/munge.key.tmp" "$MUNGE_DIR/munge.key"
  fi
  chmod 0400 "$MUNGE_DIR/munge.key"
  start_bg munged munged -F --force --key-file="$MUNGE_DIR/munge.key" --socket="$MUNGE_SOCKET" \
    --pid-file="$MUNGE_DIR/munged.pid" --log-file="$LOGS/munged.log" \
    --seed-file="$MUNGE_DIR/munged.seed"
  wait_for "munged answering on $MUNGE_SOCKET" "$WAIT" "munged" munge_ok

  start_bg slurmctld slurmctld -D -f "$CONF"
  wait_for "slurmctld answering scontrol ping" "$WAIT" "munged slurmctld" ctld_ok

  start_bg slurmd slurmd -D -N "$NODE" -f "$CONF"
  wait_for "node $NODE idle in sinfo" "$WAIT" "munged slurmctld slurmd" node_idle_or_resume
  STARTING=0
}

up() {
  local b a rc i
  for b in munged munge unmunge slurmctld slurmd sinfo scontrol; do
    command -v "$b" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin
    command -v "$b" >/dev/null 2>&1 || fail "$b not found: apt-get install -y slurm-wlm munge"
  done
  if alive munged && alive slurmctld && alive slurmd && node_idle 2>/dev/null; then
    log "already up under $S"
    echo "export SLURM_CONF=$CONF"
    return 0
  fi
  # Partly up, or stale PID files from a crash: stop what is ours and start clean; a start
  # that fails (a daemon exits or does not get ready) is retried from scratch, at most
  # $ATTEMPTS times in all, each failure reported with the failing daemon's own log.
  for ((a = 1; a <= ATTEMPTS; a++)); do
    for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do stop_daemon "${DAEMONS[i]}"; done
    rc=0
    (start_once) || rc=$?
    if [ $rc = 0 ]; then
      [ $a -gt 1 ] && log "started on attempt $a of $ATTEMPTS"
      log "up: slurmctld $(pid_of slurmctld), slurmd $(pid_of slurmd), munged $(pid_of munged); $(sinfo -h -o '%P %D %T %c CPUs' | head -n 1)"
      echo "export SLURM_CONF=$CONF"
      return 0
    fi
    [ $rc = 2 ] && exit 1  # not worth retrying (a busy port)
    log "start attempt $a of $ATTEMPTS failed (logs above)"
    if [ $a -lt "$ATTEMPTS" ]; then
      mkdir -p "$LOGS/attempt-$a" && cp -f "$LOGS"/*.log "$LOGS"/*.out "$LOGS/attempt-$a/" 2>/dev/null
      sleep 1
    fi
  done
  log "FAILED: no start in $ATTEMPTS attempts"
  exit 1
}

# A node kept DOWN/DRAINED in the saved state of an earlier run is resumed once.
node_idle_or_resume() {
  node_idle && return 0
  case "$(node_state)" in
    drain* | down*) scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true ;;
  esac
  return 1
}

down() {
  if alive slurmctld; then
    local ids
    ids=$(squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ' || true)
    if [ -n "${ids// /}" ]; then
      log "cancelling jobs: $ids"
      # shellcheck disable=SC2086  # a list of job ids
      scancel $ids >/dev/null 2>&1 || true
      for ((i = 0; i < WAIT * 5; i++)); do
        [ -z "$(squeue -h -o %A 2>/dev/null)" ] && break
        sleep 0.2
      done
    fi
  fi
  stop_daemon slurmd
  stop_daemon slurmctld
  stop_daemon munged
  local d
  for d in "${DAEMONS[@]}"; do
    alive "$d" && fail "$d still running"
  done
  log "down ($S)"
}

status() {
  local rc=0 d
  for d in "${DAEMONS[@]}"; do
    if alive "$d"; then echo "$d: running ($(pid_of "$d"))"; else echo "$d: not running"; rc=3; fi
  done
  if [ $rc = 0 ]; then
    echo "SLURM_CONF=$CONF"
    sinfo 2>&1 || rc=3
    squeue 2>&1 || true
  fi
  return $rc
}

case "$cmd" in
  up) up ;;
  down) down ;;
  status) status ;;
  logs) print_logs 2>&1 ;;
  common-conf) common_conf ;;
esac
