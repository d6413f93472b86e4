#!/usr/bin/env bash
# --jobs - and --jobs FIFO: a queue read as it arrives, on 1 and 2 ranks.
#   - stdin: jobs of two shapes with a bad line between them; the good ones
#     are bit-identical to separate one-process runs, the bad one fails alone
#     (its line named), --json prints one line per finished job (status,
#     error line, outputs, settings), the end of the input ends the run;
#   - a named pipe whose writer sends the second job only after the first
#     job's JSON line came out: each line runs as it arrives;
#   - a line larger than the plan (--frames/--size), NUL bytes and a long
#     line fail alone;
#   - a rank killed while rank 0 waits for the next line: the run ends
#     within --timeout + 5 s.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir jobs-stream
sp_seed
sp_tiny "$work/m.h5"
sp_cond 64 "$work/a.h5"
B=(--model "$work/m.h5" --steps 2 --frames 5 --size 32x48 --timeout 20)
same() { # A B: the latents are bit-identical
  "$PY" - "$1" "$2" <<'PYEOF'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r")["latents"][...] for p in sys.argv[1:3])
sys.exit(0 if a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32)) else 1)
PYEOF
}
# The references: separate one-process runs.
"$SP_BIN" run "${B[@]}" -q --cond "$work/a.h5" --seed $((S + 1)) -o "$work/r1.h5" || exit 1
sp_last_wins "$SP_BIN" run "${B[@]}" -q --cond "$work/a.h5" --seed $((S + 2)) --frames 1 --size 16x32 --cfg 1 \
  -o "$work/r2.h5" || exit 1

for np in 1 2; do
  rm -f "$work"/s*.h5*
  out=$(printf '%s\n' "cond=$work/a.h5 out=$work/s1.h5 seed=$((S + 1))" \
    "cond=$work/a.h5 out=$work/sx.h5 size=33x48" \
    "cond=$work/a.h5 out=$work/s2.h5 seed=$((S + 2)) frames=1 size=16x32 cfg=1" \
    | timeout 120 mpirun -np $np "$SP_BIN" run "${B[@]}" -q --jobs - --json 2>"$work/err"); rc=$?
  if [ $rc -ne 0 ] && same "$work/s1.h5" "$work/r1.h5" && same "$work/s2.h5" "$work/r2.h5" && [ ! -e "$work/sx.h5" ]; then
    ok "np $np: stdin: two shapes bit-identical to separate runs, the bad line alone failed (exit $rc)"
  else bad "np $np: stdin: exit $rc: $(tail -3 "$work/err")"; fi
  grep -q "error: stdin:2: size=33x48" "$work/err" && grep -q "jobs: 2 of 3 done, 1 failed (stdin)" "$work/err" \
    && ok "np $np: the bad line named, the summary" || bad "np $np: messages: $(cat "$work/err")"
  if printf '%s\n' "$out" | "$PY" -c '
import sys, json
L = [json.loads(l) for l in sys.stdin if l.strip()]
jobs = [l["job"] for l in L if "job" in l]
assert len(jobs) == 3 and "plan" in L[-1], L
a, x, b = jobs
assert [j["status"] for j in jobs] == ["ok", "error", "ok"], jobs
assert x["line"] == 2 and "size=33x48" in x["error"] and "out" in x, x
assert a["out"].endswith("s1.h5") and a["preview"].endswith("s1.h5.png") and a["frames"] == 5
assert a["size"] == "32x48" and a["steps"] == 2 and a["cfg"] == 5 and a["sampler"] == "unipc"
assert b["frames"] == 1 and b["size"] == "16x32" and b["cfg"] == 1 and b["seconds"] > 0
assert "error" not in a and "shift" in a and "seed" in a
'; then ok "np $np: --json: one line per job (ok, error with its line, ok), then the summary"
  else bad "np $np: --json lines: $out"; fi

  # A named pipe: the second line is written only after the first job's
  # JSON line has come out, so each job ran as its line arrived.
  rm -f "$work/q" "$work"/s*.h5*; mkfifo "$work/q"
  mpirun -np $np "$SP_BIN" run "${B[@]}" -q --jobs "$work/q" --json > "$work/q.out" 2>"$work/q.err" &
  MP=$!
  exec 3>"$work/q"
  echo "cond=$work/a.h5 out=$work/s1.h5 seed=$((S + 1))" >&3
  for i in $(seq 600); do grep -q '"status"' "$work/q.out" && break; sleep 0.1; done
  n1=$(grep -c '"status":"ok"' "$work/q.out")
  printf 'cond=%s out=%s seed=%d frames=1 size=16x32 cfg=1\n' "$work/a.h5" "$work/s2.h5" $((S + 2)) >&3
  exec 3>&-
  ended=0
  for i in $(seq 600); do kill -0 $MP 2>/dev/null || { ended=1; break; }; sleep 0.1; done
  [ $ended = 1 ] && wait $MP; rc=$?; [ $ended = 1 ] || kill -9 $MP; MP=
  if [ $ended = 1 ] && [ $rc -eq 0 ] && [ "$n1" = 1 ] && [ "$(grep -c '"status":"ok"' "$work/q.out")" = 2 ] \
     && same "$work/s1.h5" "$work/r1.h5" && same "$work/s2.h5" "$work/r2.h5"; then
    ok "np $np: FIFO: a job per line as it arrives, EOF ends the run (exit 0)"
  else bad "np $np: FIFO: ended $ended exit $rc first $n1: $(tail -3 "$work/q.err")"; fi
done

# Lines that fail alone: larger than the plan, a NUL byte, too long; the good
# line after them runs.
rm -f "$work"/s*.h5*
long=$(head -c 9000 /dev/zero | tr '\0' x)
out=$( { echo "cond=$work/a.h5 out=$work/s3.h5 frames=9"; printf 'cond=%s\0 out=%s/s4.h5\n' "$work/a.h5" "$work";
  echo "cond=$work/a.h5 out=$work/s5.h5 $long"; echo "cond=$work/a.h5 out=$work/s1.h5 seed=$((S + 1))"; } \
  | timeout 60 "$SP_BIN" run "${B[@]}" -q --jobs - 2>&1); rc=$?
if [ $rc -eq 2 ] && echo "$out" | grep -q "stdin:1: frames=9 size=32x48 is .* tokens, more than the .* planned for" \
   && echo "$out" | grep -q "stdin:2: line holds a NUL byte" && echo "$out" | grep -q "stdin:3: line longer than" \
   && same "$work/s1.h5" "$work/r1.h5" && [ ! -e "$work/s3.h5" ]; then ok "lines beyond the plan, with NUL, too long: each fails alone"
else bad "lines that fail alone: exit $rc: $out"; fi

# A rank killed while rank 0 waits for the next line: no hang.
rm -f "$work/q"; mkfifo "$work/q"
sp_last_wins_args K mpirun -np 2 "$SP_BIN" run "${B[@]}" --timeout 5 --jobs "$work/q"
"${K[@]}" > "$work/k.log" 2>&1 &
MP=$!
exec 3>"$work/q"
echo "cond=$work/a.h5 out=$work/s6.h5 seed=$((S + 1))" >&3
for i in $(seq 600); do grep -q "wrote .*s6.h5" "$work/k.log" && break; sleep 0.1; done
victim=
for p in $(pgrep -P $MP); do
  [ "$(tr '\0' '\n' < /proc/$p/environ | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')" = 1 ] && victim=$p
done
if [ -n "$victim" ] && grep -q "wrote .*s6.h5" "$work/k.log"; then
  kill -9 $victim
  ended=0
  for i in $(seq 100); do kill -0 $MP 2>/dev/null || { ended=1; break; }; sleep 0.1; done
  [ $ended = 1 ] && wait $MP; rc=$?
  if [ $ended = 1 ] && [ $rc -ne 0 ]; then ok "rank 1 killed while rank 0 waits for a line: the run ended (exit $rc)"
  else bad "rank 1 killed: the run still runs 10 s later"; kill -9 $MP; fi
else bad "kill test: first job not written or rank 1 not found: $(tail -3 "$work/k.log")"; kill -9 $MP; fi
MP=
exec 3>&-

[ $fail -eq 0 ] && echo "jobs stream: all checks passed" || echo "jobs stream: FAILED"
exit $fail
