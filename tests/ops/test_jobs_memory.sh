#!/usr/bin/env bash
# A long-lived queue keeps its memory bounded: 1,000 tiny jobs through one
# `run --jobs PIPE` (the tiny model, 1 frame of 16x16, 1 step, no preview,
# each job writing the same output path, as a queue may). The script writes
# 10 lines, waits for their 10 JSON lines and reads the process's VmRSS from
# /proc/MP/status, then the other 990, and reads it again after job 1,000:
# the two agree within 5%. Every job must succeed.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir jobs-memory
sp_seed
N=${SP_MEMORY_JOBS:-1000}
sp_tiny "$work/m.h5"
"$PY" - "$work/c.h5" $S <<'PYEOF' || exit 1
import sys, h5py, numpy as np
r = np.random.default_rng(int(sys.argv[2]))
with h5py.File(sys.argv[1], "w") as f:
    f["context"] = r.standard_normal((int(r.integers(1, 8)), 4096)).astype(np.float32)
PYEOF
mkfifo "$work/q"
OMP_NUM_THREADS=1 "$SP_BIN" run --model "$work/m.h5" --frames 1 --size 16x16 --steps 1 --cfg 1 \
  --no-preview -q --json --jobs "$work/q" > "$work/out.jsonl" 2> "$work/err" &
MP=$!
exec 3>"$work/q"
feed() { for i in $(seq "$1" "$2"); do echo "cond=$work/c.h5 out=$work/o.h5 seed=$((S + i))"; done >&3; }
# wait_jobs K: until K JSON lines came out (or the run ended).
wait_jobs() {
  while [ "$(grep -c '"status"' "$work/out.jsonl")" -lt "$1" ]; do
    kill -0 $MP 2>/dev/null || return 1
    sleep 0.05
  done
}
rss() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' /proc/$MP/status; }
feed 1 10
wait_jobs 10 || { bad "the run ended before job 10: $(tail -3 "$work/err")"; exit 1; }
r10=$(rss)
t0=$SECONDS
feed 11 "$N"
wait_jobs "$N" || { bad "the run ended before job $N: $(tail -3 "$work/err")"; exit 1; }
rN=$(rss)
exec 3>&-
wait $MP; rc=$?; MP=
echo "VmRSS after job 10: $r10 kB, after job $N: $rN kB ($((SECONDS - t0)) s for the rest)"
okn=$(grep -c '"status":"ok"' "$work/out.jsonl")
[ $rc -eq 0 ] && [ "$okn" = "$N" ] && ok "$N jobs done, exit 0" || bad "exit $rc, $okn of $N ok: $(tail -3 "$work/err")"
if [ -n "$r10" ] && [ -n "$rN" ] && [ $((rN * 100)) -le $((r10 * 105)) ] && [ $((rN * 100)) -ge $((r10 * 95)) ]; then
  ok "resident memory bounded: $r10 kB after job 10, $rN kB after job $N (within 5%)"
else bad "resident memory: $r10 kB after job 10, $rN kB after job $N (more than 5% apart)"; fi
[ $fail -eq 0 ] && echo "jobs memory: all checks passed" || echo "jobs memory: FAILED"
exit $fail
