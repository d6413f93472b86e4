#!/usr/bin/env bash
# Hybrid residency and the pipeline on one GPU, in one run:
#
#   launch/bench/bench_stream.sh BUILD_DIR [OUT_DIR]     (default OUT_DIR bench-stream)
#
# 1. the pinned host-to-device rate, measured with torch in the same run;
# 2. synth:wan2.1-14b, 480x832x81 (32,760 tokens), CFG 5, 2 steps, with 0,
#    25, 50 and 100% of the blocks streamed (--stream-frac), each order of
#    work (--order micro|block): the steady step (step 2) against the
#    all-resident one of the same order, the H2D bytes per step, the device
#    memory against the plan's peak;
# 3. a short clip where copies dominate: 480x832x21 (9,360 tokens), cfg 1,
#    every block streamed: H2D bytes per step over the steady step, a lower
#    bound of the achieved copy rate, against 1;
# 4. the load rate: a 1.3B model file (init) from the page cache to the GPU
#    (run --json weights_s), with and without checksums, against dd's read;
# 5. 1, 2 and 4 ranks sharing the GPU (--transport mpi, device buffers
#    staged through host memory), 1.3B, 9,360 tokens, CFG 5, 3 steps,
#    traced: latents bit-identical, and pairs of blocks spans of different
#    ranks on different micro-batches that overlap in time.
# Prints the tables and log lines on stdout (also OUT_DIR/log.txt), the
# sweep as JSON in OUT_DIR/sweep.json. About 8 minutes on an H200.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:?usage: bench_stream.sh BUILD_DIR [OUT_DIR]}" && pwd)
OUT=${2:-bench-stream}
mkdir -p "$OUT"
cd "$root"
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SP=$B/staticpipe
L=$OUT/log.txt
: > "$L"
t0=$SECONDS
say() { echo "=== [$((SECONDS - t0)) s] $*" | tee -a $L; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
python3 - $T <<'PY'
import sys, h5py, numpy as np
r = np.random.default_rng(3)
with h5py.File(sys.argv[1] + "/cond.h5", "w") as f:
    f["context"] = r.standard_normal((512, 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((512, 4096)).astype(np.float32)
PY
# Measured pinned H2D rate, same run (torch, 702.8 MB = one 14B block).
python3 - >> $L 2>&1 <<'PY'
import torch, time
n = 702_800_000 // 2
h = torch.empty(n, dtype=torch.bfloat16).pin_memory(); d = torch.empty(n, dtype=torch.bfloat16, device="cuda")
for _ in range(3): d.copy_(h, non_blocking=True)
torch.cuda.synchronize(); t = time.perf_counter()
for _ in range(20): d.copy_(h, non_blocking=True)
torch.cuda.synchronize(); dt = (time.perf_counter() - t) / 20
print(f"pinned H2D rate: {n*2/dt/1e9:.2f} GB/s ({dt*1e3:.2f} ms per 702.8 MB)")
PY
tail -1 $L
# 1. Streaming sweep: 14B, 480x832x81, CFG 5, 2 steps (steady = step 2).
for f in 0 0.25 0.5 1; do
  for o in micro block; do
    say "sweep stream-frac $f order $o"
    timeout 75 $SP run --model synth:wan2.1-14b --cond $T/cond.h5 --frames 81 --size 480x832 --steps 2 \
      --cfg 5 --device cuda --stream-frac $f --order $o --json --no-preview -q -o $T/s.h5 \
      > $T/sweep_${f}_$o.json 2> $T/sweep_${f}_$o.err
    say "rc=$? $(tail -2 $T/sweep_${f}_$o.err)"
  done
done
python3 - $T $OUT/sweep.json > $OUT/sweep.txt 2>&1 <<'PY'
import json, sys, glob, os
d = sys.argv[1]
base = {}
rows = []
for f in ("0", "0.25", "0.5", "1"):
    for o in ("micro", "block"):
        p = f"{d}/sweep_{f}_{o}.json"
        try: j = json.load(open(p))
        except Exception as e: print("missing", p, e); continue
        r = j["ranks"][0]
        rows.append((f, o, j["step_ms"], j["steady_step_ms"], j["plan"].get("predicted_step_ms"), r["streamed_blocks"],
                     r["h2d_bytes_per_step"] / 1e9, r["device_peak_bytes"] / 2**30, r["plan_peak_bytes"] / 2**30, r["load_s"]))
        if f == "0": base[o] = j["steady_step_ms"]
print("| stream frac | order | streamed blocks | step 1+2 mean ms | steady step ms | vs resident (same order) | predicted ms | H2D GB/step | device GiB | plan GiB | load s |")
for f, o, s, st, pr, nb, h, dv, pl, ls in rows:
    print(f"| {f} | {o} | {nb} | {s:.1f} | {st:.1f} | {st/base.get(o, st):.4f} | {pr} | {h:.2f} | {dv:.2f} | {pl:.2f} | {ls:.1f} |")
json.dump(rows, open(sys.argv[2], "w"))
PY
cat $OUT/sweep.txt | tee -a $L
# 2. Short clip, copies dominate: 14B 480x832x21 (9,360 tokens), all streamed, cfg 1.
for o in block micro; do
  say "short clip all streamed $o"
  timeout 60 $SP run --model synth:wan2.1-14b --cond $T/cond.h5 --frames 21 --size 480x832 --steps 4 --cfg 1 \
    --device cuda --stream-frac 1 --order $o --json --no-preview -q -o $T/short.h5 > $T/short_$o.json 2>> $L
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); r=j['ranks'][0]; print('short', sys.argv[2], 'steady ms', round(j['steady_step_ms'],1), 'H2D GB/step', r['h2d_bytes_per_step']/1e9, 'rate GB/s (lower bound: bytes / step time)', round(r['h2d_bytes_per_step']/1e6/j['steady_step_ms'],2))" $T/short_$o.json $o | tee -a $L
  timeout 60 $SP run --model synth:wan2.1-14b --cond $T/cond.h5 --frames 21 --size 480x832 --steps 4 --cfg 1 \
    --device cuda --stream-frac 0 --order $o --json --no-preview -q -o $T/short0.h5 > $T/short0_$o.json 2>> $L
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('short resident', sys.argv[2], 'steady ms', round(j['steady_step_ms'],1))" $T/short0_$o.json $o | tee -a $L
done
# 3. Load rate: a 1.3B model file from the page cache against the file read rate.
say "load rate"
$SP init --arch wan2.1-1.3b --seed 1 -q -o $T/m13.h5 2>> $L
cat $T/m13.h5 > /dev/null
dd if=$T/m13.h5 of=/dev/null bs=16M 2>&1 | tail -1 | tee -a $L
for v in "" --no-verify; do
  timeout 60 $SP run --model $T/m13.h5 --cond $T/cond.h5 --frames 5 --size 480x832 --steps 1 --cfg 1 \
    --device cuda $v --json --no-preview -q -o $T/l.h5 > $T/load.json 2>> $L
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['ranks'][0]; g=r['bytes_loaded']/1e9; print('load', sys.argv[2] or 'verify', round(g,3), 'GB: weights', round(r['weights_s'],3), 's =', round(g/r['weights_s'],2), 'GB/s; whole load', round(r['load_s'],2), 's')" $T/load.json "$v" | tee -a $L
done
# 4. Ranks sharing the GPU (host-staged MPI): 1, 2, 4 ranks, 1.3B, 480x832x21, CFG 5, 3 steps, traced.
for np in 1 2 4; do
  say "np $np"
  timeout 90 mpirun -np $np $SP run --model $T/m13.h5 --cond $T/cond.h5 --frames 21 --size 480x832 --steps 3 --cfg 5 \
    --device cuda --transport mpi --trace $T/trace$np.json --json --no-preview -q -o $T/np$np.h5 > $T/np$np.json 2>> $L
  say "rc=$? $(head -c 200 $T/np$np.json)"
done
cp $T/trace4.json $OUT/trace4.json 2>/dev/null
python3 - $T >> $L 2>&1 <<'PY'
import json, sys, h5py
d = sys.argv[1]
a = h5py.File(f"{d}/np1.h5")["latents"][...]
for n in (2, 4):
    b = h5py.File(f"{d}/np{n}.h5")["latents"][...]
    print(f"np {n} latents bit-identical to np 1:", a.tobytes() == b.tobytes(), "steady ms", json.load(open(f"{d}/np{n}.json"))["steady_step_ms"])
print("np 1 steady ms", json.load(open(f"{d}/np1.json"))["steady_step_ms"])
ev = json.load(open(f"{d}/trace4.json"))["traceEvents"]
spans = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "compute" and e.get("name") == "blocks"]
over = 0
for i, x in enumerate(spans):
    for y in spans[i+1:]:
        if x["pid"] != y["pid"] and x["ts"] < y["ts"] + y["dur"] and y["ts"] < x["ts"] + x["dur"]:
            if x.get("args", {}).get("micro_batch") != y.get("args", {}).get("micro_batch") or x.get("args", {}).get("step") != y.get("args", {}).get("step"):
                over += 1
print("np 4 trace: blocks spans", len(spans), "pairs on different ranks overlapping in time on different micro-batches:", over)
PY
say done
