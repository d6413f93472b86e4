#!/usr/bin/env bash
# The CUDA backend through run: a 4-step run of the tiny model on
# the GPU against the CPU backend (bf16 end to end: relative L2 <= 2e-2), a
# GPU rerun bit-identical, 2 and 3 ranks sharing the one GPU through the MPI
# transport (device buffers staged through host memory) bit-identical to 1
# rank, and streamed blocks, both orders of work and row-chunked
# transients bit-identical to all-resident, the H2D bytes per step of each
# order, and --mem-trace. Skips (77) without a GPU.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_need_gpu
sp_python
sp_mpi
export OMP_NUM_THREADS=2
sp_work_dir gpu-run
T=$work
"$SP_BIN" init --arch wan2.1-tiny --seed $RANDOM -q -o "$T/m.h5" || exit 1
"$PY" - "$T/cond.h5" <<'PYEOF' || exit 1
import sys, h5py, numpy as np
r = np.random.default_rng()
with h5py.File(sys.argv[1], "w") as f:
    f["context"] = r.standard_normal((int(r.integers(1, 513)), 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((int(r.integers(1, 513)), 4096)).astype(np.float32)
PYEOF
A0=(--model "$T/m.h5" --cond "$T/cond.h5" --frames 17 --size 96x80 --steps 4 --cfg 5 --seed $RANDOM)
A=("${A0[@]}" -q)
"$SP_BIN" run "${A[@]}" --device cpu -o "$T/cpu.h5" || { echo "FAIL cpu run"; exit 1; }
"$SP_BIN" run "${A[@]}" --device cuda -o "$T/gpu.h5" || { echo "FAIL gpu run"; exit 1; }
"$SP_BIN" run "${A[@]}" --device cuda -o "$T/gpu2.h5" || { echo "FAIL gpu rerun"; exit 1; }
# Hybrid residency: a budget that leaves room for only some of the blocks
# streams the others from pinned host memory (the plan shows which); the
# latents stay bit-identical to all-resident.
"$SP_BIN" run "${A[@]}" --device cuda --budget "cuda:0,1055mb;cpu,*" -o "$T/gpu_streamed.h5" \
  || { echo "FAIL gpu run with streamed blocks"; fail=1; }
for np in 2 3; do
  mpirun -np $np "$SP_BIN" run "${A[@]}" --device cuda -o "$T/gpu_np$np.h5" || { echo "FAIL gpu np $np"; fail=1; }
done
# Every block streamed, in each order (JSON: streamed blocks, H2D bytes per
# step); half streamed block-major on 2 ranks; transients in row chunks
# (the tiny clip has 150 tokens); the memory table and its trace counter.
for order in micro block; do
  "$SP_BIN" run "${A[@]}" --device cuda --stream-frac 1 --order $order --json \
    -o "$T/gpu_s1_$order.h5" > "$T/s1_$order.json" || { echo "FAIL --stream-frac 1 --order $order"; fail=1; }
done
mpirun -np 2 "$SP_BIN" run "${A[@]}" --device cuda --stream-frac 0.5 --order block \
  -o "$T/gpu_np2_half_block.h5" || { echo "FAIL np 2 --stream-frac 0.5 --order block"; fail=1; }
"$SP_BIN" run "${A[@]}" --device cuda --chunk-rows 64 -o "$T/gpu_chunk64.h5" \
  || { echo "FAIL --chunk-rows 64"; fail=1; }
"$SP_BIN" run "${A0[@]}" --device cuda --mem-trace --trace "$T/mem.json" -o "$T/gpu_mem.h5" \
  2> "$T/mem.err" || { echo "FAIL --mem-trace"; fail=1; }
"$PY" - "$T" <<'PYEOF' || fail=1
import json, os, sys
d = sys.argv[1]
ok = True
def check(c, what):
    global ok
    print(("ok   " if c else "FAIL ") + what)
    ok = ok and c
r = {o: json.load(open(os.path.join(d, f"s1_{o}.json")))["ranks"][0] for o in ("micro", "block")}
nb = r["micro"]["last_block"] - r["micro"]["first_block"] + 1
check(all(r[o]["streamed_blocks"] == nb and r[o]["order"] == o for o in r),
      f"--stream-frac 1: all {nb} blocks streamed, in the order asked")
m, b = r["micro"]["h2d_bytes_per_step"], r["block"]["h2d_bytes_per_step"]
check(b > 0 and m == 2 * b, f"H2D per step: micro-batch-major {m} = 2 micro-batches x block-major {b}")
check(r["micro"]["device_peak_bytes"] >= r["micro"]["device_in_use_bytes"] > 0, "device memory reported")
err = open(os.path.join(d, "mem.err")).read()
rows = [l for l in err.splitlines() if "mem-trace:" in l and ("resident" in l or "streamed" in l)]
check(len(rows) == nb, f"--mem-trace: one row per block ({len(rows)})")
ev = json.load(open(os.path.join(d, "mem.json")))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
check(any(e.get("ph") == "C" for e in ev), "--mem-trace: counter events in the trace")
sys.exit(0 if ok else 1)
PYEOF
"$PY" - "$T" <<'PYEOF' || fail=1
import os, sys, h5py, numpy as np
d = sys.argv[1]
get = lambda n: h5py.File(os.path.join(d, n))["latents"][...]
c, g = get("cpu.h5").astype(np.float64), get("gpu.h5")
err = np.linalg.norm(g - c) / np.linalg.norm(c)
ok = err <= 2e-2
print(f"{'ok  ' if ok else 'FAIL'} 4-step run: gpu vs cpu rel L2 {err:.3e} (tol 2e-2)")
for n in ("gpu2.h5", "gpu_np2.h5", "gpu_np3.h5", "gpu_streamed.h5", "gpu_s1_micro.h5",
          "gpu_s1_block.h5", "gpu_np2_half_block.h5", "gpu_chunk64.h5", "gpu_mem.h5"):
    if not os.path.exists(os.path.join(d, n)):
        print(f"FAIL {n} missing"); ok = False; continue
    same = get(n).tobytes() == g.tobytes()
    print(f"{'ok  ' if same else 'FAIL'} {n} bit-identical to the 1-rank GPU run")
    ok = ok and same
sys.exit(0 if ok else 1)
PYEOF
exit $fail
