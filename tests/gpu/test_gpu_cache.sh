#!/usr/bin/env bash
# Step caching (run --cache) on the CUDA stage: the tiny model with CFG on
# the GPU against the CPU's cached run (MagCache decides from a table, so
# both skip the same steps; bf16 end to end: relative L2 <= 2e-2), a GPU
# rerun bit-identical, 2 ranks sharing the GPU (MPI transport, the cached
# input travelling from stage 0 to the last stage) bit-identical to 1 rank,
# threshold 0 bit-identical to --cache off, block-major order and streamed
# blocks bit-identical; TeaCache (the time embedding computed on the GPU)
# on 1 and 2 ranks bit-identical. Skips (77) without a GPU.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_need_gpu
sp_python
sp_mpi
export OMP_NUM_THREADS=2
sp_work_dir gpu-cache
T=$work
S=${SP_SEED:-$RANDOM}
echo "seed $S (replay with SP_SEED=$S)"
"$SP_BIN" init --arch wan2.1-tiny --seed $S -q -o "$T/m.h5" || exit 1
"$PY" - "$T/cond.h5" $S <<'PYEOF' || exit 1
import sys, h5py, numpy as np
r = np.random.default_rng(int(sys.argv[2]))
with h5py.File(sys.argv[1], "w") as f:
    f["context"] = r.standard_normal((int(r.integers(1, 513)), 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((int(r.integers(1, 513)), 4096)).astype(np.float32)
PYEOF
A=(--model "$T/m.h5" --cond "$T/cond.h5" --frames 17 --size 96x80 --steps 10 --cfg 5 --seed $S -q
   --no-preview)
run() { # name [mpirun ranks] args...
  local name=$1 n=$2
  shift 2
  local pre=()
  [ "$n" -gt 1 ] && pre=(mpirun -np "$n")
  "${pre[@]}" "$SP_BIN" run "${A[@]}" "$@" --json -o "$T/$name.h5" > "$T/$name.json" 2> "$T/$name.err" ||
    { echo "FAIL $name: $(grep -i error "$T/$name.err" | head -2)"; fail=1; return 1; }
}
run cpu 1 --device cpu --cache magcache:0.12
run off 1 --device cuda
run mag0 1 --device cuda --cache magcache:0
run gpu 1 --device cuda --cache magcache:0.12
run gpu_rerun 1 --device cuda --cache magcache:0.12
run gpu_np2 2 --device cuda --cache magcache:0.12
run gpu_block 2 --device cuda --cache magcache:0.12 --order block
run gpu_stream 1 --device cuda --cache magcache:0.12 --stream-frac 1
run tea 1 --device cuda --cache teacache:3000
run tea_np2 2 --device cuda --cache teacache:3000
"$PY" - "$T" <<'PYEOF' || fail=1
import json, os, sys, h5py, numpy as np
d = sys.argv[1]
ok = True
def check(c, what):
    global ok
    print(("ok   " if c else "FAIL ") + what)
    ok = ok and c
def lat(n):
    p = os.path.join(d, n + ".h5")
    return h5py.File(p)["latents"][()] if os.path.exists(p) else None
def skips(n):
    return json.loads(open(os.path.join(d, n + ".json")).read().strip().splitlines()[-1])["cache"]
def same(a, b, what):
    x, y = lat(a), lat(b)
    check(x is not None and y is not None and x.tobytes() == y.tobytes(), what)
c, g = lat("cpu"), lat("gpu")
if c is not None and g is not None:
    err = float(np.linalg.norm(g.astype(np.float64) - c) / np.linalg.norm(c))
    check(err <= 2e-2, "GPU magcache:0.12 within 2e-2 of the CPU's (%.3e)" % err)
    check(skips("gpu")["skipped_steps"] == skips("cpu")["skipped_steps"]
          and skips("gpu")["skipped_micro_batch_steps"] > 0,
          "the GPU skips the CPU's steps: %s" % skips("gpu")["skipped_steps"])
same("off", "mag0", "magcache:0 on the GPU bit-identical to --cache off")
same("gpu", "gpu_rerun", "GPU rerun bit-identical")
same("gpu", "gpu_np2", "2 ranks sharing the GPU bit-identical to 1")
same("gpu", "gpu_block", "2 ranks block-major bit-identical to 1")
same("gpu", "gpu_stream", "every block streamed bit-identical to resident")
same("tea", "tea_np2", "teacache: 2 ranks bit-identical to 1")
sys.exit(0 if ok else 1)
PYEOF
exit $fail
