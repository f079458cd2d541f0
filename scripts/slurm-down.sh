#!/usr/bin/env bash
# Stop the single-node SLURM started by scripts/slurm-up.sh: slurmd, slurmctld, slurmdbd, then
# mariadbd and munged, each through its own pidfile (no other process is touched). Packages,
# configuration and the accounting database stay, so the next slurm-up.sh starts in seconds.
#
#   bash scripts/slurm-down.sh               # stop everything slurm-up.sh started
#   bash scripts/slurm-down.sh --slurm-only  # stop the three SLURM daemons, keep mariadbd and munged
set -euo pipefail

slurm_only=0
case "${1:-}" in
    "") ;;
    --slurm-only) slurm_only=1 ;;
    *) echo "slurm-down: unknown option '$1' (valid: --slurm-only)" >&2; exit 2 ;;
esac

# Stop the process named in a pidfile if it is still the expected program; SIGKILL after 15 s.
stop_daemon() {  # pidfile, program name
    local pidfile="$1" name="$2" pid i
    [[ -f "$pidfile" ]] || return 0
    pid="$(cat "$pidfile")"
    [[ -n "$pid" && "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$name" ]] || return 0  # stale pidfile
    kill -TERM "$pid"
    for i in $(seq 150); do
        [[ -d "/proc/$pid" ]] || { echo "slurm-down: stopped $name (pid $pid)"; return 0; }
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    echo "slurm-down: killed $name (pid $pid): still running 15 s after SIGTERM"
}

stop_daemon /run/slurmd.pid slurmd
stop_daemon /run/slurmctld.pid slurmctld
stop_daemon /run/slurmdbd.pid slurmdbd
((slurm_only)) && exit 0
stop_daemon /run/mysqld/mysqld.pid mariadbd
stop_daemon /run/munge/munged.pid munged
