#!/bin/sh
# A one-node Slurm cluster on this machine for the Slurm recipe's test:
# munged with its own key and socket, slurmctld and slurmd on localhost,
# all of it (configuration, state, spool, logs) in one directory, no
# cgroups, no accounting, nothing of the system's Slurm or munge used.
#
#   cluster.sh start DIR    start it; DIR must not exist yet, and be a short
#                           path (it holds Unix sockets) in directories all
#                           users can search (munged checks); jobs then run
#                           with SLURM_CONF=DIR/slurm.conf
#   cluster.sh stop DIR     cancel every job, stop the daemons (each waited
#                           for a bounded time, then killed)
#   cluster.sh logs DIR     print the end of the daemons' logs
#
# The daemons run as the caller (the Slurm user is whoever started it, root
# in CI). MUNGED, SLURMCTLD and SLURMD name the programs (default: found on
# PATH). Until `stop`, a watchdog outside the caller's process group stops
# the cluster when the caller has gone (killed by a test timeout, say) or
# after MD_SLURM_MAX_S seconds (default 600), so no daemon outlives a test.
set -u
munged=${MUNGED:-munged}
slurmctld=${SLURMCTLD:-slurmctld}
slurmd=${SLURMD:-slurmd}
cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then echo "usage: cluster.sh start|stop|logs DIR" >&2; exit 99; fi
conf=$dir/slurm.conf
msg() { echo "cluster: $*" >&2; }

# alive PIDFILE: the process named in PIDFILE runs.
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# halt PIDFILE...: TERM to each process named, up to 10 s for all to exit
# (each takes a second or two), then KILL to any left.
halt() {
  pids=
  for f in "$@"; do
    if alive "$f"; then pids="$pids $(cat "$f")"; fi
  done
  [ -n "$pids" ] || return 0
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null
  i=0
  for pid in $pids; do
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
      msg "$pid ($(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null)) ignored TERM for 10 s: killing it"
      kill -KILL "$pid" 2>/dev/null
    fi
  done
}

# free_ports: two consecutive TCP ports nothing on this machine has bound
# (IPv4 or IPv6), below the kernel's ephemeral range, so that parallel runs
# and a real Slurm (6817/6818) do not clash.
free_ports() {
  used=$(awk 'NR > 1 { split($2, a, ":"); print a[2] }' /proc/net/tcp /proc/net/tcp6 2>/dev/null)
  try=0
  while [ $try -lt 200 ]; do
    p=$((20000 + (($$ + try * 7919) % 5000) * 2))
    if ! printf '%s\n' "$used" | grep -qx -e "$(printf '%04X' $p)" -e "$(printf '%04X' $((p + 1)))"; then
      echo $p
      return 0
    fi
    try=$((try + 1))
  done
  return 1
}

stop() {
  [ -f "$conf" ] || return 0
  SLURM_CONF=$conf
  export SLURM_CONF
  unset MD_SLURM_CLUSTER   # (not a mark of this script's own children)
  if alive "$dir/slurmctld.pid"; then
    # Cancelled jobs are signalled by slurmd (KillWait=2 before KILL).
    timeout 10 scancel --quiet --user="$(id -un)" 2>/dev/null
    i=0
    while [ $i -lt 150 ] && [ -n "$(timeout 5 squeue -h -o %i 2>/dev/null)" ]; do
      sleep 0.1; i=$((i + 1))
    done
  fi
  watchdog=$dir/watchdog.pid
  # (Not the watchdog when it is the one stopping the cluster.)
  [ -z "${MD_SLURM_WATCHDOG:-}" ] || watchdog=/dev/null
  halt "$watchdog" "$dir/slurmd.pid" "$dir/slurmctld.pid"
  # A job step whose slurmd went first: its slurmstepd carries the mark
  # this script put in slurmd's environment.
  for e in /proc/[0-9]*/environ; do
    pid=${e#/proc/}
    pid=${pid%/environ}
    if { tr '\0' '\n' <"$e"; } 2>/dev/null | grep -qxF "MD_SLURM_CLUSTER=$dir"; then
      [ "$pid" = "$$" ] || kill -KILL "$pid" 2>/dev/null
    fi
  done
  halt "$dir/munge/munged.pid"
}

case "$cmd" in
  start)
    [ ! -e "$dir" ] || { msg "$dir exists"; exit 1; }
    for p in "$munged" "$slurmctld" "$slurmd" sbatch scontrol squeue scancel sinfo; do
      command -v "$p" >/dev/null 2>&1 || { msg "$p not found"; exit 1; }
    done
    # munged wants its key private and its socket's directory open to all.
    mkdir -p "$dir/munge/private" "$dir/state" "$dir/spool" "$dir/log" || exit 1
    chmod 755 "$dir" "$dir/munge" && chmod 700 "$dir/munge/private" || exit 1
    dd if=/dev/urandom of="$dir/munge/private/munge.key" bs=1024 count=1 2>/dev/null &&
      chmod 400 "$dir/munge/private/munge.key" || exit 1
    port=$(free_ports) || { msg "no free TCP port pair found"; exit 1; }
    user=$(id -un)
    cat >"$conf" <<EOF
# Written by cluster.sh start: a one-node cluster, $dir.
ClusterName=memdecaytest
SlurmctldHost=localhost
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups (containers often lack them): process groups track the jobs.
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# Schedule at once on every event, not on a timer.
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0
# The node is as configured, whatever the machine reports (a container's
# view of its CPUs and memory is unreliable).
SlurmdParameters=config_overrides
ReturnToService=2
# Finished jobs stay visible to scontrol for the test's whole run.
MinJobAge=900
KillWait=2
InactiveLimit=0
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1024 State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
    SLURM_CONF=$conf
    export SLURM_CONF
    # Each daemon forks into the background once it is set up; timeout
    # bounds a start that hangs.
    timeout 20 "$munged" --key-file="$dir/munge/private/munge.key" \
      --socket="$dir/munge/munge.socket" --pid-file="$dir/munge/munged.pid" \
      --log-file="$dir/log/munged.log" --seed-file="$dir/munge/private/munged.seed" \
      </dev/null >>"$dir/log/start.log" 2>&1 || { msg "munged did not start"; "$0" logs "$dir"; stop; exit 1; }
    timeout 20 "$slurmctld" </dev/null >>"$dir/log/start.log" 2>&1 ||
      { msg "slurmctld did not start"; "$0" logs "$dir"; stop; exit 1; }
    MD_SLURM_CLUSTER=$dir timeout 20 "$slurmd" -N localhost </dev/null >>"$dir/log/start.log" 2>&1 ||
      { msg "slurmd did not start"; "$0" logs "$dir"; stop; exit 1; }
    # The watchdog (see the top), in its own session.
    owner=$PPID
    max=${MD_SLURM_MAX_S:-600}
    # (A background job of a shell without job control is no process group
    # leader, so setsid runs the watchdog itself: $! is its pid.)
    setsid "$0" watchdog "$dir" "$owner" "$max" </dev/null >>"$dir/log/watchdog.log" 2>&1 &
    echo $! >"$dir/watchdog.pid"
    # Up once the node has registered and is idle (30 s at most).
    i=0
    while [ $i -lt 300 ]; do
      state=$(timeout 5 sinfo -h -n localhost -o %T 2>/dev/null)
      [ "$state" = idle ] && { msg "up: $conf (ports $port, $((port + 1)); $(nproc) CPUs)"; exit 0; }
      sleep 0.1
      i=$((i + 1))
    done
    msg "the node did not become idle in 30 s (state: ${state:-none})"
    "$0" logs "$dir"
    stop
    exit 1
    ;;
  watchdog)
    owner=$3 max=$4 start=$(date +%s)
    while kill -0 "$owner" 2>/dev/null && [ $(($(date +%s) - start)) -lt "$max" ]; do sleep 0.5; done
    echo "watchdog: owner $owner gone or ${max} s passed: stopping the cluster"
    MD_SLURM_WATCHDOG=1 stop
    ;;
  stop)
    stop
    ;;
  logs)
    for f in "$dir"/log/*.log; do
      [ -s "$f" ] || continue
      echo "--- ${f##*/} (end):"
      tail -n 25 "$f"
    done
    ;;
  *)
    echo "usage: cluster.sh start|stop|logs DIR" >&2
    exit 99
    ;;
esac
