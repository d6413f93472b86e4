#!/usr/bin/env bash
# run --speed: replicas of unequal speed take shares of a step's
# micro-batches in proportion. Under mpirun on the CPU backend: two CFG
# branches on two replicas split 1:1 whatever the speeds; two videos in
# flight (--jobs, four micro-batches) at speeds 1,3 split 1:3, and per rank
# 1,1,3,3 on 2x1x2 the same (a replica at its slowest rank's speed), as the
# log line says and as the trace shows (the head spans of step 0 on each
# replica); the planner's split gives the faster pipeline rank more
# blocks; every output bit-identical to its one-process run; bad lists
# refused with one line naming --speed.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir layout-speed
sp_seed
sp_tiny "$work/m.h5"
sp_cond 512 "$work/a.h5" "$work/b.h5"
# heads TRACE R S U: the head spans of step 0 per replica, "n0:n1"
heads() {
  "$PY" - "$@" <<'PYEOF'
import json, sys
t = json.load(open(sys.argv[1]))
R, S, U = (int(x) for x in sys.argv[2:5])
ev = t["traceEvents"] if isinstance(t, dict) else t
n = [0] * R
for e in ev:
    a = e.get("args", {})
    if e.get("name") == "head" and a.get("step") == 0:
        rank = e["pid"]
        if rank % U == 0 and (rank // U) % S == S - 1:  # u = 0 of the last stage
            n[rank // (S * U)] += 1
print(":".join(str(x) for x in n))
PYEOF
}
A=(--model "$work/m.h5" --frames 9 --size 48x48 --steps 2)

# 1. two CFG branches, two replicas at 1 and 3: 1:1, bit-identical
"$SP_BIN" run "${A[@]}" --cond "$work/a.h5" --seed $S --cfg 4.5 -q -o "$work/one.h5" || exit 1
if mpirun -np 2 "$SP_BIN" run "${A[@]}" --cond "$work/a.h5" --seed $S --cfg 4.5 --layout 2x1x1 \
    --speed 1,3 --trace "$work/t1.json" -o "$work/s1.h5" >"$work/s1.out" 2>"$work/s1.err"; then
  grep -q "shares of a step's 2 micro-batches: 1:1" "$work/s1.err" &&
    [ "$(heads "$work/t1.json" 2 1 1)" = "1:1" ] && sp_same "$work/one.h5" "$work/s1.h5" &&
    ok "2 branches at 1,3 on 2x1x1: 1:1, bit-identical" ||
    bad "2 branches at 1,3: $(grep -h "shares" "$work/s1.err") trace $(heads "$work/t1.json" 2 1 1)"
else
  bad "2x1x1 --speed 1,3 failed: $(grep error "$work/s1.err" | head -2)"
fi

# 2. two videos in flight: four micro-batches, 1:3 per replica (2x1x1) and
# per rank (2x1x2, 1,1,3,3); each output equals its separate run
cat >"$work/jobs.txt" <<JOBS
cond=$work/a.h5 out=$work/job1.h5 seed=$((S + 1)) cfg=4.5
cond=$work/b.h5 out=$work/job2.h5 seed=$((S + 2)) cfg=3
JOBS
for j in "1 a $((S + 1)) 4.5" "2 b $((S + 2)) 3"; do
  set -- $j
  "$SP_BIN" run "${A[@]}" --cond "$work/$2.h5" --seed $3 --cfg $4 -q -o "$work/sep$1.h5" || exit 1
done
for c in "2x1x1 1,3 2 1 1" "2x1x2 1,1,3,3 2 1 2" "2x1x1 3,1 2 1 1"; do
  set -- $c
  layout=$1 speed=$2
  n=$(echo $layout | awk -Fx '{print $1 * $2 * $3}')
  want=1:3
  [ "$speed" = 3,1 ] && want=3:1
  rm -f "$work"/job?.h5
  if mpirun -np $n "$SP_BIN" run "${A[@]}" --jobs "$work/jobs.txt" --layout $layout \
      --speed $speed --trace "$work/t.json" >"$work/j.out" 2>"$work/j.err"; then
    got=$(heads "$work/t.json" $3 $4 $5)
    grep -q "shares of a step's 4 micro-batches: $want" "$work/j.err" && [ "$got" = "$want" ] &&
      sp_same "$work/sep1.h5" "$work/job1.h5" && sp_same "$work/sep2.h5" "$work/job2.h5" &&
      ok "2 videos on $layout at $speed: $want, both bit-identical to their runs" ||
      bad "2 videos on $layout at $speed: trace $got, want $want: $(grep -h shares "$work/j.err")"
  else
    bad "--jobs $layout --speed $speed failed: $(grep error "$work/j.err" | head -2)"
  fi
done

# 3. the planner takes the speeds as the ranks': on the pipeline 1x2x1 at
# 1,100 and 100,1 the faster rank gets more of the blocks (the tiny model's
# stage times are small, so the ratio is large); bit-identical
for speed in 1,100 100,1; do
  if mpirun -np 2 "$SP_BIN" run "${A[@]}" --cond "$work/a.h5" --seed $S --cfg 4.5 --layout 1x2x1 \
      --speed $speed -q --json -o "$work/p$speed.h5" >"$work/p.json" 2>"$work/p.err"; then
    "$PY" - "$work/p.json" $speed <<'PYEOF' && sp_same "$work/one.h5" "$work/p$speed.h5" &&
import json, sys
st = json.load(open(sys.argv[1]))["plan"]["ranks"]
n = [q["last_block"] - q["first_block"] + 1 for q in st]
slow, fast = (0, 1) if sys.argv[2] == "1,100" else (1, 0)
assert n[fast] > n[slow], n
PYEOF
      ok "1x2x1 at $speed: the faster rank holds more blocks, bit-identical" ||
      bad "1x2x1 at $speed: blocks not shifted to the faster rank or latents differ"
  else
    bad "1x2x1 --speed $speed failed: $(grep error "$work/p.err" | head -2)"
  fi
done

# 4. refusals: one line naming --speed, exit 2
for c in "2x1x1 1,2,3" "2x1x1 0,1" "2x1x1 1,x" "2x1x1 -1,1" "2x1x1 1,"; do
  set -- $c
  out=$(mpirun -np 2 "$SP_BIN" run "${A[@]}" --cond "$work/a.h5" --cfg 4.5 --layout $1 --speed "$2" \
    -q -o "$work/bad.h5" 2>&1)
  rc=$?
  own=$(echo "$out" | grep "error:" | grep -v "stopping: rank 0")
  [ $rc = 2 ] && echo "$own" | grep -q -- "--speed" && [ ! -e "$work/bad.h5" ] &&
    ok "--speed $2 on $1 refused: $(echo "$own" | head -1 | sed 's/.*error: //')" ||
    bad "--speed $2 on $1: exit $rc, $out"
done
[ $fail = 0 ] && echo "all ok"
exit $fail
