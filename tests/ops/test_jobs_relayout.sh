#!/usr/bin/env bash
# A latent shape change between jobs re-lays the activations and keeps the
# weights, on 1 and 2 ranks:
#   - a jobs file of three jobs of two shapes alternating (the large one
#     first, the plan's) and a queue (--jobs -, the small one first, the
#     plan from --frames/--size): each job's latents bit-identical to a
#     separate one-process run of that job alone;
#   - the weights were read once: each rank's bytes_loaded in --json equals
#     the bytes of its own groups in the model file (inspect --json), and
#     the log says the activations were re-laid, never that blocks reload;
#   - the same with a bypassed LoRA, whose pairs the stage keeps across the
#     change (the CPU's scratch keeps room for their rank).
# SP_RELAYOUT_DEVICE=cuda (tests/gpu/test_gpu_relayout.sh) runs it all on
# the GPU, once more with half the blocks streamed (--stream-frac 0.5).
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_work_dir jobs-relayout
sp_seed
sp_tiny "$work/m.h5"
"$SP_BIN" inspect --json "$work/m.h5" > "$work/sizes.json" || exit 1
"$PY" - "$work" $S <<'PYEOF' || exit 1
import os, sys, h5py, numpy as np
sys.path.insert(0, os.path.join(os.environ["SP_SRC"], "tests", "lora"))
import loralib
d, r = sys.argv[1], np.random.default_rng(int(sys.argv[2]))
with h5py.File(f"{d}/a.h5", "w") as f:
    f["context"] = r.standard_normal((int(r.integers(1, 64)), 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((int(r.integers(1, 64)), 4096)).astype(np.float32)
c, _ = loralib.model_config(f"{d}/m.h5")
sh = loralib.shapes(c)
lo = loralib.Lora("comfy")
for b in range(c["layers"]):
    for n in ("self_attn.q.weight", "cross_attn.k.weight", "ffn.0.weight"):
        lo.pair(r, "block", b, n, sh[("block", b, n)], 16, dt="BF16")
lo.write(f"{d}/l.safetensors")
PYEOF
DEV=${SP_RELAYOUT_DEVICE:-cpu}
B=(--model "$work/m.h5" --steps 2 --timeout 60 --device "$DEV")
# The variants: the extra options of every run of each (split at spaces).
VARIANTS=("" "--lora $work/l.safetensors:1.5 --lora-mode bypass")
[ "$DEV" = cuda ] && VARIANTS+=("--stream-frac 0.5")
# The jobs: two large (17 frames of 64x64) and one small (9 of 48x80, CFG off).
BIG="frames=17 size=64x64"
SMALL="frames=9 size=48x80 cfg=1"
same() { # A B: the latents are bit-identical
  "$PY" - "$1" "$2" <<'PYEOF'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r")["latents"][...] for p in sys.argv[1:3])
sys.exit(0 if a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32)) else 1)
PYEOF
}
# A jobs line's keys as run options (key=value -> --key value).
opts() { for kv in $1; do printf -- '--%s\n%s\n' "${kv%%=*}" "${kv#*=}"; done; }
# Each rank read exactly its own groups, once.
loaded_once() { # JSON-LINES-FILE NP
  "$PY" - "$1" "$work/sizes.json" "$2" <<'PYEOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
run = [l for l in lines if "ranks" in l][-1]
sizes, n = json.load(open(sys.argv[2])), int(sys.argv[3])
ranks = run["ranks"]
assert len(ranks) == n, ranks
for r in ranks:
    want = sum(sizes["block_bytes"][b] for b in range(r["first_block"], r["last_block"] + 1))
    want += sizes["embed_bytes"] if r["rank"] == 0 else 0
    want += sizes["head_bytes"] if r["rank"] == n - 1 else 0
    assert r["bytes_loaded"] == want, (r["rank"], r["bytes_loaded"], want)
PYEOF
}
# The references: each job alone, one process, with the variant's options.
ref() { # NAME SEED SHAPE
  mapfile -t o < <(opts "$3")
  "$SP_BIN" run "${B[@]}" ${X[@]+"${X[@]}"} -q --cond "$work/a.h5" --seed "$2" "${o[@]}" \
    -o "$work/$1.h5" || { bad "$V: reference $1"; return 1; }
}
relaid() { # LOG: two shape changes re-laid, no reload
  [ "$(grep -c "re-laid its activations" "$1")" = 2 ] && ! grep -q "reloads" "$1"
}

for V in "${VARIANTS[@]}"; do
  read -r -a X <<< "$V"
  V="$DEV${V:+ ${V//$work\//}}"
  ref r1 $((S + 1)) "$BIG" && ref r2 $((S + 2)) "$SMALL" && ref r3 $((S + 3)) "$BIG" || continue
  for np in 1 2; do
    rm -f "$work"/j*.h5*
    printf '%s\n' "cond=$work/a.h5 out=$work/j1.h5 seed=$((S + 1)) $BIG" \
      "cond=$work/a.h5 out=$work/j2.h5 seed=$((S + 2)) $SMALL" \
      "cond=$work/a.h5 out=$work/j3.h5 seed=$((S + 3)) $BIG" > "$work/jobs.txt"
    timeout 300 mpirun -np $np "$SP_BIN" run "${B[@]}" ${X[@]+"${X[@]}"} --jobs "$work/jobs.txt" \
      --json > "$work/f.json" 2> "$work/f.err"; rc=$?
    if [ $rc -eq 0 ] && same "$work/j1.h5" "$work/r1.h5" && same "$work/j2.h5" "$work/r2.h5" \
       && same "$work/j3.h5" "$work/r3.h5"; then
      ok "$V: np $np: jobs file, shapes large-small-large: each bit-identical to its own run"
    else bad "$V: np $np: jobs file: exit $rc: $(tail -3 "$work/f.err")"; fi
    loaded_once "$work/f.json" $np && ok "$V: np $np: jobs file: every rank read its weights once" \
      || bad "$V: np $np: jobs file: bytes_loaded"
    relaid "$work/f.err" && ok "$V: np $np: jobs file: two shape changes re-laid, nothing reloaded" \
      || bad "$V: np $np: jobs file: log: $(grep "latent shape" "$work/f.err")"

    # The queue: the plan from the command line's shape (the large one); the
    # small job comes first, so the stage starts smaller than its room.
    rm -f "$work"/q*.h5*
    printf '%s\n' "cond=$work/a.h5 out=$work/q2.h5 seed=$((S + 2)) $SMALL" \
      "cond=$work/a.h5 out=$work/q1.h5 seed=$((S + 1))" \
      "cond=$work/a.h5 out=$work/q3.h5 seed=$((S + 3))" \
      | timeout 300 mpirun -np $np "$SP_BIN" run "${B[@]}" ${X[@]+"${X[@]}"} --frames 17 \
        --size 64x64 --jobs - --json > "$work/q.json" 2> "$work/q.err"; rc=$?
    if [ $rc -eq 0 ] && same "$work/q2.h5" "$work/r2.h5" && same "$work/q1.h5" "$work/r1.h5" \
       && same "$work/q3.h5" "$work/r3.h5"; then
      ok "$V: np $np: --jobs -, shapes small-large-large: each bit-identical to its own run"
    else bad "$V: np $np: --jobs -: exit $rc: $(tail -3 "$work/q.err")"; fi
    loaded_once "$work/q.json" $np && ok "$V: np $np: --jobs -: every rank read its weights once" \
      || bad "$V: np $np: --jobs -: bytes_loaded"
    [ "$(grep -c "re-laid its activations" "$work/q.err")" = 1 ] && ! grep -q "reloads" "$work/q.err" \
      && ok "$V: np $np: --jobs -: one shape change re-laid, nothing reloaded" \
      || bad "$V: np $np: --jobs -: log: $(grep "latent shape" "$work/q.err")"
  done
done

[ $fail -eq 0 ] && echo "jobs relayout: all checks passed" || echo "jobs relayout: FAILED"
exit $fail
