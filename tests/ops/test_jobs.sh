#!/usr/bin/env bash
# --jobs: 5 jobs with one bad line on a 2-rank pipeline:
# the 4 good ones give outputs bit-identical to separate runs of the same
# settings, the bad line fails with one clear message naming file and line,
# a summary says 4 of 5, and the exit status is non-zero.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir jobs
sp_seed
sp_tiny "$work/m.h5"
"$PY" - "$work" $S <<'PYEOF' || exit 1
import sys, h5py, numpy as np
d, r = sys.argv[1], np.random.default_rng(int(sys.argv[2]))
for name in ("a", "b"):
    with h5py.File(f"{d}/{name}.h5", "w") as f:
        f["context"] = r.standard_normal((int(r.integers(1, 512)), 4096)).astype(np.float32)
        f["context_null"] = r.standard_normal((int(r.integers(1, 512)), 4096)).astype(np.float32)
with h5py.File(f"{d}/noise.h5", "w") as f:
    f["noise"] = r.standard_normal((16, 3, 8, 6)).astype(np.float32)
PYEOF
B=(--model "$work/m.h5" -q --steps 3 --frames 9 --size 64x48)
# Jobs differ in prompt, seed/noise, cfg, sampler, steps and shape.
cat > "$work/jobs.txt" <<JOBS
# five jobs, one of them bad
cond=$work/a.h5 out=$work/j1.h5 seed=$((S + 1))
cond=$work/b.h5 out=$work/j2.h5 noise=$work/noise.h5 cfg=1 sampler=euler   # conditional only

cond=$work/a.h5 out=$work/j3.h5 seed=$((S + 2)) frames=10
cond=$work/b.h5 out=$work/j4.h5 seed=$((S + 3)) size=32x64 steps=2 shift=3
cond=$work/a.h5 out=$work/j5.h5 seed=$((S + 4)) cfg=3.5
JOBS
out=$(mpirun -np 2 "$SP_BIN" run "${B[@]}" --jobs "$work/jobs.txt" 2>&1); rc=$?
echo "$out" | grep -e error -e "jobs:" | sed 's/^/   /'
[ $rc -ne 0 ] && ok "exit $rc (one job failed)" || bad "exit 0 although a job failed"
n=$(echo "$out" | grep -c "error:")
if [ "$n" -eq 1 ] && echo "$out" | grep -q "error: $work/jobs.txt:5: frames=10 is not of the form 4k+1"; then
  ok "bad line: one message naming the file and line"
else bad "bad line: $n error lines: $out"; fi
echo "$out" | grep -q "jobs: 4 of 5 done, 1 failed" && ok "summary" || bad "no summary: $out"
[ ! -e "$work/j3.h5" ] && ok "no output for the bad line" || bad "j3.h5 exists"

check() { # job settings...
  local j=$1; shift
  sp_last_wins "$SP_BIN" run "${B[@]}" "$@" -o "$work/s$j.h5" 2>"$work/s$j.err" || { bad "separate run $j: $(cat "$work/s$j.err")"; return; }
  sp_same "$work/j$j.h5" "$work/s$j.h5" && ok "job $j bit-identical to its separate run" || bad "job $j differs from its separate run"
}
check 1 --cond "$work/a.h5" --seed $((S + 1))
check 2 --cond "$work/b.h5" --noise "$work/noise.h5" --cfg 1 --sampler euler
check 4 --cond "$work/b.h5" --seed $((S + 3)) --size 32x64 --steps 2 --shift 3
check 5 --cond "$work/a.h5" --seed $((S + 4)) --cfg 3.5

# A job whose input fails at run time fails alone; all good: exit 0.
printf 'cond=%s out=%s\ncond=%s/missing.h5 out=%s\n' "$work/a.h5" "$work/k1.h5" "$work" "$work/k2.h5" > "$work/j2.txt"
out=$(mpirun -np 2 "$SP_BIN" run "${B[@]}" --jobs "$work/j2.txt" 2>&1); rc=$?
if [ $rc -eq 2 ] && [ -e "$work/k1.h5" ] && [ ! -e "$work/k2.h5" ] && echo "$out" | grep -q "\[rank 1\] error: job failed: rank 0 .*missing.h5" \
   && echo "$out" | grep -q "jobs: 1 of 2 done"; then ok "missing cond in a job: that job fails, the other is written"
else bad "missing cond job (exit $rc): $out"; fi
printf 'cond=%s out=%s seed=7\n' "$work/b.h5" "$work/g1.h5" > "$work/j3.txt"
mpirun -np 2 "$SP_BIN" run "${B[@]}" --jobs "$work/j3.txt" 2>/dev/null && [ -e "$work/g1.h5" ] && ok "all jobs good: exit 0" || bad "good jobs file failed"
out=$("$SP_BIN" run "${B[@]}" --jobs "$work/none.txt" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "none.txt: cannot open" && ok "missing jobs file: exit 2" || bad "missing jobs file: $rc $out"

# Independent jobs fill the pipeline: on 3 ranks, 3 jobs of one shape run
# in flight together and each still equals its separate run.
printf 'cond=%s out=%s seed=%d\ncond=%s out=%s seed=%d cfg=3.5\ncond=%s out=%s noise=%s cfg=1 sampler=euler\n' \
  "$work/a.h5" "$work/f1.h5" $((S + 1)) "$work/a.h5" "$work/f5.h5" $((S + 4)) "$work/b.h5" "$work/f2.h5" "$work/noise.h5" > "$work/j4.txt"
out=$(mpirun -np 3 "$SP_BIN" run --model "$work/m.h5" --steps 3 --frames 9 --size 64x48 --jobs "$work/j4.txt" 2>&1); rc=$?
if [ $rc -eq 0 ] && echo "$out" | grep -q "3 jobs in flight together"; then ok "3 ranks: 3 jobs in flight together"
else bad "jobs in flight (exit $rc): $(echo "$out" | grep -e error -e flight)"; fi
for k in 1 5 2; do
  sp_same "$work/f$k.h5" "$work/s$k.h5" && ok "in flight: job $k bit-identical to its separate run" || bad "in flight: job $k differs"
done

[ $fail -eq 0 ] && echo "jobs: all checks passed" || echo "jobs: FAILED"
exit $fail
