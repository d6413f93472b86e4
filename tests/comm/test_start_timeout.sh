#!/usr/bin/env bash
# --timeout covers start-up, before the watchdog runs:
#   - one rank starts 60 s late, so the other waits inside MPI_Init: the
#     job ends within the timeout (plus launch overhead), exit 1, with the
#     guard's line naming MPI_Init;
#   - one rank blocks after MPI_Init, opening its --log-dir file (a FIFO
#     nobody reads), so the other waits in the first collective: the job
#     ends the same way, with the line saying the watchdog was not reached;
#   - the same run without a stall passes with that short timeout (the
#     guard is disarmed once the watchdog runs).
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir comm-start-timeout
T=$work
TIMEOUT=4
LIMIT=30 # seconds a guarded start-up may take to end, launch and teardown included
"$PY" -c 'import sys,h5py,numpy as np
with h5py.File(sys.argv[1],"w") as f:
    f["context"]=np.random.default_rng().standard_normal((8,4096)).astype(np.float32)' "$T/c.h5" ||
  exit 1
ARGS=(run --model synth:wan2.1-tiny --cond "$T/c.h5" --frames 1 --size 16x16 --steps 1 --cfg 1
      -q --timeout $TIMEOUT)

# run CASE WRAPPER-SCRIPT [extra args]: mpirun -np 2 with rank 1 under the wrapper.
run() {
  local name=$1 wrap=$2; shift 2
  local t0 t1
  t0=$(date +%s)
  timeout 120 mpirun -np 2 bash -c "$wrap"' exec "$0" "$@"' "$SP_BIN" "${ARGS[@]}" "$@" \
    -o "$T/$name.h5" > "$T/$name.log" 2>&1
  RC=$?
  t1=$(date +%s)
  DT=$((t1 - t0))
}

run late 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then sleep 60; fi;'
if [ $RC = 1 ] && [ $DT -le $LIMIT ] &&
   grep -q "^\[rank 0\] error: start-up: MPI_Init did not return within $TIMEOUT s (--timeout)" "$T/late.log"; then
  ok "a rank 60 s late: rank 0's MPI_Init guard ends the job in $DT s, exit 1"
else
  bad "a rank 60 s late: exit $RC after $DT s"; cat "$T/late.log"
fi

mkdir "$T/logs" && mkfifo "$T/logs/rank-1.log"
run blocked '' --log-dir "$T/logs"
if [ $RC = 1 ] && [ $DT -le $LIMIT ] &&
   grep -q "fatal: start-up: the ranks did not all reach the watchdog within $TIMEOUT s" "$T/blocked.log"; then
  ok "a rank blocked after MPI_Init: the guard ends the job in $DT s, exit 1"
else
  bad "a rank blocked after MPI_Init: exit $RC after $DT s"; cat "$T/blocked.log"
fi

run plain ''
if [ $RC = 0 ] && [ -s "$T/plain.h5" ]; then
  ok "no stall: the run passes with --timeout $TIMEOUT"
else
  bad "no stall: exit $RC"; cat "$T/plain.log"
fi
exit $fail
