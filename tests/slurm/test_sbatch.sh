#!/usr/bin/env bash
# launch/slurm/one-node.sbatch under a real Slurm, as a user submits it:
# this script starts munged, slurmctld and slurmd on this host with a
# configuration of its own (a temporary folder: keys, state, logs, ports;
# nothing system-wide is touched), declares the node as the sbatch asks
# for (64 CPUs and 4 GPUs, so --gpus-per-task=1 is granted),
# submits the sbatch unchanged with the tiny model (CPU backend, 4 tasks),
# waits for it, and compares its latents bit for bit with mpirun -np 4.
#
# Missing Slurm or munge is a missing tool (common/skip.sh: a failure in
# CI, launch/deps.sh installs them). Daemons that cannot start here (not
# root, no permission to run them) skip with the reason and the daemons'
# log lines; nothing skips silently.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
[ "$(id -u)" = 0 ] || { echo "skip: slurm cannot start here: slurmd must run as root to start jobs (uid $(id -u))"; exit 77; }
export PATH="$PATH:/usr/sbin:/sbin" # the daemons
for tool in munged slurmctld slurmd sbatch sinfo; do
  command -v $tool >/dev/null 2>&1 ||
    sp_skip "$tool not found: run launch/deps.sh (slurmctld, slurmd, slurm-client, munge)"
done

T=$(mktemp -d /tmp/sp-slurm.XXXXXX)
chmod 0700 "$T"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$T"
}
trap cleanup EXIT
# A daemon that cannot start here: skip with the reason (its log).
cannot_start() {
  echo "skip: slurm cannot start here: $1"
  for f in "$T"/munged.log "$T"/slurmctld.log "$T"/slurmd.log; do
    [ -s "$f" ] && { echo "--- $f"; tail -n 15 "$f"; }
  done
  exit 77
}
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# munge: its own key and socket.
mkdir -m 0700 "$T/munge"
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none && chmod 0400 "$T/munge/munge.key"
munged -F --force --key-file="$T/munge/munge.key" --socket="$T/munge/sock" \
  --pid-file="$T/munge/pid" --seed-file="$T/munge/seed" --log-file="$T/munged.log" \
  > "$T/munged.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do [ -S "$T/munge/sock" ] && break; sleep 0.1; done
[ -S "$T/munge/sock" ] || cannot_start "munged did not open its socket"

mkdir -p "$T/state" "$T/spool" "$T/job"
MEM_MB=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)
export SLURM_CONF="$T/slurm.conf"
cat > "$SLURM_CONF" <<CONF
ClusterName=sptest
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/sock
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
GresTypes=gpu
# The node as the sbatch example asks for, not as this machine is: the
# CPU backend runs anywhere.
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 CPUs=64 RealMemory=$MEM_MB Gres=gpu:4 State=UNKNOWN
PartitionName=sp Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
# Four GPUs slurmd can count: files standing in for the device nodes
# (Slurm then sets each task's CUDA_VISIBLE_DEVICES, which the CPU build
# ignores).
mkdir "$T/dev" && touch "$T"/dev/gpu{0,1,2,3}
echo "Name=gpu File=$T/dev/gpu[0-3]" > "$T/gres.conf"

slurmctld -D -i -f "$SLURM_CONF" > "$T/slurmctld.out" 2>&1 &
PIDS+=($!)
slurmd -D -N localhost -f "$SLURM_CONF" > "$T/slurmd.out" 2>&1 &
PIDS+=($!)
up=0
for _ in $(seq 100); do
  if sinfo -h -n localhost -o %t 2>/dev/null | grep -qx idle; then up=1; break; fi
  sleep 0.3
done
if [ $up = 0 ]; then
  cat "$T/slurmctld.out" "$T/slurmd.out" >> "$T/slurmd.log" 2>/dev/null
  cannot_start "the node did not come up idle within 30 s ($(sinfo -h -o '%t %E' 2>&1 | head -1))"
fi
echo "slurm: $(sinfo -V), node localhost idle"

# The job: the tiny model, CPU backend, the sbatch as it is.
"$SP_BIN" init --arch wan2.1-tiny --seed $RANDOM -q -o "$T/m.h5" || exit 1
"$PY" - "$T/c.h5" <<'PYEOF' || exit 1
import sys, h5py, numpy as np
r = np.random.default_rng()
with h5py.File(sys.argv[1], "w") as f:
    f["context"] = r.standard_normal((int(r.integers(1, 64)), 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((int(r.integers(1, 64)), 4096)).astype(np.float32)
PYEOF
SET=(FRAMES=5 SIZE=32x48 STEPS=2)
fail=0
t0=$(date +%s)
(cd "$T/job" && env BIN="$SP_BIN" MODEL="$T/m.h5" COND="$T/c.h5" "${SET[@]}" \
   timeout 300 sbatch --wait --parsable "$SP_SRC/launch/slurm/one-node.sbatch" > "$T/jobid")
rc=$?
job=$(cut -d';' -f1 < "$T/jobid")
echo "sbatch: job ${job:-?} exit $rc after $(( $(date +%s) - t0 )) s"
if [ $rc != 0 ] || [ ! -s "$T/job/out-$job.h5" ]; then
  echo "FAIL the sbatch job did not write out-$job.h5 (exit $rc)"
  for f in "$T"/job/staticpipe-*.out "$T"/job/logs-*/rank-*.log "$T/slurmd.log"; do
    [ -s "$f" ] && { echo "--- $f"; tail -n 30 "$f"; }
  done
  exit 1
fi
# Four ranks of one MPI job (tasks that failed to connect would each be
# a rank 0 of its own).
if [ "$(cd "$T/job/logs-$job" && echo rank-*.log)" = "rank-0.log rank-1.log rank-2.log rank-3.log" ]; then
  echo "ok   ranks 0-3 of one job, one log each"
else
  echo "FAIL rank logs: $(ls "$T/job/logs-$job")"; fail=1
fi

mpirun -np 4 "$SP_BIN" run --model "$T/m.h5" --cond "$T/c.h5" --frames 5 --size 32x48 --steps 2 \
  -q -o "$T/ref.h5" || { echo "FAIL mpirun -np 4"; exit 1; }
if "$PY" -c 'import sys,h5py
a=h5py.File(sys.argv[1])["latents"][...]; b=h5py.File(sys.argv[2])["latents"][...]
sys.exit(0 if a.shape == b.shape and a.tobytes() == b.tobytes() else 1)' "$T/job/out-$job.h5" "$T/ref.h5"; then
  echo "ok   sbatch one-node.sbatch (srun, 4 tasks) latents bit-identical to mpirun -np 4"
else
  echo "FAIL sbatch latents differ from mpirun -np 4"; fail=1
fi

# staticpipe bench inside an allocation, its 2-rank runs started by srun
# with the command line bench builds for it.
(cd "$T/job" && timeout 300 sbatch --wait --parsable --ntasks=2 --cpus-per-task=1 \
   --output="$T/job/bench-%j.out" --wrap "$SP_BIN bench --model $T/m.h5 --cond $T/c.h5 \
   --ranks 2 --frames 5 --size 32x48 --steps 2 --launcher 'srun --mpi=pmix' -o $T/bench" \
   > /dev/null)
rc=$?
if [ $rc = 0 ] && "$PY" -c 'import json,sys
rows = json.load(open(sys.argv[1]))["rows"]
run = json.load(open(sys.argv[2]))  # what the run printed: one job of two ranks
sys.exit(0 if len(rows) == 1 and rows[0]["status"] == 0 and rows[0]["ranks"] == 2
         and len(run["plan"]["ranks"]) == 2 else 1)' "$T/bench/bench.json" "$T/bench/run-0-1.json"; then
  echo "ok   bench --launcher srun: its 2-rank run passes under srun"
else
  echo "FAIL bench --launcher srun (exit $rc)"; tail -n 20 "$T"/job/bench-*.out "$T"/bench/run-*.log
  fail=1
fi
exit $fail
