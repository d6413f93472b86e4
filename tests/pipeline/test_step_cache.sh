#!/usr/bin/env bash
# run --cache (step caching, DESIGN.md "Step caching") on the CPU backend:
#  - threshold 0 skips nothing and gives latents bit-identical to --cache
#    off, for both methods, on 1 and 3 ranks;
#  - with positive thresholds steps are skipped (run --json) and the
#    latents are bit-identical to one process on 2 and 3 ranks, layouts
#    2x1x1, 1x1x2 (27 tokens: an uneven split), 2x2x1, both orders,
#    streamed blocks, --cfg 1;
#  - wan2.2-tiny's two experts: the first step of the low-noise expert is
#    never skipped (no residual crosses the switch), 2 ranks and 2x1x1
#    bit-identical to one process;
#  - --jobs lines with cache= (different per line, in flight together on 2
#    ranks, then one of another latent shape) each equal their own run;
#  - bad values refused with one line naming the flag or the line.
# The published criteria and the residual's reuse are checked against an
# independent float64 reference in tests/ref/test_cache_parity.sh.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir step-cache
sp_seed

sp_tiny "$work/m.h5"
"$SP_BIN" init --arch wan2.2-tiny --seed $((S + 1)) -q -o "$work/m22.h5" || exit 1
sp_cond 512 "$work/c.h5"
skipped() { # run.json -> the cache's skipped micro-batch steps
  "$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["cache_skipped_steps"])' "$1"
}
# 48x48 pixels, 9 frames: 27 tokens (14 + 13 for U = 2); 8 steps
ARGS=(--model "$work/m.h5" --cond "$work/c.h5" --frames 9 --size 48x48 --steps 8 --seed $S -q
      --no-preview --device cpu --timeout 120)
# name ranks args...: runs (mpirun when ranks > 1) into $work/name.h5 with --json
run() {
  local name=$1 n=$2
  shift 2
  local pre=()
  [ "$n" -gt 1 ] && pre=(mpirun -np "$n")
  sp_last_wins "${pre[@]}" "$SP_BIN" run "$@" --json -o "$work/$name.h5" > "$work/$name.json" 2> "$work/$name.err" ||
    { bad "$name: the run failed: $(grep -i error "$work/$name.err" | head -2)"; return 1; }
}
# name ref ranks args...: the run against ref's latents
check() {
  local name=$1 ref=$2 n=$3
  shift 3
  run "$name" "$n" "$@" || return
  sp_same "$work/$ref.h5" "$work/$name.h5" && ok "$name: bit-identical to $ref" ||
    bad "$name: latents differ from $ref"
}

# ---- threshold 0 is no cache at all
run off 1 "${ARGS[@]}" --cfg 4.5 || exit 1
run off1 1 "${ARGS[@]}" --cfg 1 || exit 1
for m in teacache magcache; do
  check "$m-0" off 1 "${ARGS[@]}" --cfg 4.5 --cache $m:0
  [ "$(skipped "$work/$m-0.json")" = 0 ] && ok "$m:0 skips nothing" || bad "$m:0 skipped steps"
  check "$m-0-3ranks" off 3 "${ARGS[@]}" --cfg 4.5 --cache $m:0 --order block
  check "$m-0-cfg1" off1 1 "${ARGS[@]}" --cfg 1 --cache $m:0
done

# ---- positive thresholds: the same latents for every rank count and layout
# (random weights change the time embedding far more per step than trained
# ones: TeaCache's rescaled sums are ~1e3 here, hence its threshold)
for spec in magcache:0.12 teacache:3000; do
  m=${spec%%:*}
  run "$m" 1 "${ARGS[@]}" --cfg 4.5 --cache $spec || continue
  n=$(skipped "$work/$m.json")
  [ "$n" -gt 0 ] && ok "$spec skips $n micro-batch steps of 16" || bad "$spec skipped nothing"
  if sp_same "$work/off.h5" "$work/$m.h5"; then bad "$spec: latents equal --cache off's"; fi
  check "$m-2ranks" "$m" 2 "${ARGS[@]}" --cfg 4.5 --cache $spec
  check "$m-3ranks" "$m" 3 "${ARGS[@]}" --cfg 4.5 --cache $spec
  check "$m-3ranks-block" "$m" 3 "${ARGS[@]}" --cfg 4.5 --cache $spec --order block
  check "$m-3ranks-stream" "$m" 3 "${ARGS[@]}" --cfg 4.5 --cache $spec --stream-frac 1
  for layout in 2x1x1 1x1x2 2x2x1; do
    np=$(echo $layout | awk -Fx '{print $1 * $2 * $3}')
    check "$m-$layout" "$m" "$np" "${ARGS[@]}" --cfg 4.5 --cache $spec --layout $layout
  done
  check "$m-2x2x1-block" "$m" 4 "${ARGS[@]}" --cfg 4.5 --cache $spec --layout 2x2x1 --order block
  run "$m-cfg1" 1 "${ARGS[@]}" --cfg 1 --cache $spec &&
    check "$m-cfg1-1x1x2" "$m-cfg1" 2 "${ARGS[@]}" --cfg 1 --cache $spec --layout 1x1x2 &&
    check "$m-cfg1-3ranks" "$m-cfg1" 3 "${ARGS[@]}" --cfg 1 --cache $spec
done

# ---- two experts: the switch step computes; ranks and replicas agree
# 8 steps at the model's shift 12 and boundary 0.875: steps 0-5 high-noise,
# 6-7 low-noise. magcache:5 skips whatever K = 2 allows: the conditional
# branch skips 2, 3, runs 4, skips 5, and would skip 6 but for the switch.
A22=(--model "$work/m22.h5" --cond "$work/c.h5" --frames 9 --size 48x48 --steps 8 --seed $S -q
     --no-preview --device cpu --timeout 120 --cache magcache:5)
if run e22 1 "${A22[@]}"; then
  "$PY" - "$SP_SRC" "$work/e22.json" <<'PYEOF' && ok "wan2.2-tiny: the low-noise expert's first step is computed on both branches" || bad "wan2.2-tiny: a residual crossed the expert switch"
import json, sys
sys.path.insert(0, sys.argv[1] + "/tests/ref")
import wan_ref as W
_, ts = W.schedule(8, 12.0)             # the model's shift 12, boundary 0.875
switch = next(i for i, t in enumerate(ts) if t < 875)
d = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])["cache"]["skipped_steps"]
print("switch step", switch, "skipped", d)
sys.exit(0 if switch == 6 and 5 in d[0] and all(6 not in b and 0 not in b and 7 not in b
                                                for b in d) else 1)
PYEOF
  check e22-2ranks e22 2 "${A22[@]}"
  check e22-2x1x1 e22 2 "${A22[@]}" --layout 2x1x1
fi

# ---- --jobs: cache= per line, in flight together, each equal to its run
J=(--model "$work/m.h5" --frames 9 --size 48x48 --steps 8 --no-preview --device cpu
   --timeout 120 --cfg 4.5)
{
  echo "cond=$work/c.h5 out=$work/j0.h5 seed=1 cache=magcache:0.12"
  echo "cond=$work/c.h5 out=$work/j1.h5 seed=2"
  echo "cond=$work/c.h5 out=$work/j2.h5 seed=3 cache=teacache:3000"
  echo "cond=$work/c.h5 out=$work/j3.h5 seed=4 cache=magcache:0.12 size=64x48"
} > "$work/jobs.txt"
if mpirun -np 2 "$SP_BIN" run "${J[@]}" --jobs "$work/jobs.txt" > "$work/jobs.out" 2> "$work/jobs.err"; then
  grep -q "in flight together" "$work/jobs.err" || bad "--jobs: the lines did not run together"
  for q in "0 magcache:0.12" "1 off" "2 teacache:3000"; do
    set -- $q
    run "solo$1" 1 "${J[@]}" --cond "$work/c.h5" --seed $(($1 + 1)) --cache $2 &&
      { sp_same "$work/solo$1.h5" "$work/j$1.h5" && ok "--jobs line $1 (cache=$2) equals its own run" ||
        bad "--jobs line $1 (cache=$2) differs from its own run"; }
  done
  # another latent shape: the stage's cache buffers are laid out again
  run solo3 1 "${J[@]}" --cond "$work/c.h5" --seed 4 --cache magcache:0.12 --size 64x48 &&
    { sp_same "$work/solo3.h5" "$work/j3.h5" && ok "--jobs line 3 (another shape, re-laid) equals its own run" ||
      bad "--jobs line 3 (another shape) differs from its own run"; }
else
  bad "--jobs with cache= failed: $(grep -i error "$work/jobs.err" | head -2)"
fi

# ---- refusals: one line naming the flag, exit 2
for v in foo teacache magcache:-1 teacache:x; do
  "$SP_BIN" run "${ARGS[@]}" --cache "$v" -o "$work/bad.h5" 2> "$work/bad.err"
  rc=$?
  [ $rc = 2 ] && grep -q -- "--cache" "$work/bad.err" && [ "$(grep -c error "$work/bad.err")" = 1 ] &&
    ok "--cache $v refused: $(head -1 "$work/bad.err")" || bad "--cache $v: exit $rc"
done
echo "cond=$work/c.h5 out=$work/jb.h5 cache=nope" > "$work/badjobs.txt"
"$SP_BIN" run "${J[@]}" --jobs "$work/badjobs.txt" 2> "$work/badjobs.err"
grep -q "badjobs.txt:1: cache" "$work/badjobs.err" && ok "a cache=nope line is refused, naming it" ||
  bad "cache=nope: $(grep error "$work/badjobs.err" | head -1)"

exit $fail
