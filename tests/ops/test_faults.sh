#!/usr/bin/env bash
# Faults on the CPU pipeline: a rank stopped with SIGSTOP
# or killed with SIGKILL mid-run ends the job non-zero within --timeout + 5 s
# with no output file; a checksum mismatch in one rank's block makes every
# rank exit with the same message before sampling (and --log-dir keeps it in
# every rank's own log); a plan that does not fit is refused before any
# weight is read.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir faults
sp_seed
sp_tiny "$work/m.h5"
sp_cond 512 "$work/cond.h5"
TIMEOUT=5
# Enough steps that the run is still sampling when a rank is hit.
ARGS=(--model "$work/m.h5" --cond "$work/cond.h5" --frames 9 --size 64x48 --steps 2000
      --seed $S --timeout $TIMEOUT)

no_output() { ! ls -A "$work" | grep -q -e '^out' -e '\.tmp-'; }

# mid-run SIGNAL: 3 ranks; once rank 0 reports a step, rank 1 gets SIGNAL.
hit() {
  local sig=$1 log="$work/$1.log"
  mpirun -np 3 "$SP_BIN" run "${ARGS[@]}" -o "$work/out-$sig.h5" > "$log" 2>&1 &
  MP=$!
  local i victim=
  for i in $(seq 300); do grep -q "step 2/" "$log" && break; sleep 0.1; done
  grep -q "step 2/" "$log" || { bad "$sig: the run never started sampling: $(tail -3 "$log")"; kill -9 $MP; MP=; return; }
  for p in $(pgrep -P $MP); do
    [ "$(tr '\0' '\n' < /proc/$p/environ | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')" = 1 ] && victim=$p
  done
  [ -n "$victim" ] || { bad "$sig: rank 1 not found"; kill -9 $MP; MP=; return; }
  local t0=$(date +%s.%N)
  kill -$sig $victim
  # A bounded wait: the job must end by itself within --timeout + 5 s.
  local limit=$((TIMEOUT + 5)) ended=0
  for i in $(seq $((limit * 10))); do kill -0 $MP 2>/dev/null || { ended=1; break; }; sleep 0.1; done
  local dt=$(echo "$(date +%s.%N) - $t0" | bc)
  if [ $ended = 0 ]; then
    bad "$sig: the job still runs $limit s after rank 1 got SIG$sig"
    kill -9 $MP; wait $MP 2>/dev/null; MP=
    kill -CONT $victim 2>/dev/null; kill -9 $victim 2>/dev/null
    return
  fi
  wait $MP; local rc=$?; MP=
  if [ $rc -ne 0 ] && no_output; then
    ok "SIG$sig on rank 1: job ended in ${dt%???????} s (limit $limit), exit $rc, no output: $(grep -m1 -e fatal -e 'exited on signal' "$log" | cut -c1-160)"
  else
    bad "SIG$sig: exit $rc, output: $(ls -A "$work"), log: $(grep -v 'step ' "$log" | tail -5)"
  fi
  # mpirun sends SIGCONT, SIGTERM, SIGKILL; allow a busy machine a moment.
  local st=
  for i in $(seq 50); do
    st=$(awk '{print $3}' /proc/$victim/stat 2>/dev/null); [ -z "$st" ] || [ "$st" = Z ] && break; sleep 0.1
  done
  [ -z "$st" ] || [ "$st" = Z ] || { bad "SIG$sig: rank 1 (pid $victim, state $st) outlived the job"; kill -CONT $victim; kill -9 $victim; }
}
hit STOP
grep -q "watchdog: no word from rank 1" "$work/STOP.log" && ok "SIGSTOP: the watchdog named the silent rank" \
  || bad "SIGSTOP: no watchdog message: $(grep -v 'step ' "$work/STOP.log" | tail -5)"
# The stopped rank, continued by mpirun before it ends the job, blames no one.
grep -q "^\[rank 1\] fatal: watchdog: no word from" "$work/STOP.log" \
  && bad "SIGSTOP: the stopped rank blamed another: $(grep '^\[rank 1\] fatal' "$work/STOP.log")" \
  || ok "SIGSTOP: only the running ranks name the stopped one"
hit KILL

# A corrupt block (one flipped byte in rank 1's block): the same message on
# every rank, in its stderr lines and its own --log-dir file, before sampling.
cp "$work/m.h5" "$work/bad.h5"
"$PY" - "$work/bad.h5" <<'PYEOF' || exit 1
import sys, h5py, numpy as np
p = sys.argv[1]
with h5py.File(p, "r") as f:
    d = f["/blocks/0002/ffn.0.weight"]
    off, n = d.id.get_offset(), d.id.get_storage_size()
pos = off + int(np.random.default_rng().integers(0, n))
with open(p, "r+b") as fh:
    fh.seek(pos); b = fh.read(1); fh.seek(pos); fh.write(bytes([b[0] ^ 0x40]))
PYEOF
echo "original" > "$work/keep.h5"
out=$(sp_last_wins mpirun -np 3 "$SP_BIN" run "${ARGS[@]}" --steps 3 --model "$work/bad.h5" --log-dir "$work/logs" -o "$work/keep.h5" 2>&1); rc=$?
if [ $rc -ne 0 ] && [ "$(cat "$work/keep.h5")" = original ] && ! echo "$out" | grep -q "step 1/"; then
  ok "corrupt block: exit $rc before sampling, existing output untouched"
else bad "corrupt block: exit $rc: $out"; fi
for r in 0 1 2; do
  line=$(echo "$out" | grep "^\[rank $r\] error:" ); flog=$(grep "error:" "$work/logs/rank-$r.log" 2>/dev/null)
  if [ "$(echo "$line" | wc -l)" = 1 ] && echo "$line" | grep -q "blocks/0002.*checksum mismatch" \
     && [ "$line" = "$flog" ]; then ok "corrupt block: rank $r: $(echo "$line" | cut -c1-140)"
  else bad "corrupt block: rank $r says '$line', its log file '$flog'"; fi
done

# A plan that does not fit: refused before loading (the corrupt model would
# fail while loading, so its checksum must never be reached).
out=$(sp_last_wins mpirun -np 2 "$SP_BIN" run "${ARGS[@]}" --steps 3 --model "$work/bad.h5" --budget "cuda:0,1mb;cuda:1,1mb" -o "$work/keep.h5" 2>&1); rc=$?
if [ $rc -eq 2 ] && echo "$out" | grep -q "\[rank 0\] error: plan: no plan fits" \
   && echo "$out" | grep -q "\[rank 1\] error: stopping: rank 0 .*planning" \
   && ! echo "$out" | grep -q checksum && [ "$(cat "$work/keep.h5")" = original ]; then
  ok "budget too small: exit 2 before loading: $(echo "$out" | grep -m1 -A1 'no plan fits' | tr '\n' ' ' | cut -c1-150)"
else bad "budget too small: exit $rc: $out"; fi

[ $fail -eq 0 ] && echo "faults: all checks passed" || echo "faults: FAILED"
exit $fail
