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

# The pid in a pidfile if that process is still the expected program (else nothing: stale file).
live_pid() {  # pidfile, program name
    local pid
    [[ -f "$1" ]] || return 0
    pid="$(cat "$1")"
    [[ -n "$pid" && "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$2" ]] && echo "$pid"
    return 0
}

# Send SIGTERM to all the named daemons at once (each takes 2-3 s to exit), wait up to 15 s, SIGKILL.
stop_daemons() {  # pidfile:name ...
    local entry pidfile name pid
    local -A names=()
    for entry in "$@"; do
        IFS=: read -r pidfile name <<<"$entry"
        pid="$(live_pid "$pidfile" "$name")"
        [[ -n "$pid" ]] && kill -TERM "$pid" && names[$pid]="$name"
    done
    for _ in $(seq 150); do
        for pid in "${!names[@]}"; do
            [[ -d "/proc/$pid" ]] || { echo "slurm-down: stopped ${names[$pid]} (pid $pid)"; unset "names[$pid]"; }
        done
        ((${#names[@]})) || return 0
        sleep 0.1
    done
    for pid in "${!names[@]}"; do
        kill -KILL "$pid" 2>/dev/null || true
        echo "slurm-down: killed ${names[$pid]} (pid $pid): still running 15 s after SIGTERM"
    done
}

stop_daemons /run/slurmd.pid:slurmd /run/slurmctld.pid:slurmctld /run/slurmdbd.pid:slurmdbd
((slurm_only)) && exit 0
stop_daemons /run/mysqld/mysqld.pid:mariadbd /run/munge/munged.pid:munged
