#!/usr/bin/env bash
# LoRAs on the CUDA backend (MODEL.md "LoRA"): bypass (bf16 pairs, merged
# into a scratch copy of each layer's weight right before its GEMM) and merged
# against the CPU backend's fp32 merged run, and against each other, within
# the bf16 end-to-end bound (relative L2 <= 2e-2), the LoRAs moving the
# latents by more than twice that; a bypass rerun, 2 ranks sharing the GPU,
# every block streamed and row-chunked transients bit-identical to the
# 1-rank bypass run; --jobs lines switching LoRAs bit-identical to their own
# runs. Prints the sampling time of merged and bypass (not asserted: the
# tiny model says nothing about the 14B's ratio). Skips (77) without a GPU.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_need_gpu
sp_python
sp_mpi
export OMP_NUM_THREADS=2
sp_work_dir gpu-lora
T=$work
seed=${SP_SEED:-$RANDOM}
echo "seed $seed (SP_SEED=$seed replays)"
"$SP_BIN" init --arch wan2.1-tiny --seed "$seed" -q -o "$T/m.h5" || exit 1
"$PY" - "$T" "$seed" <<'PYEOF' || exit 1
import os, sys, h5py, numpy as np
sys.path.insert(0, os.path.join(os.environ["SP_SRC"], "tests", "lora"))
import loralib, stlib
d, seed = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(seed)
c, _ = loralib.model_config(f"{d}/m.h5")
lin = stlib.LINEARS
# ranks that keep the stacked pairs 16-byte aligned rows (multiples of 8)
for name, style, r, names, dt in (("A", "comfy", 16, lin, "BF16"),
                                  ("B", "diffusers", 8, lin[::3], "F32")):
    loralib.block_pairs(rng, c, style, r, names, dt).write(f"{d}/{name}.safetensors")
with h5py.File(f"{d}/cond.h5", "w") as f:
    f["context"] = rng.standard_normal((int(rng.integers(1, 513)), 4096)).astype(np.float32)
    f["context_null"] = rng.standard_normal((int(rng.integers(1, 513)), 4096)).astype(np.float32)
PYEOF
A=(--model "$T/m.h5" --cond "$T/cond.h5" --frames 17 --size 96x80 --steps 4 --cfg 5 --seed "$seed" -q)
L=(--lora "$T/A.safetensors:1.5" --lora "$T/B.safetensors:-2")
run() { # name, args...
  local n=$1; shift
  "$SP_BIN" run "$@" --json -o "$T/$n.h5" > "$T/$n.json" || { echo "FAIL run $n: $*"; fail=1; }
}
run cpu_merged "${A[@]}" "${L[@]}" --device cpu --lora-mode merged
run cpu_none "${A[@]}" --device cpu
run gpu_merged "${A[@]}" "${L[@]}" --device cuda --lora-mode merged
run gpu_bypass "${A[@]}" "${L[@]}" --device cuda --lora-mode bypass
run gpu_bypass2 "${A[@]}" "${L[@]}" --device cuda --lora-mode bypass
run gpu_bypass_s1 "${A[@]}" "${L[@]}" --device cuda --lora-mode bypass --stream-frac 1
run gpu_bypass_c64 "${A[@]}" "${L[@]}" --device cuda --lora-mode bypass --chunk-rows 64
mpirun -np 2 "$SP_BIN" run "${A[@]}" "${L[@]}" --device cuda --lora-mode bypass \
  -o "$T/gpu_bypass_np2.h5" || { echo "FAIL bypass on 2 ranks"; fail=1; }
run gpu_one_A "${A[@]}" --lora "$T/A.safetensors:1.5" --device cuda --lora-mode bypass
run gpu_one_none "${A[@]}" --device cuda
printf '%s\n' "cond=$T/cond.h5 out=$T/j0.h5 seed=$seed lora=$T/A.safetensors:1.5" \
  "cond=$T/cond.h5 out=$T/j1.h5 seed=$seed lora=none" \
  "cond=$T/cond.h5 out=$T/j2.h5 seed=$seed" > "$T/jobs.txt"
"$SP_BIN" run --model "$T/m.h5" --frames 17 --size 96x80 --steps 4 --cfg 5 -q --device cuda \
  "${L[@]}" --jobs "$T/jobs.txt" || { echo "FAIL jobs switching LoRAs"; fail=1; }
"$PY" - "$T" <<'PYEOF' || fail=1
import json, os, sys, h5py, numpy as np
d = sys.argv[1]
ok = True
def get(n):
    return h5py.File(os.path.join(d, n + ".h5"))["latents"][...]
from sptest import rel_l2 as rel
def check(c, what):
    global ok
    print(("ok   " if c else "FAIL ") + what)
    ok = ok and c
try:
    ref, none = get("cpu_merged"), get("cpu_none")
    gm, gb = get("gpu_merged"), get("gpu_bypass")
except OSError as e:
    print("FAIL", e); sys.exit(1)
moved = rel(ref, none)
worst = 0.0
for name, a, b in (("gpu merged vs cpu merged", gm, ref), ("gpu bypass vs cpu merged", gb, ref),
                   ("gpu bypass vs gpu merged", gb, gm)):
    e = rel(a, b)
    worst = max(worst, e)
    check(e <= 2e-2, f"{name}: rel L2 {e:.3e} (tol 2e-2)")
check(moved > 2e-2 and moved > 2 * worst, f"the LoRAs move the latents by {moved:.3e}")
for n, want in (("gpu_bypass2", "gpu_bypass"), ("gpu_bypass_s1", "gpu_bypass"),
                ("gpu_bypass_c64", "gpu_bypass"), ("gpu_bypass_np2", "gpu_bypass"),
                ("j0", "gpu_one_A"), ("j1", "gpu_one_none"), ("j2", "gpu_bypass")):
    try:
        same = get(n).tobytes() == get(want).tobytes()
    except OSError:
        same = False
    check(same, f"{n} bit-identical to {want}")
for n in ("gpu_merged", "gpu_bypass"):
    try:
        r = json.load(open(os.path.join(d, n + ".json")))["ranks"][0]
        print(f"info {n}: sampling {r.get('sample_s', r.get('compute_s'))} s, "
              f"arena {r.get('arena_bytes')} bytes")
    except (OSError, ValueError, KeyError, IndexError) as e:
        print(f"info {n}: no summary ({e})")
sys.exit(0 if ok else 1)
PYEOF
exit $fail
