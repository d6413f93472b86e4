#!/usr/bin/env bash
# Two experts (Wan 2.2, wan2.2-tiny) on the CUDA backend through run: a
# 6-step run (shift 12: 4 high-noise steps, then 2 low-noise ones) on the
# GPU against the CPU backend (bf16 end to end: relative L2 <= 2e-2, the
# tolerance of test_gpu_run.sh); then, bit-identical to that GPU run: a
# rerun, blocks swapped at the switch (a budget 1 byte short of both
# experts resident, with a cpu entry: the planner must pick swap; the swap
# moves the same bytes), streamed blocks (each expert's copy through the
# slots), 2 ranks sharing the one GPU, resident and swapping. The JSON
# reports the switch step against the other steps. Skips (77) without a GPU.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_need_gpu
sp_python
sp_mpi
export OMP_NUM_THREADS=2
sp_work_dir gpu-a14b
T=$work
"$SP_BIN" init --arch wan2.2-tiny --seed $RANDOM -q -o "$T/m.h5" || exit 1
"$PY" - "$T/cond.h5" <<'PYEOF' || exit 1
import sys, h5py, numpy as np
r = np.random.default_rng()
with h5py.File(sys.argv[1], "w") as f:
    f["context"] = r.standard_normal((int(r.integers(1, 513)), 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((int(r.integers(1, 513)), 4096)).astype(np.float32)
PYEOF
W=(--frames 17 --size 96x80 --cfg 5,4)
A=(--model "$T/m.h5" --cond "$T/cond.h5" "${W[@]}" --steps 6 --seed $RANDOM -q)
"$SP_BIN" run "${A[@]}" --device cpu -o "$T/cpu.h5" || { echo "FAIL cpu run"; exit 1; }
"$SP_BIN" run "${A[@]}" --device cuda --json -o "$T/gpu.h5" > "$T/gpu.json" \
  || { echo "FAIL gpu run"; exit 1; }
"$SP_BIN" run "${A[@]}" --device cuda -o "$T/gpu2.h5" || { echo "FAIL gpu rerun"; fail=1; }
# The budgets that force the swap: each rank's resident peak (the planner's,
# at 80 GiB) less one byte; the cpu entry lets the planner keep both
# experts' blocks in pinned host memory.
budget() { # RANKS
  "$SP_BIN" plan --model "$T/m.h5" "${W[@]}" --ranks "$1" --gpu-mem 80gb --json |
    "$PY" -c 'import json, sys
p = json.load(sys.stdin)["ranks"]
assert all(r["experts"] == "resident" for r in p), p
print(";".join(f"cuda:{r['"'"'rank'"'"']},{r['"'"'peak_bytes'"'"'] - 1}b" for r in p) + ";cpu,*")'
}
B1=$(budget 1) && B2=$(budget 2) || { echo "FAIL: the resident plans"; exit 1; }
"$SP_BIN" run "${A[@]}" --device cuda --budget "$B1" --json -o "$T/gpu_swap.h5" \
  > "$T/swap.json" || { echo "FAIL gpu run swapping ($B1)"; fail=1; }
"$SP_BIN" run "${A[@]}" --device cuda --stream-frac 0.5 -o "$T/gpu_stream.h5" \
  || { echo "FAIL gpu run streaming half the blocks"; fail=1; }
mpirun -np 2 "$SP_BIN" run "${A[@]}" --device cuda -o "$T/gpu_np2.h5" \
  || { echo "FAIL gpu np 2"; fail=1; }
mpirun -np 2 "$SP_BIN" run "${A[@]}" --device cuda --budget "$B2" --json \
  -o "$T/gpu_np2_swap.h5" > "$T/np2_swap.json" || { echo "FAIL gpu np 2 swapping ($B2)"; fail=1; }
"$PY" - "$T" <<'PYEOF' || fail=1
import json, os, sys, h5py, numpy as np
d = sys.argv[1]
ok = True
def check(c, what):
    global ok
    print(("ok   " if c else "FAIL ") + what)
    ok = ok and c
def js(n):
    try:
        return json.loads(open(os.path.join(d, n)).read().strip().splitlines()[-1])
    except Exception as e:
        print(f"FAIL {n}: no JSON summary ({e})")
        return None
res, sw, sw2 = js("gpu.json"), js("swap.json"), js("np2_swap.json")
check(res and all(r["experts"] == "resident" for r in res["plan"]["ranks"]),
      "default budget: both experts resident")
check(sw and all(r["experts"] == "swap" for r in sw["plan"]["ranks"]),
      "1 byte short of resident, cpu entry: swap")
check(sw2 and any(r["experts"] == "swap" for r in sw2["plan"]["ranks"]),
      "2 ranks, 1 byte short each: some rank swaps")
for j, n in ((res, "resident"), (sw, "swap")):
    if j:
        check(j.get("switch_step_ms", 0) > 0 and j.get("other_step_ms", 0) > 0,
              f"{n}: switch step {j.get('switch_step_ms', 0):.1f} ms, others "
              f"{j.get('other_step_ms', 0):.1f} ms (ratio {j.get('switch_ratio', 0):.3f})")
if sw:
    # the swaps' copies count as host-to-device bytes (nothing is streamed)
    h2d = sw["ranks"][0]["h2d_bytes_per_step"]
    check(h2d > 0, f"swap: {h2d} bytes host to device per step on average")
get = lambda n: h5py.File(os.path.join(d, n))["latents"][...]
c, g = get("cpu.h5").astype(np.float64), get("gpu.h5")
err = np.linalg.norm(g - c) / np.linalg.norm(c)
check(err <= 2e-2, f"6-step two-expert run: gpu vs cpu rel L2 {err:.3e} (tol 2e-2)")
for n in ("gpu2.h5", "gpu_swap.h5", "gpu_stream.h5", "gpu_np2.h5", "gpu_np2_swap.h5"):
    if not os.path.exists(os.path.join(d, n)):
        check(False, f"{n} missing")
        continue
    check(get(n).tobytes() == g.tobytes(), f"{n} bit-identical to the 1-rank resident GPU run")
sys.exit(0 if ok else 1)
PYEOF
exit $fail
