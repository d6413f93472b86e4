#!/usr/bin/env bash
# One culprit for the whole job (comm/watchdog.c, "Blame"): in a 3- and a
# 4-rank pipeline on the CPU, one rank (chosen at random) stopped with
# SIGSTOP mid-run: the job ends non-zero within --timeout + 5 s with no
# output, every surviving rank prints exactly one watchdog line, and each
# of those lines names the stopped rank (no survivor blames another).
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir watchdog-blame
sp_seed
RANDOM=$S
sp_tiny "$work/m.h5"
sp_cond 512 "$work/cond.h5"
TIMEOUT=5
ARGS=(--model "$work/m.h5" --cond "$work/cond.h5" --frames 9 --size 64x48 --steps 2000 --seed $S
      --timeout $TIMEOUT)

stop() { # RANKS VICTIM
  local np=$1 who=$2 log="$work/np$1.log" victim= i
  : > "$log"
  mpirun -np "$np" "$SP_BIN" run "${ARGS[@]}" -o "$work/out$np.h5" > "$log" 2>&1 &
  MP=$!
  for i in $(seq 300); do grep -q "step 2/" "$log" && break; sleep 0.1; done
  grep -q "step 2/" "$log" || { bad "$np ranks: never sampled: $(tail -3 "$log")"; kill -9 $MP; MP=; return; }
  for p in $(pgrep -P $MP); do
    [ "$(tr '\0' '\n' < /proc/$p/environ | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')" = "$who" ] && victim=$p
  done
  [ -n "$victim" ] || { bad "$np ranks: rank $who not found"; kill -9 $MP; MP=; return; }
  kill -STOP $victim
  local limit=$((TIMEOUT + 5)) ended=0
  for i in $(seq $((limit * 10))); do kill -0 $MP 2>/dev/null || { ended=1; break; }; sleep 0.1; done
  if [ $ended = 0 ]; then
    bad "$np ranks, rank $who stopped: the job still runs $limit s later"
    kill -9 $MP; wait $MP 2>/dev/null; MP=
    kill -CONT $victim 2>/dev/null; kill -9 $victim 2>/dev/null
    return
  fi
  wait $MP; local rc=$?; MP=
  kill -CONT $victim 2>/dev/null
  [ $rc -ne 0 ] && [ ! -e "$work/out$np.h5" ] && ok "$np ranks, rank $who stopped: exit $rc, no output" \
    || bad "$np ranks, rank $who stopped: exit $rc, output: $(ls "$work")"
  local r lines
  for r in $(seq 0 $((np - 1))); do
    [ "$r" = "$who" ] && continue
    lines=$(grep "^\[rank $r\] fatal: watchdog" "$log")
    if [ "$(printf '%s' "$lines" | grep -c .)" = 1 ] && echo "$lines" | grep -q "watchdog: no word from rank $who "; then
      ok "$np ranks: rank $r names rank $who: $(echo "$lines" | cut -c1-120)"
    else
      bad "$np ranks: rank $r's watchdog lines do not name rank $who once: '$lines'"
    fi
  done
  grep "fatal: watchdog: no word from rank" "$log" | grep -v "no word from rank $who " \
    && bad "$np ranks: a line blames another rank than $who" || true
}
stop 3 $((RANDOM % 3))
stop 4 $((RANDOM % 4))
[ $fail -eq 0 ] && echo "watchdog blame: all checks passed" || echo "watchdog blame: FAILED"
exit $fail
