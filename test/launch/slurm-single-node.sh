#!/bin/sh
# Brings up a one-node Slurm (Debian slurm-wlm: munged, slurmctld, slurmd) on this host, as root,
# with every file in one directory, for test/launch/slurm.test.ts; `down DIR` stops it again.
#   slurm-single-node.sh up DIR      prints SLURM_CONF=DIR/slurm.conf once srun can run a step
#   slurm-single-node.sh down DIR
set -eu
cmd=$1
dir=$2
case "$cmd" in
up)
  mkdir -p "$dir/state" "$dir/spool" "$dir/munge" "$dir/log"
  chmod 0700 "$dir/munge"
  host=$(hostname -s)
  cpus=$(nproc)
  mem=$(awk '/MemTotal/ { print int($2 / 1024 / 2) }' /proc/meminfo)
  # A munge key of our own, and a munged whose socket lives in DIR.
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null
  chmod 0400 "$dir/munge/munge.key"
  /usr/sbin/munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/socket" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed"
  cat >"$dir/slurm.conf" <<EOF
ClusterName=fuzzfleet-test
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
SlurmctldPort=$((17000 + $$ % 1000))
SlurmdPort=$((18000 + $$ % 1000))
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
EOF
  export SLURM_CONF="$dir/slurm.conf"
  /usr/sbin/slurmctld -f "$SLURM_CONF"
  /usr/sbin/slurmd -f "$SLURM_CONF"
  i=0
  until srun -N1 -n1 -t 1 true 2>/dev/null; do
    i=$((i + 1))
    if [ "$i" -gt 30 ]; then
      echo "slurm did not come up within 30 s; see $dir/log" >&2
      exit 1
    fi
    sleep 1
  done
  echo "SLURM_CONF=$SLURM_CONF"
  ;;
down)
  pids=""
  for file in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
    [ -f "$file" ] && pids="$pids $(cat "$file")"
  done
  for pid in $pids; do kill "$pid" 2>/dev/null || true; done
  # Until each has exited (a zombie left for init counts as exited: its state says Z).
  i=0
  for pid in $pids; do
    while [ -d "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; do
      i=$((i + 1))
      [ "$i" -gt 100 ] && kill -9 "$pid" 2>/dev/null
      sleep 0.1
    done
  done
  ;;
*)
  echo "usage: $0 up|down DIR" >&2
  exit 2
  ;;
esac
