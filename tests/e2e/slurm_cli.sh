#!/usr/bin/env bash
# End-to-end: README's Slurm line, `srun --mpi=pmix dtrain train`, on a private one-node Slurm this test
# starts itself (its own munged, slurmctld and slurmd on their own socket, ports and folders; Debian's
# slurm-wlm) and stops at exit: 2 tasks on the node train {batch: 8} over 2 processes to the bits of one
# process (`dtrain diff`: identical under train.bitwise), and a task count the mesh cannot take is an error
# naming it. SKIPPED where Slurm or root is missing, or dtrain has no MPI.
# Usage: slurm_cli.sh DTRAIN [SOURCE_DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/start.sh" "$@"  # $lib, $dtrain, $work (the cwd), expect, check, latest
for tool in munged slurmctld slurmd srun sinfo; do
  if ! command -v "$tool" >/dev/null; then
    skip_part "$tool not installed (Debian: slurm-wlm)"
    report
  fi
done
if [[ $(id -u) != 0 ]] || ! mpi_runnable "$dtrain"; then
  skip_part "not root, or dtrain built without MPI"
  report
fi
source "$lib/mnist_fixture.sh"  # data/ (512 training, 128 test images)

# The private cluster: everything under $work/slurm, its daemons on loopback at ports picked free, stopped by
# PID at exit.
s="$work/slurm"
mkdir -p "$s/ctld" "$s/d"
chmod 700 "$s"
dd if=/dev/urandom of="$s/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$s/munge.key"
pids=()
stop() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap stop EXIT
munged --force --foreground --socket="$s/munge.sock" --key-file="$s/munge.key" --pid-file="$s/munged.pid" \
  --log-file="$s/munged.log" --seed-file="$s/munged.seed" >"$s/munged.out" 2>&1 &
pids+=($!)
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
node=$(hostname)
cat >"$s/slurm.conf" <<CONF
ClusterName=dtraintest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
AuthInfo=socket=$s/munge.sock
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$s/ctld
SlurmdSpoolDir=$s/d
SlurmctldPidFile=$s/slurmctld.pid
SlurmdPidFile=$s/slurmd.pid
SlurmctldLogFile=$s/slurmctld.log
SlurmdLogFile=$s/slurmd.log
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
export SLURM_CONF="$s/slurm.conf"
sleep 1
slurmctld -D -c -f "$SLURM_CONF" >"$s/slurmctld.out" 2>&1 &
pids+=($!)
sleep 1
slurmd -D -f "$SLURM_CONF" -N "$node" >"$s/slurmd.out" 2>&1 &
pids+=($!)
up=false
for _ in $(seq 1 30); do
  if sinfo -h -o %t 2>/dev/null | grep -q idle; then up=true; break; fi
  sleep 1
done
if ! $up; then  # this machine's Slurm cannot run here (a hostname that does not resolve, no /proc...): not dtrain's
  skip_part "the private Slurm did not come up: $(tail -3 "$s/slurmctld.log" "$s/slurmd.log" 2>/dev/null | tr '\n' ' ')"
  report
fi

config dp "{batch: 8}" "[batch, unsharded]" "{}"
sed -i 's/^train: {/train: {bitwise: true, /' dp.yaml
expect 0 "test accuracy" -- train --config dp.yaml --set checkpoint.dir=one --run-dir run_one
rc=0
timeout 300 srun -N 1 -n 2 --mpi=pmix "$dtrain" train --config dp.yaml --set checkpoint.dir=two \
  --run-dir run_two </dev/null >srun.log 2>&1 || rc=$?
check "srun -N 1 -n 2 --mpi=pmix dtrain train exits 0 (got $rc): $(tail -3 srun.log)" test "$rc" = 0
check "it trains over 2 processes" grep -q "over 2 processes" srun.log
expect 0 "^verdict: identical" -- diff one two
# 3 tasks cannot split 8 devices evenly: refused, naming the count (--overcommit: 3 tasks on fewer cores).
rc=0
timeout 120 srun -N 1 -n 3 --overcommit --mpi=pmix "$dtrain" train --config dp.yaml --set checkpoint.dir=three \
  --run-dir run_three </dev/null >srun3.log 2>&1 || rc=$?
check "srun -n 3 is refused with exit 2 (got $rc): $(tail -2 srun3.log)" test "$rc" = 2
check "naming the 3 processes" grep -q "3 processes" srun3.log
report
