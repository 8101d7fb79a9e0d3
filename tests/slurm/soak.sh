#!/usr/bin/env bash
# Cold starts of the local SLURM, N times: each time the state directory is removed (a new
# munge key, no saved state, as on a fresh machine), `tools/slurm-local.sh up` must bring the
# node to idle, a one-task job must run (`srun -n 1 true`), and `down` must stop every daemon.
# Counts: starts that succeeded, how many needed a retry (an attempt that failed: its logs are
# kept under $KEEP_DIR), and failures. Exit 0 only if all N succeeded.
#   usage: tests/slurm/soak.sh [N]     (make slurm-soak N=50)
# Own state dir and ports (6837/6838): it does not disturb a developer's cluster or the tests.
set -uo pipefail
N=${1:-50}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SL=${BB_SLURM_LOCAL:-$ROOT/tools/slurm-local.sh}  # another version to compare with
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM_|SBATCH_|SRUN_|SALLOC_)')
export BB_SLURM_CTLD_PORT=${BB_SLURM_CTLD_PORT:-6837}
export BB_SLURM_SLURMD_PORT=${BB_SLURM_SLURMD_PORT:-6838}
STATE=${BB_SLURM_SOAK_DIR:-/tmp/bb-slurm-soak-$(id -u)}
KEEP_DIR=${KEEP_DIR:-/tmp/bb-slurm-soak-logs-$(id -u)}
rm -rf "$KEEP_DIR" && mkdir -p "$KEEP_DIR"
trap '"$SL" down "$STATE" >/dev/null 2>&1; exit 130' INT TERM
ok=0 retried=0 failed=0
t0=$(date +%s)
for ((i = 1; i <= N; i++)); do
  "$SL" down "$STATE" >/dev/null 2>&1
  rm -rf "$STATE"
  t=$(date +%s.%N)
  if conf=$("$SL" up "$STATE" 2>"$KEEP_DIR/up-$i.err"); then
    eval "$conf"
    if timeout 60 srun -n 1 -t 1 true >"$KEEP_DIR/srun-$i.err" 2>&1; then
      ok=$((ok + 1))
      if grep -q "start attempt .* failed" "$KEEP_DIR/up-$i.err"; then
        retried=$((retried + 1))
        echo "start $i: needed a retry ($(grep -m1 'FAILED:' "$KEEP_DIR/up-$i.err"))"
        cp -r "$STATE/log" "$KEEP_DIR/log-$i"
      else
        rm -f "$KEEP_DIR/up-$i.err" "$KEEP_DIR/srun-$i.err"
      fi
    else
      failed=$((failed + 1))
      echo "start $i: up, but srun -n 1 true failed:"
      cat "$KEEP_DIR/srun-$i.err"
      cp -r "$STATE/log" "$KEEP_DIR/log-$i"
    fi
  else
    failed=$((failed + 1))
    echo "start $i: FAILED"
    cat "$KEEP_DIR/up-$i.err"
  fi
  pids=$(cat "$STATE"/pids/*.pid 2>/dev/null | tr '\n' ' ')
  if ! "$SL" down "$STATE" >/dev/null 2>&1; then
    failed=$((failed + 1))
    echo "start $i: down failed"
  fi
  for p in $pids; do
    if [ -d "/proc/$p" ] && [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ]; then
      echo "start $i: pid $p still running after down"
      failed=$((failed + 1))
    fi
  done
  printf 'start %d: %.1f s\n' "$i" "$(echo "$(date +%s.%N) - $t" | bc)" >>"$KEEP_DIR/times"
done
rm -rf "$STATE"
echo "slurm-soak: $ok of $N cold starts up and ran a job ($retried needed a retry), $failed failures, $(($(date +%s) - t0)) s; logs of retries/failures in $KEEP_DIR"
[ "$failed" = 0 ] && [ "$ok" = "$N" ]
