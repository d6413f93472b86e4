#!/usr/bin/env bash
# Bypassed LoRAs on a two-expert model (wan2.2-tiny) on the CUDA backend:
# each expert's bf16 pairs in the arena (MODEL.md "LoRA", bypass). A LoRA
# @high, one @low and an untagged one; 6 steps (4 high-noise, 2 low-noise).
# GPU bypass against the CPU's fp32 merged run and against GPU merged within
# the bf16 end-to-end bound (relative L2 <= 2e-2), the LoRAs moving the
# latents by more than twice that; a rerun, streamed blocks and 2 ranks
# sharing the GPU bit-identical to the 1-rank bypass run; --jobs lines
# switching between @high, @low and none bit-identical to their own runs.
# Skips (77) without a GPU.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_need_gpu
sp_python
sp_mpi
export OMP_NUM_THREADS=2
sp_work_dir gpu-lora-experts
T=$work
seed=${SP_SEED:-$RANDOM}
echo "seed $seed (SP_SEED=$seed replays)"
"$SP_BIN" init --arch wan2.2-tiny --seed "$seed" -q -o "$T/m.h5" || exit 1
"$PY" - "$T" "$seed" <<'PYEOF' || exit 1
import os, sys, h5py, numpy as np
sys.path.insert(0, os.path.join(os.environ["SP_SRC"], "tests", "lora"))
import loralib, stlib
d, seed = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(seed)
c, _ = loralib.model_config(f"{d}/m.h5")
lin = stlib.LINEARS
# ranks that keep the stacked pairs 16-byte aligned rows (multiples of 8)
for name, style, r, names, dt in (("H", "comfy", 16, lin, "BF16"),
                                  ("L", "diffusers", 8, lin[::2], "F32"),
                                  ("U", "kohya", 8, lin[1::3], "F16")):
    loralib.block_pairs(rng, c, style, r, names, dt).write(f"{d}/{name}.safetensors")
with h5py.File(f"{d}/cond.h5", "w") as f:
    f["context"] = rng.standard_normal((int(rng.integers(1, 513)), 4096)).astype(np.float32)
    f["context_null"] = rng.standard_normal((int(rng.integers(1, 513)), 4096)).astype(np.float32)
PYEOF
A=(--model "$T/m.h5" --cond "$T/cond.h5" --frames 17 --size 96x80 --steps 6 --cfg 5,4 --seed "$seed" -q)
H="$T/H.safetensors:1.5@high" LO="$T/L.safetensors:-2@low" U="$T/U.safetensors:1.2"
L=(--lora "$H" --lora "$LO" --lora "$U")
run() { # name, args...
  local n=$1; shift
  "$SP_BIN" run "$@" -o "$T/$n.h5" || { echo "FAIL run $n: $*"; fail=1; }
}
run cpu_merged "${A[@]}" "${L[@]}" --device cpu --lora-mode merged
run cpu_none "${A[@]}" --device cpu
run gpu_merged "${A[@]}" "${L[@]}" --device cuda --lora-mode merged
run gpu_bypass "${A[@]}" "${L[@]}" --device cuda --lora-mode bypass
run gpu_bypass2 "${A[@]}" "${L[@]}" --device cuda --lora-mode bypass
run gpu_bypass_s1 "${A[@]}" "${L[@]}" --device cuda --lora-mode bypass --stream-frac 1
mpirun -np 2 "$SP_BIN" run "${A[@]}" "${L[@]}" --device cuda --lora-mode bypass \
  -o "$T/gpu_bypass_np2.h5" || { echo "FAIL bypass on 2 ranks"; fail=1; }
run gpu_high "${A[@]}" --lora "$H" --device cuda --lora-mode bypass
run gpu_low "${A[@]}" --lora "$LO" --device cuda --lora-mode bypass
run gpu_none "${A[@]}" --device cuda
printf '%s\n' "cond=$T/cond.h5 out=$T/j0.h5 seed=$seed lora=$H" \
  "cond=$T/cond.h5 out=$T/j1.h5 seed=$seed lora=$LO" \
  "cond=$T/cond.h5 out=$T/j2.h5 seed=$seed lora=none" \
  "cond=$T/cond.h5 out=$T/j3.h5 seed=$seed lora=$H" > "$T/jobs.txt"
"$SP_BIN" run --model "$T/m.h5" --frames 17 --size 96x80 --steps 6 --cfg 5,4 -q --device cuda \
  --jobs "$T/jobs.txt" || { echo "FAIL jobs switching LoRAs"; fail=1; }
"$PY" - "$T" <<'PYEOF' || fail=1
import os, sys, h5py, numpy as np
d = sys.argv[1]
ok = True
def get(n):
    with h5py.File(os.path.join(d, n + ".h5"), "r") as f:
        return f["latents"][...]
from sptest import rel_l2 as rel, same
def check(c, what):
    global ok
    print(("ok   " if c else "FAIL ") + what)
    ok = ok and c
try:
    ref, byp = get("cpu_merged"), get("gpu_bypass")
    moved = rel(ref, get("cpu_none"))
    check(moved > 4e-2, f"the LoRAs move the CPU latents by {moved:.3g} (> 4e-2)")
    e = rel(byp, ref)
    check(e <= 2e-2, f"GPU bypass vs CPU merged: rel L2 {e:.3g} (<= 2e-2)")
    e = rel(get("gpu_merged"), ref)
    check(e <= 2e-2, f"GPU merged vs CPU merged: rel L2 {e:.3g} (<= 2e-2)")
    for n in ("gpu_bypass2", "gpu_bypass_s1", "gpu_bypass_np2"):
        check(same(get(n), byp), f"{n} bit-identical to gpu_bypass")
    check(not same(get("gpu_high"), get("gpu_low")), "@high and @low runs differ")
    for j, n in (("j0", "gpu_high"), ("j1", "gpu_low"), ("j2", "gpu_none"), ("j3", "gpu_high")):
        check(same(get(j), get(n)), f"jobs line {j} bit-identical to {n}")
except Exception as ex:  # a missing output is a failure, reported
    check(False, f"reading the outputs: {ex}")
sys.exit(0 if ok else 1)
PYEOF
[ $fail -eq 0 ] && echo "gpu lora experts: all checks passed" || echo "gpu lora experts: FAILED"
exit $fail
