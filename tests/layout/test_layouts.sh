#!/usr/bin/env bash
# run --layout RxSxU on the CPU backend: every layout of 2..8 ranks that
# wan2.1-tiny allows (2 heads: U is 1 or 2) gives latents bit-identical to
# one process, with CFG (the replicas split the branches) and with --cfg 1,
# in both orders of work and with every block marked streamed, on a token
# count that U = 2 splits unevenly (27 tokens); wan2.2-tiny's two experts
# too; --jobs with replicas spreads the jobs' micro-batches and each output
# equals its separate run; --precision fp8 on a few layouts; bad layouts
# are refused with one line, exit 2 and no output.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir layouts
sp_seed

sp_tiny "$work/m.h5"
"$SP_BIN" init --arch wan2.2-tiny --seed $((S + 1)) -q -o "$work/m22.h5" || exit 1
sp_cond 512 "$work/a.h5" "$work/b.h5"
ranks() { echo "$1" | awk -Fx '{print $1 * $2 * $3}'; }
# 48x48 pixels, 9 frames: a (16, 3, 6, 6) latent, 27 tokens (14 + 13 for U = 2)
ARGS=(--model "$work/m.h5" --cond "$work/a.h5" --frames 9 --size 48x48 --steps 2 --seed $S -q)

# name ref layout args...: the run under mpirun with --layout, against ref
check() {
  local name=$1 ref=$2 layout=$3
  shift 3
  local n
  n=$(ranks "$layout")
  if ! mpirun -np "$n" "$SP_BIN" run "$@" --layout "$layout" -o "$work/$name.h5" \
      > "$work/$name.out" 2> "$work/$name.err"; then
    bad "$name: --layout $layout failed: $(grep error "$work/$name.err" | head -2)"
    return
  fi
  sp_same "$work/$ref.h5" "$work/$name.h5" && ok "$name: --layout $layout bit-identical to one process" \
    || bad "$name: --layout $layout: latents differ from one process"
}

"$SP_BIN" run "${ARGS[@]}" --cfg 4.5 -o "$work/cfg.h5" || { echo "FAIL one-process run"; exit 1; }
"$SP_BIN" run "${ARGS[@]}" --cfg 1 -o "$work/nocfg.h5" || { echo "FAIL one-process run"; exit 1; }
# Both orders over the layouts; streamed blocks (--stream-frac 1) on some.
i=0
for layout in 2x1x1 1x1x2 2x2x1 2x1x2 1x2x2 2x2x2 1x4x2; do
  order=micro
  [ $((i % 2)) = 1 ] && order=block
  check "cfg-$layout" cfg "$layout" "${ARGS[@]}" --cfg 4.5 --order $order
  i=$((i + 1))
done
check "cfg-2x2x1-block" cfg 2x2x1 "${ARGS[@]}" --cfg 4.5 --order block
check "cfg-1x2x2-stream" cfg 1x2x2 "${ARGS[@]}" --cfg 4.5 --stream-frac 1 --order block
check "cfg-2x2x2-stream" cfg 2x2x2 "${ARGS[@]}" --cfg 4.5 --stream-frac 1
for layout in 1x1x2 1x2x2; do check "nocfg-$layout" nocfg "$layout" "${ARGS[@]}" --cfg 1; done
# fp8 (MODEL.md "fp8 weights": activations quantised per token, so a
# split of the tokens changes no bit): replicas, stages and Ulysses ranks.
"$SP_BIN" run "${ARGS[@]}" --cfg 4.5 --precision fp8 -o "$work/fp8.h5" || { echo "FAIL fp8 run"; exit 1; }
for layout in 2x1x1 1x1x2 2x2x1 1x2x2; do
  check "fp8-$layout" fp8 "$layout" "${ARGS[@]}" --cfg 4.5 --precision fp8
done

# --layout auto: the planner's choice among the layouts of the ranks (the
# line names it) and --layout pipeline, bit-identical to one process.
for c in "2 cfg 4.5" "4 cfg 4.5" "4 nocfg 1" "3 cfg 4.5"; do
  set -- $c
  if mpirun -np $1 "$SP_BIN" run "${ARGS[@]}" --cfg $3 --layout auto --json \
      -o "$work/auto$1$2.h5" > "$work/auto.json" 2> "$work/auto.err" && sp_same "$work/$2.h5" "$work/auto$1$2.h5"; then
    chosen=$("$PY" -c 'import json,sys; l=json.load(open(sys.argv[1]))["plan"]["layout"]
print("%dx%dx%d" % (l["replicas"], l["stages"], l["seq"]))' "$work/auto.json")
    [ -n "$chosen" ] && [ "$(ranks "$chosen")" = "$1" ] &&
      ok "--layout auto on $1 ranks ($2): $chosen, bit-identical to one process" ||
      bad "--layout auto on $1 ranks: the plan's layout '$chosen' is not one of $1 ranks"
  else
    bad "--layout auto on $1 ranks ($2) failed or differs: $(grep error "$work/auto.err" | head -2)"
  fi
done
mpirun -np 3 "$SP_BIN" run "${ARGS[@]}" --cfg 4.5 --layout pipeline --json -o "$work/pipe.h5" \
  > "$work/pipe.json" 2> /dev/null && sp_same "$work/cfg.h5" "$work/pipe.h5" &&
  "$PY" -c 'import json,sys; l=json.load(open(sys.argv[1]))["plan"]["layout"]
sys.exit(0 if l == {"replicas": 1, "stages": 3, "seq": 1} else 1)' "$work/pipe.json" &&
  ok "--layout pipeline on 3 ranks: 1x3x1, bit-identical to one process" ||
  bad "--layout pipeline on 3 ranks: not 1x3x1 or latents differ"

# The plan carries the layout (JSON), and every rank of a stage holds its blocks.
mpirun -np 8 "$SP_BIN" run "${ARGS[@]}" --cfg 4.5 --layout 2x2x2 --json -o "$work/j.h5" \
  > "$work/j.json" 2> "$work/j.err" || bad "2x2x2 --json failed"
"$PY" - "$work/j.json" <<'PYEOF' && ok "2x2x2: the plan's layout and each rank's stage blocks" \
  || bad "2x2x2: layout or blocks in the JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["plan"]["layout"] == {"replicas": 2, "stages": 2, "seq": 2}, d["plan"]["layout"]
stages = d["plan"]["ranks"]
assert len(stages) == 2
for r in d["ranks"]:
    s = stages[(r["rank"] // 2) % 2]  # rank = (r * S + s) * U + u
    assert (r["first_block"], r["last_block"]) == (s["first_block"], s["last_block"]), r
PYEOF

# Two experts (wan2.2-tiny): each step's expert on every replica and stage.
A22=(--model "$work/m22.h5" --cond "$work/b.h5" --frames 9 --size 48x48 --steps 4 --seed $S -q)
"$SP_BIN" run "${A22[@]}" -o "$work/e.h5" || { echo "FAIL one-process two-expert run"; exit 1; }
for layout in 2x1x1 1x1x2 2x2x2; do check "experts-$layout" e "$layout" "${A22[@]}"; done

# --jobs with replicas: three jobs in flight (one without CFG), their five
# micro-batches spread over two replicas; each equals its separate run.
cat > "$work/jobs.txt" <<JOBS
cond=$work/a.h5 out=$work/job1.h5 seed=$((S + 1)) cfg=4.5
cond=$work/b.h5 out=$work/job2.h5 seed=$((S + 2)) cfg=1
cond=$work/b.h5 out=$work/job3.h5 seed=$((S + 3)) cfg=3
JOBS
JA=(--model "$work/m.h5" --frames 9 --size 48x48 --steps 2 -q)
if mpirun -np 4 "$SP_BIN" run "${JA[@]}" --jobs "$work/jobs.txt" --layout 2x1x2 \
    > "$work/jobs.out" 2> "$work/jobs.err"; then
  for j in "1 a $((S + 1)) 4.5" "2 b $((S + 2)) 1" "3 b $((S + 3)) 3"; do
    set -- $j
    "$SP_BIN" run "${JA[@]}" --cond "$work/$2.h5" --seed $3 --cfg $4 -o "$work/sep$1.h5" &&
      sp_same "$work/sep$1.h5" "$work/job$1.h5" && ok "--jobs 2x1x2: job $1 bit-identical to its run" \
      || bad "--jobs 2x1x2: job $1 differs from its separate run"
  done
else
  bad "--jobs with --layout 2x1x2 failed: $(grep error "$work/jobs.err" | head -2)"
fi

# Refusals: one line, exit 2, no output.
refuse() { # np want-in-the-line args...
  local n=$1 want=$2
  shift 2
  rm -f "$work/bad.h5"
  out=$(mpirun -np "$n" "$SP_BIN" run "${ARGS[@]}" "$@" -o "$work/bad.h5" 2>&1)
  rc=$?
  # one line from the rank that found it; the others only say they stop
  own=$(echo "$out" | grep "error:" | grep -v "stopping: rank 0")
  if [ $rc -eq 2 ] && [ "$(echo "$own" | grep -c .)" -eq 1 ] && echo "$own" | grep -q -- "$want" &&
     [ ! -e "$work/bad.h5" ]; then
    ok "refused ($*): $own"
  else
    bad "not refused as expected ($*): exit $rc: $(echo "$out" | grep error | head -3)"
  fi
}
refuse 2 "expected auto, pipeline or RxSxU" --cfg 4.5 --layout 2x1
refuse 2 "expected auto, pipeline or RxSxU" --cfg 4.5 --layout 0x2x1
refuse 2 "expected auto, pipeline or RxSxU" --cfg 4.5 --layout 1x2x2x1
refuse 2 "expected auto, pipeline or RxSxU" --cfg 4.5 --layout twoxonexone
refuse 2 "R x S x U must equal it" --cfg 4.5 --layout 1x1x3
refuse 4 "must divide the model's 2 attention heads" --cfg 4.5 --layout 1x1x4
refuse 2 "2 replicas but 1 micro-batch" --cfg 1 --layout 2x1x1
refuse 5 "5 pipeline stages for a model of 4 blocks" --cfg 4.5 --layout 1x5x1

exit $fail
