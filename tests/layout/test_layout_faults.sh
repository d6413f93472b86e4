#!/usr/bin/env bash
# The waits a layout adds are the watchdog's: on --layout 2x1x2, rank 1
# (rank 0's sequence-parallel partner: the all-to-all of every block) or
# rank 3 (replica 1's last stage: the exchange of velocities) stopped with
# SIGSTOP mid-run ends the job non-zero within --timeout + 5 s, with the
# watchdog naming the silent rank and no output file.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir layout-faults
sp_seed
sp_tiny "$work/m.h5"
sp_cond 512 "$work/cond.h5"
TIMEOUT=5
ARGS=(--model "$work/m.h5" --cond "$work/cond.h5" --frames 9 --size 64x48 --steps 2000 --cfg 4
      --seed $S --timeout $TIMEOUT --layout 2x1x2)

stop() { # the world rank to stop
  local who=$1 log="$work/stop$1.log" victim= i
  mpirun -np 4 "$SP_BIN" run "${ARGS[@]}" -o "$work/out$who.h5" > "$log" 2>&1 &
  MP=$!
  for i in $(seq 300); do grep -q "step 2/" "$log" && break; sleep 0.1; done
  grep -q "step 2/" "$log" || { bad "rank $who: the run never started sampling: $(tail -3 "$log")"; kill -9 $MP; MP=; return; }
  for p in $(pgrep -P $MP); do
    [ "$(tr '\0' '\n' < /proc/$p/environ | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')" = "$who" ] && victim=$p
  done
  [ -n "$victim" ] || { bad "rank $who not found"; kill -9 $MP; MP=; return; }
  kill -STOP $victim
  local limit=$((TIMEOUT + 5)) ended=0
  for i in $(seq $((limit * 10))); do kill -0 $MP 2>/dev/null || { ended=1; break; }; sleep 0.1; done
  if [ $ended = 0 ]; then
    bad "rank $who stopped: the job still runs $limit s later"
    kill -9 $MP; wait $MP 2>/dev/null; MP=
    kill -CONT $victim 2>/dev/null; kill -9 $victim 2>/dev/null
    return
  fi
  wait $MP; local rc=$?; MP=
  kill -CONT $victim 2>/dev/null
  if [ $rc -ne 0 ] && [ ! -e "$work/out$who.h5" ] && grep -q "watchdog: no word from rank $who" "$log"; then
    ok "rank $who stopped: the job ended (exit $rc), the watchdog named it, no output"
  else
    bad "rank $who stopped: exit $rc: $(grep -v 'step ' "$log" | tail -4)"
  fi
}
stop 1
stop 3
exit $fail
