#!/usr/bin/env bash
# The pipeline on the CPU backend: mpirun -np 1..4 on the
# tiny model with CFG gives latents bit-identical to the single-process run
# and across reruns, whatever the split; each rank reads exactly its plan's
# bytes; uneven budgets move blocks and change nothing in the latents; a
# failure on one rank ends every rank with exit 2 and no output.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir mpi-run
MPI="mpirun -np"

"$SP_BIN" init --arch wan2.1-tiny --seed $RANDOM -q -o "$work/m.h5" || exit 1
"$PY" - "$work/cond.h5" <<'PYEOF' || exit 1
import sys, h5py, numpy as np
r = np.random.default_rng()
with h5py.File(sys.argv[1], "w") as f:
    f["context"] = r.standard_normal((int(r.integers(1, 512)), 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((int(r.integers(1, 512)), 4096)).astype(np.float32)
PYEOF
SEED=$RANDOM
ARGS=(--model "$work/m.h5" --cond "$work/cond.h5" --frames 9 --size 64x48 --steps 3 --cfg 4.5 --seed $SEED -q)

"$SP_BIN" run "${ARGS[@]}" -o "$work/single.h5" || { echo "FAIL single-process run"; exit 1; }
"$SP_BIN" run "${ARGS[@]}" -o "$work/again.h5" && sp_same "$work/single.h5" "$work/again.h5" \
  && ok "rerun bit-identical" || bad "rerun differs"
OMP_NUM_THREADS=2 "$SP_BIN" run "${ARGS[@]}" -o "$work/threads.h5" && sp_same "$work/single.h5" "$work/threads.h5" \
  && ok "2 threads bit-identical to 1" || bad "thread count changes the latents"

"$SP_BIN" inspect --json "$work/m.h5" > "$work/sizes.json"
for np in 1 2 3 4; do
  $MPI $np "$SP_BIN" run "${ARGS[@]}" --json -o "$work/np$np.h5" > "$work/np$np.json" 2> "$work/np$np.err" \
    || { bad "mpirun -np $np failed: $(tail -3 "$work/np$np.err")"; continue; }
  sp_same "$work/single.h5" "$work/np$np.h5" && ok "np $np: latents bit-identical to one process" \
    || bad "np $np: latents differ"
  "$PY" - "$work/np$np.json" "$work/sizes.json" $np <<'PYEOF' && ok "np $np: bytes read per rank equal the plan's" || bad "np $np: bytes read"
import json, sys
run, sizes, n = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
ranks, plan = run["ranks"], run["plan"]["ranks"]
assert len(ranks) == n == len(plan)
covered = []
for r, p in zip(ranks, plan):
    assert (r["first_block"], r["last_block"]) == (p["first_block"], p["last_block"])
    blocks = range(p["first_block"], p["last_block"] + 1)
    covered += list(blocks)
    want = sum(sizes["block_bytes"][b] for b in blocks)
    want += sizes["embed_bytes"] if r["rank"] == 0 else 0
    want += sizes["head_bytes"] if r["rank"] == n - 1 else 0
    assert r["bytes_loaded"] == want, (r["rank"], r["bytes_loaded"], want)
assert covered == list(range(sizes["num_blocks"])), covered
PYEOF
done

# Uneven budgets move blocks; the latents stay the same.
$MPI 3 "$SP_BIN" run "${ARGS[@]}" --budget "cuda:0,25%;cuda:1,50%;cuda:2,*" --json -o "$work/uneven.h5" > "$work/uneven.json" \
  && sp_same "$work/single.h5" "$work/uneven.h5" && ok "uneven budget: bit-identical" || bad "uneven budget"
"$PY" -c 'import json,sys
a=[(r["first_block"],r["last_block"]) for r in json.load(open(sys.argv[1]))["ranks"]]
b=[(r["first_block"],r["last_block"]) for r in json.load(open(sys.argv[2]))["ranks"]]
print("   splits:", a, "vs", b); sys.exit(0 if a != b else 1)' "$work/uneven.json" "$work/np3.json" \
  && ok "uneven budget moved blocks" || bad "uneven budget did not change the split"

# Both orders of work: block-major runs every micro-batch of a
# step through a block before the next block; micro-batch-major one
# micro-batch through all blocks. The latents are the same; the order each
# rank ran is in its JSON.
for np in 1 2 3; do
  for order in micro block; do
    $MPI $np "$SP_BIN" run "${ARGS[@]}" --order $order --json -o "$work/o$order$np.h5" \
      > "$work/o$order$np.json" 2> "$work/o$order$np.err" \
      && sp_same "$work/single.h5" "$work/o$order$np.h5" \
      && "$PY" -c 'import json,sys
r=json.load(open(sys.argv[1]))["ranks"]
sys.exit(0 if len(r) == int(sys.argv[3]) and all(x["order"] == sys.argv[2] for x in r) else 1)' \
         "$work/o$order$np.json" $order $np \
      && ok "np $np --order $order: bit-identical, every rank reports $order" \
      || bad "np $np --order $order: $(tail -3 "$work/o$order$np.err")"
  done
done
out=$("$SP_BIN" run "${ARGS[@]}" --order sideways -o "$work/x.h5" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q -- "--order" && [ ! -e "$work/x.h5" ] \
  && ok "--order sideways: exit 2 naming the flag" || bad "--order sideways (exit $rc): $out"
# A chunk-row cap is a CUDA memory knob; the CPU backend takes it and
# computes the same latents.
$MPI 2 "$SP_BIN" run "${ARGS[@]}" --chunk-rows 100 -o "$work/chunk.h5" 2> "$work/chunk.err" \
  && sp_same "$work/single.h5" "$work/chunk.h5" && ok "--chunk-rows 100: bit-identical" \
  || bad "--chunk-rows 100: $(tail -3 "$work/chunk.err")"

# Other samplers and cfg 1 through the pipeline.
sp_last_wins "$SP_BIN" run "${ARGS[@]}" --sampler euler --cfg 1 -o "$work/e1.h5" && \
sp_last_wins $MPI 2 "$SP_BIN" run "${ARGS[@]}" --sampler euler --cfg 1 -o "$work/e2.h5" && sp_same "$work/e1.h5" "$work/e2.h5" \
  && ok "euler, cfg 1: np 2 bit-identical" || bad "euler cfg 1 np 2"

# One rank's failure ends every rank: exit 2, one message each, no output.
out=$(sp_last_wins $MPI 2 "$SP_BIN" run "${ARGS[@]}" --cond "$work/missing.h5" -o "$work/fail.h5" 2>&1); rc=$?
if [ $rc -eq 2 ] && [ ! -e "$work/fail.h5" ] && echo "$out" | grep -q "rank 0.*missing.h5" \
   && echo "$out" | grep -q "\[rank 1\] error: stopping: rank 0"; then ok "missing cond file on np 2: exit 2, every rank says why"
else bad "missing cond on np 2 (exit $rc): $out"; fi
cp "$work/single.h5" "$work/keep.h5"
"$PY" -c 'import h5py,sys; f=h5py.File(sys.argv[1],"a"); del f["context_null"]' "$work/cond.h5"
out=$($MPI 3 "$SP_BIN" run "${ARGS[@]}" -o "$work/keep.h5" 2>&1); rc=$?
[ $rc -eq 2 ] && sp_same "$work/single.h5" "$work/keep.h5" && echo "$out" | grep -q "context_null" \
  && ok "no context_null with cfg: exit 2, existing output untouched" || bad "missing context_null (exit $rc): $out"

[ $fail -eq 0 ] && echo "pipeline: all checks passed" || echo "pipeline: FAILED"
exit $fail
