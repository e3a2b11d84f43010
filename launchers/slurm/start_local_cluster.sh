#!/usr/bin/env bash
# Start a one-node SLURM cluster on this machine (for CI and for trying the SLURM launcher).
#
# Needs root and Debian's packages, which this script does not install:
#     apt-get install -y slurmctld slurmd slurm-client munge
# Writes /etc/slurm/slurm.conf from slurm.conf.in next to this script (controller = this host,
# one node with this machine's CPUs and memory from `slurmd -C`, partition `debug`), creates a
# munge key if there is none, starts munged, slurmctld and slurmd, and waits until `sinfo` shows
# the node idle. On failure it prints the daemons' log tails and exits non-zero.
#
#     launchers/slurm/start_local_cluster.sh            # start (no-op if the cluster already answers)
#     launchers/slurm/start_local_cluster.sh --restart  # stop the daemons it started before, start again
#
# Environment: SLURM_START_TIMEOUT (seconds to wait for the node, default 60),
# SLURM_CLUSTER_NAME (default rlvr-local).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TEMPLATE="$HERE/slurm.conf.in"
CONF_DIR=/etc/slurm
CONF="$CONF_DIR/slurm.conf"
STATE_DIR=/var/lib/slurm
LOG_DIR=/var/log/slurm
RUN_DIR=/run/slurm
TIMEOUT="${SLURM_START_TIMEOUT:-60}"
CLUSTER_NAME="${SLURM_CLUSTER_NAME:-rlvr-local}"
RESTART=0
[[ "${1:-}" == "--restart" ]] && RESTART=1

say() { echo "[start_local_cluster] $*"; }

dump_logs() {
    for f in "$LOG_DIR/slurmctld.log" "$LOG_DIR/slurmd.log" /var/log/munge/munged.log; do
        echo "----- tail -n 40 $f -----"
        tail -n 40 "$f" 2>/dev/null || echo "(missing)"
    done
}

fail() {
    echo "[start_local_cluster] ERROR: $*" >&2
    dump_logs >&2
    exit 1
}

node_state() { sinfo -h -N -o '%T' 2>/dev/null | head -n 1; }

if [[ "$(id -u)" != 0 ]]; then
    echo "[start_local_cluster] ERROR: run as root (writes /etc/slurm, starts the daemons as root)" >&2
    exit 1
fi
for cmd in slurmctld slurmd sinfo scontrol munged munge unmunge; do
    command -v "$cmd" >/dev/null || {
        echo "[start_local_cluster] ERROR: '$cmd' not found; install: apt-get install -y slurmctld slurmd slurm-client munge" >&2
        exit 1
    }
done

if [[ $RESTART == 0 ]] && [[ "$(node_state)" =~ ^(idle|mixed|allocated|completing) ]]; then
    say "cluster already up: $(sinfo -h -N -o '%N %P %T %c CPUs %m MB')"
    exit 0
fi

stop_pidfile() {  # stop a daemon this script started before (by the pid in its pid file)
    local pidfile=$1 pid
    [[ -s "$pidfile" ]] || return 0
    pid="$(cat "$pidfile")"
    if kill -0 "$pid" 2>/dev/null; then
        say "stopping pid $pid ($pidfile)"
        kill "$pid" || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    fi
    rm -f "$pidfile"
}
stop_pidfile "$RUN_DIR/slurmd.pid"
stop_pidfile "$RUN_DIR/slurmctld.pid"

# --- configuration --------------------------------------------------------------------------
HOST="$(hostname -s)"
NODE_LINE="$(slurmd -C | grep '^NodeName=' | head -n 1)"
[[ -n "$NODE_LINE" ]] || fail "slurmd -C printed no NodeName line"
NODE_NAME="${NODE_LINE%% *}"
NODE_NAME="${NODE_NAME#NodeName=}"
mkdir -p "$CONF_DIR" "$STATE_DIR/slurmctld" "$STATE_DIR/slurmd" "$LOG_DIR" "$RUN_DIR"
sed -e "s|@CLUSTER_NAME@|$CLUSTER_NAME|g" -e "s|@HOST@|$HOST|g" -e "s|@NODE_NAME@|$NODE_NAME|g" \
    -e "s|@NODE_LINE@|$NODE_LINE|g" -e "s|@STATE_DIR@|$STATE_DIR|g" -e "s|@LOG_DIR@|$LOG_DIR|g" \
    -e "s|@RUN_DIR@|$RUN_DIR|g" "$TEMPLATE" > "$CONF.tmp"
mv "$CONF.tmp" "$CONF"
say "wrote $CONF (controller $HOST, node: $NODE_LINE)"

# --- munge ----------------------------------------------------------------------------------
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    mkdir -p /etc/munge /run/munge /var/log/munge /var/lib/munge
    if [[ ! -s /etc/munge/munge.key ]]; then
        say "creating /etc/munge/munge.key"
        if command -v mungekey >/dev/null; then
            mungekey --create --keyfile=/etc/munge/munge.key --force
        else
            dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
        fi
    fi
    chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge
    chmod 0700 /etc/munge
    chmod 0400 /etc/munge/munge.key
    chmod 0755 /run/munge
    say "starting munged"
    runuser -u munge -- munged || fail "munged did not start"
    for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.2; done
    munge -n | unmunge >/dev/null || fail "munge does not work"
fi

# --- slurm daemons --------------------------------------------------------------------------
say "starting slurmctld"
slurmctld || fail "slurmctld did not start"
for _ in $(seq 50); do scontrol ping >/dev/null 2>&1 && break; sleep 0.2; done
say "starting slurmd"
slurmd || fail "slurmd did not start"

start=$SECONDS
resumed=0
while true; do
    state="$(node_state)"
    case "$state" in
        idle*) break ;;
        down*|drain*|drained*|fail*)
            if [[ $resumed == 0 ]]; then  # left over from a previous run (e.g. "Node unexpectedly rebooted")
                scontrol update NodeName="$NODE_NAME" State=RESUME >/dev/null 2>&1 || true
                resumed=1
            fi ;;
    esac
    if (( SECONDS - start >= TIMEOUT )); then
        sinfo -N -l >&2 || true
        fail "node '$NODE_NAME' not idle after ${TIMEOUT}s (state: '${state:-no answer from sinfo}')"
    fi
    sleep 1
done
say "cluster up in $((SECONDS - start))s: $(sinfo -h -N -o '%N partition=%P %T %c CPUs %m MB')"
