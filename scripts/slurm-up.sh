#!/usr/bin/env bash
# Start a single-node SLURM with job accounting on this machine (Debian 12, as root, no systemd).
#
#   sudo bash scripts/slurm-up.sh      # or: make slurm
#
# Installs slurmctld, slurmd, slurm-client, munge, slurmdbd and mariadb-server from Debian's
# packages; creates a munge key; writes /etc/slurm/{slurm,slurmdbd,cgroup}.conf for one node (this
# host: CPUs = nproc, RealMemory = MemTotal minus a margin, one partition); starts munged, mariadbd,
# slurmdbd, slurmctld and slurmd as plain daemons; waits until `srun -N1 -n1` runs and `sacct` lists
# that job. Idempotent: when SLURM already answers with the node usable and accounting on, it says
# so and exits 0 at once (as any user). Stop it all with scripts/slurm-down.sh.
#
# Settings (environment):
#   SLURM_UP_TIMEOUT_S       seconds to wait for each daemon to answer (default 60)
#   SCALING_SLURM_PARTITION  name of the partition (default debug); the launcher preset
#                            conf/hydra/launcher/slurm.yaml reads the same variable
#   SLURM_UP_FAKE_GPUS       GPUs the node declares as GRES without having any (default 2; 0: none)
#
# Why each non-default choice (Debian 12 ships SLURM 22.05.8, MariaDB 10.11):
#   - Accounting (slurmdbd + MariaDB): submitit learns that a job ended without a result (cancelled,
#     killed at its time limit, node failure) only from `sacct`. Without accounting, sacct answers
#     "Slurm accounting storage is disabled" and a Hydra multirun waits forever for such a job.
#   - ProctrackType=proctrack/linuxproc: no cgroup management, which needs systemd or a writable
#     cgroup tree; cgroup.conf names CgroupPlugin=cgroup/v1 for machines where slurmd's
#     autodetection fails (with this VM's hybrid v1 mounts it also starts without).
#   - TaskPlugin=task/affinity (sched_setaffinity, no cgroups; task/none also starts): each job is
#     pinned to the CPUs it was given, as on a real cluster, so a job that sizes its thread pool
#     from os.sched_getaffinity (the trainer does) uses 1 thread in a 1-CPU job; under task/none
#     every job sees all CPUs and two jobs oversubscribe them.
#   - munge's directories and key owned by the munge user, key mode 0400 (munged refuses otherwise).
#   - CR_CPU_Memory with DefMemPerCPU: a CPU is the unit of allocation, so two 1-CPU jobs run side
#     by side; without DefMemPerCPU a job that does not ask for memory gets all of the node's.
#   - Fake GPUs: the node declares SLURM_UP_FAKE_GPUS GPUs (GresTypes=gpu, gres.conf with
#     AutoDetect=off), so that jobs asking for GPUs (conf/hydra/launcher/slurm_gpu.yaml) are scheduled
#     one GPU each and get CUDA_VISIBLE_DEVICES from SLURM, as on a GPU cluster, while they train on
#     the CPU. slurmd accepts only character devices as GPU files: they are made with mknod under
#     $FAKE_GPU_DIR with /dev/null's numbers (1, 3), so nothing can reach real hardware through them.
#     Where mknod is not permitted the node declares no GPUs (said in one line).
#   - SlurmUser=root for slurmctld/slurmdbd, so slurmdbd reaches MariaDB as root through its unix
#     socket (unix_socket authentication: no password to create or store) and no state directory
#     needs another owner.
set -euo pipefail

TIMEOUT_S="${SLURM_UP_TIMEOUT_S:-60}"
PARTITION="${SCALING_SLURM_PARTITION:-debug}"
FAKE_GPUS="${SLURM_UP_FAKE_GPUS:-2}"
FAKE_GPU_DIR=/var/lib/slurm/fake-gpus
PACKAGES=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server)
CLUSTER=scaling-local
CONF_DIR=/etc/slurm
LOG_DIR=/var/log/slurm
STATE_DIR=/var/lib/slurm/slurmctld
SPOOL_DIR=/var/spool/slurmd
NODE="$(hostname -s)"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

T0=$(date +%s.%N)
say() { printf 'slurm-up: %s\n' "$*"; }
die() { printf 'slurm-up: ERROR: %s\n' "$*" >&2; exit 1; }
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
show_log() { echo "--- last lines of $1" >&2; tail -n "${2:-15}" "$1" >&2 2>/dev/null || echo "(missing)" >&2; }

# Poll a command (quietly) every 0.2 s until it succeeds; false after TIMEOUT_S.
wait_for() {
    local deadline=$((SECONDS + TIMEOUT_S))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}

# Node state as sinfo prints it (idle, mixed, allocated, down*, drained, ...); empty if no answer.
node_state() { timeout 5 sinfo -h -n "$NODE" -o '%T' 2>/dev/null | head -n1 || true; }
node_usable() { case "$(node_state)" in idle | mixed | allocated | completing) return 0 ;; *) return 1 ;; esac; }
accounting_answers() { [[ "$(timeout 5 sacctmgr -n -P list cluster format=cluster 2>/dev/null)" == *"$CLUSTER"* ]]; }
slurm_answers() {
    command -v sinfo >/dev/null 2>&1 && [[ "$(timeout 5 scontrol ping 2>/dev/null)" == *"is UP"* ]] \
        && node_usable && accounting_answers
}

# --- Configuration files: their text, whether they are current, writing them ------------------
real_memory_mb() {
    # MemTotal minus max(512 MiB, 5%): slurmd marks a node invalid if RealMemory exceeds what it finds.
    awk '/^MemTotal:/ { mb = int($2 / 1024); margin = mb * 0.05; if (margin < 512) margin = 512;
                        print int(mb - margin) }' /proc/meminfo
}

# The node's GRES lines: GPUs declared without hardware (see "Fake GPUs" above); none for 0.
gres_lines() {
    ((FAKE_GPUS > 0)) || return 0
    printf 'GresTypes=gpu\nAccountingStorageTRES=gres/gpu\n'
}
node_gres() { ((FAKE_GPUS > 0)) && printf ' Gres=gpu:%s' "$FAKE_GPUS" || true; }

# Character devices for the fake GPUs (mknod needs CAP_MKNOD); FAKE_GPUS=0 where they cannot be made.
make_fake_gpus() {
    ((FAKE_GPUS > 0)) || return 0
    local i
    install -d -m 0755 "$FAKE_GPU_DIR"
    for ((i = 0; i < FAKE_GPUS; i++)); do
        [[ -c "$FAKE_GPU_DIR/nvidia$i" ]] && continue
        rm -f "$FAKE_GPU_DIR/nvidia$i"
        mknod -m 0644 "$FAKE_GPU_DIR/nvidia$i" c 1 3 2>/dev/null || {
            say "cannot mknod $FAKE_GPU_DIR/nvidia$i here: the node declares no GPUs"
            FAKE_GPUS=0
            return 0
        }
    done
}

gres_conf() {
    echo "# Written by scripts/slurm-up.sh: GPUs declared for scheduling tests, not real devices."
    echo "AutoDetect=off"
    ((FAKE_GPUS > 0)) && echo "Name=gpu File=$FAKE_GPU_DIR/nvidia[0-$((FAKE_GPUS - 1))]" || true
}

slurm_conf() {
    cat <<EOF
# Written by scripts/slurm-up.sh: a single-node SLURM for tests and local sweeps.
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$STATE_DIR
SlurmdSpoolDir=$SPOOL_DIR
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
# No cgroup management: track processes through /proc; pin each task to its CPUs (sched_setaffinity).
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
MpiDefault=none
$(gres_lines)
# A CPU is the unit of allocation (two 1-CPU jobs run side by side); a job that does not ask for
# memory gets DefMemPerCPU MB per CPU.
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=1024
# A node that was down returns by itself when slurmd registers with a valid configuration.
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=300
# Accounting through slurmdbd, so sacct (which submitit polls) answers; usage sampled from /proc.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/linux
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$(real_memory_mb)$(node_gres) State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
}

slurmdbd_conf() {
    cat <<EOF
# Written by scripts/slurm-up.sh. MariaDB as root through its unix socket (unix_socket auth).
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=root
LogFile=$LOG_DIR/slurmdbd.log
PidFile=/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=root
StorageLoc=slurm_acct_db
EOF
}

cgroup_conf() {
    cat <<EOF
# Written by scripts/slurm-up.sh. Jobs are tracked through /proc (proctrack/linuxproc); naming the
# plugin keeps slurmd from depending on autodetecting this machine's cgroup mounts.
CgroupPlugin=cgroup/v1
EOF
}

# Configuration file -> its text and mode.
CONF_FILES=(slurm.conf:slurm_conf:644 slurmdbd.conf:slurmdbd_conf:600 cgroup.conf:cgroup_conf:644 gres.conf:gres_conf:644)

# True when every configuration file holds what this script would write (slurmdbd.conf, readable
# by root only, is compared when readable).
config_current() {
    local entry file text
    for entry in "${CONF_FILES[@]}"; do
        IFS=: read -r file text _ <<<"$entry"
        [[ ! -e "$CONF_DIR/$file" || -r "$CONF_DIR/$file" ]] || continue
        cmp -s <("$text") "$CONF_DIR/$file" || return 1
    done
}

write_config() {
    local entry file text mode tmp
    install -d -m 0755 "$CONF_DIR" "$LOG_DIR" "$SPOOL_DIR"
    install -d -m 0700 "$STATE_DIR"
    for entry in "${CONF_FILES[@]}"; do
        IFS=: read -r file text mode <<<"$entry"
        tmp="$(mktemp "$CONF_DIR/$file.XXXXXX")"
        "$text" >"$tmp"
        chmod "$mode" "$tmp"
        mv "$tmp" "$CONF_DIR/$file"
    done
}

# --- 0. Already up? ------------------------------------------------------------------------------
[[ "$FAKE_GPUS" =~ ^[0-9]+$ ]] || die "SLURM_UP_FAKE_GPUS=$FAKE_GPUS is not a count of GPUs"
((FAKE_GPUS == 0)) || [[ -c "$FAKE_GPU_DIR/nvidia$((FAKE_GPUS - 1))" ]] || [[ "$(id -u)" != 0 ]] || make_fake_gpus
if slurm_answers && config_current; then
    say "already up: node $NODE is $(node_state) in partition $PARTITION, accounting on ($(elapsed "$T0") s)"
    exit 0
fi
[[ "$(id -u)" == 0 ]] || die "SLURM is not answering here, or runs with another configuration than this script writes; (re)starting it needs root (running as $(id -un)): sudo bash $0"
command -v apt-get >/dev/null 2>&1 || die "apt-get not found: this script installs SLURM from Debian's packages only"

# --- 1. Packages ---------------------------------------------------------------------------------
install_packages() {
    local pkg missing=() policy t own_policy=0
    for pkg in "${PACKAGES[@]}"; do
        [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" == "install ok installed" ]] || missing+=("$pkg")
    done
    ((${#missing[@]})) || { say "packages already installed"; return; }
    t=$(date +%s.%N)
    policy="$(apt-cache policy slurmctld mariadb-server 2>/dev/null || true)"
    if [[ "$policy" != *Candidate:* || "$policy" == *"Candidate: (none)"* ]]; then
        say "apt-get update (the package lists have no slurmctld or mariadb-server)"
        apt-get update -qq || die "apt-get update failed"
    fi
    # Keep the packages' maintainer scripts from starting daemons: this script starts them itself.
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
        own_policy=1
    fi
    say "apt-get install ${missing[*]}"
    local rc=0
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
        >/tmp/slurm-up-apt.log 2>&1 || rc=$?
    ((own_policy)) && rm -f /usr/sbin/policy-rc.d
    ((rc == 0)) || { show_log /tmp/slurm-up-apt.log 20; die "apt-get install ${missing[*]} failed (exit $rc; log: /tmp/slurm-up-apt.log)"; }
    say "installed in $(elapsed "$t") s"
}

# --- 2. munge and MariaDB ------------------------------------------------------------------------
munge_answers() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
    install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
    install -d -o munge -g munge -m 0755 /run/munge
    if [[ ! -s /etc/munge/munge.key ]]; then
        say "creating /etc/munge/munge.key"
        mungekey --create --keyfile=/etc/munge/munge.key --force
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
    munge_answers && return
    runuser -u munge -- /usr/sbin/munged || { show_log /var/log/munge/munged.log; die "munged failed to start"; }
    wait_for munge_answers || { show_log /var/log/munge/munged.log; die "munged runs but 'munge -n | unmunge' fails"; }
}

mariadb_answers() { mariadb -e 'SELECT 1'; }

start_mariadb() {
    mariadb_answers >/dev/null 2>&1 && return
    install -d -o mysql -g mysql -m 0755 /run/mysqld
    [[ -d /var/lib/mysql/mysql ]] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
    # mariadbd stays in the foreground: detach it. No TCP port: slurmdbd uses the unix socket.
    setsid /usr/sbin/mariadbd --user=mysql --skip-networking --pid-file=/run/mysqld/mysqld.pid \
        >>"$LOG_DIR/mariadbd.log" 2>&1 </dev/null &
    wait_for mariadb_answers || { show_log "$LOG_DIR/mariadbd.log"; die "mariadbd not answering after ${TIMEOUT_S} s"; }
}

# --- 3. SLURM daemons ----------------------------------------------------------------------------
start_slurm() {
    # Daemons left from an earlier start may hold an older configuration: restart them.
    bash "$HERE/slurm-down.sh" --slurm-only >/dev/null
    /usr/sbin/slurmdbd || { show_log "$LOG_DIR/slurmdbd.log"; die "slurmdbd failed to start"; }
    wait_for timeout 5 sacctmgr -n list cluster \
        || { show_log "$LOG_DIR/slurmdbd.log"; die "slurmdbd not answering sacctmgr after ${TIMEOUT_S} s"; }
    # slurmctld registers the cluster with slurmdbd itself when it starts.
    /usr/sbin/slurmctld || { show_log "$LOG_DIR/slurmctld.log"; die "slurmctld failed to start"; }
    /usr/sbin/slurmd || { show_log "$LOG_DIR/slurmd.log"; die "slurmd failed to start"; }
}

node_ready() {
    case "$(node_state)" in
        idle | mixed | allocated) return 0 ;;
        drain* | down*) timeout 5 scontrol update NodeName="$NODE" State=RESUME ;;
    esac
    return 1
}

job_completed_in_accounting() { [[ "$(sacct -n -X -P -j "$1" -o State 2>/dev/null)" == COMPLETED* ]]; }

check_ready() {
    if ! wait_for node_ready; then
        show_log "$LOG_DIR/slurmctld.log"; show_log "$LOG_DIR/slurmd.log"
        die "node $NODE not usable after ${TIMEOUT_S} s (state: '$(node_state)')"
    fi
    local out job_id host
    # shellcheck disable=SC2016  # expanded by the job's shell, not here
    out="$(timeout "$TIMEOUT_S" srun -N1 -n1 bash -c 'echo "$SLURM_JOB_ID $(hostname)"' 2>&1)" \
        || die "node $NODE is $(node_state) but srun -N1 -n1 failed: $out"
    read -r job_id host <<<"$out"
    say "srun -N1 -n1: job $job_id ran on $host"
    wait_for job_completed_in_accounting "$job_id" || {
        show_log "$LOG_DIR/slurmctld.log"; show_log "$LOG_DIR/slurmdbd.log"
        die "job $job_id ran but sacct does not list it as COMPLETED after ${TIMEOUT_S} s: $(sacct -n -X -j "$job_id" 2>&1)"
    }
    say "sacct lists job $job_id as COMPLETED"
}

install_packages
t=$(date +%s.%N); start_munge; start_mariadb; say "munged and mariadbd answering ($(elapsed "$t") s)"
config_current || say "writing $CONF_DIR/{slurm,slurmdbd,cgroup,gres}.conf"
write_config
t=$(date +%s.%N); start_slurm; check_ready
say "slurmdbd, slurmctld, slurmd up; node $NODE $(node_state) in partition $PARTITION ($(elapsed "$t") s)"
say "SLURM ready in $(elapsed "$T0") s"
