#!/usr/bin/env bash
# One Wan block and the full forward, staticpipe against PyTorch, in one run
# on a GPU machine:
#
#   launch/bench/bench_block.sh BUILD_DIR [OUT_JSON]
#
# staticpipe: `forward --device cuda` of synth:wan2.1-14b and -1.3b at
# 480x832x81 (32,760 tokens) and of -14b at 720x1280x81 (75,600 tokens); the
# block time is the blocks' time over their number (one forward, weights
# resident), the full forward is embed + blocks + head. PyTorch: the same
# block eager and under torch.compile (launch/bench/torch_block.py) in the
# same run. Prints a table (header lines start with '#') and one JSON line;
# OUT_JSON gets the JSON too.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:?usage: bench_block.sh BUILD_DIR [OUT_JSON]}" && pwd)
out=${2:-bench-block.json}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export NCCL_NVLS_ENABLE=0
python3 - "$T" <<'PYEOF'
import sys, h5py, numpy as np
r = np.random.default_rng(11)
for name, (f, h, w) in {"480p": (21, 60, 104), "720p": (21, 90, 160)}.items():
    with h5py.File(f"{sys.argv[1]}/{name}.h5", "w") as fh:
        fh["latent"] = r.standard_normal((16, f, h, w)).astype(np.float32)
        fh["context"] = r.standard_normal((512, 4096)).astype(np.float32)
PYEOF
for c in "14b 480p" "1.3b 480p" "14b 720p"; do
  set -- $c
  echo "# staticpipe forward synth:wan2.1-$1 at $2" >&2
  "$B/staticpipe" forward --model "synth:wan2.1-$1" --latent "$T/$2.h5" --cond "$T/$2.h5" \
    --timestep 999 --device cuda -o "$T/pred.h5" 2> "$T/sp_$1_$2.log" || tail -3 "$T/sp_$1_$2.log" >&2
done
( cd "$root/launch/bench" && PYTHONUNBUFFERED=1 python3 torch_block.py --reps 5 --time-budget ${TORCH_BUDGET_S:-330} \
    --json-out "$T/torch.json" > "$T/torch.log" 2>&1 ) || tail -5 "$T/torch.log" >&2
python3 - "$T" "$out" <<'PYEOF'
import json, os, re, sys
d, out = sys.argv[1], sys.argv[2]
rows = []
torch = {}
if os.path.exists(f"{d}/torch.json"):
    for r in json.load(open(f"{d}/torch.json")).get("results", []):
        torch[(r.get("case"), r.get("mode"))] = r
for model, res, case in (("14b", "480p", "14b"), ("1.3b", "480p", "1.3b"), ("14b", "720p", "14b-720p")):
    log = open(f"{d}/sp_{model}_{res}.log").read()
    m = re.search(r"embed ([\d.]+) ms, (\d+) blocks ([\d.]+) ms \(([\d.]+) ms per block, ([\d.]+) TFLOP/s\), head ([\d.]+) ms", log)
    mem = re.search(r"device memory in use ([\d.]+) GiB", log)
    row = {"case": case, "gpu_mem_gib": float(mem.group(1)) if mem else None}
    if m:
        emb, nb, blk, per, tf, head = float(m[1]), int(m[2]), float(m[3]), float(m[4]), float(m[5]), float(m[6])
        row.update(block_ms=per, block_tflops=tf, forward_ms=emb + blk + head, blocks_ms=blk,
                   forward_over_blocks=(emb + blk + head) / blk)
    for mode, key in (("eager", "eager"), ("compiled", "compile")):
        t = torch.get((case, mode))
        row[f"torch_{key}_ms"] = t.get("ms") if t else None
    if row.get("block_ms") and row.get("torch_compile_ms"):
        row["ratio_to_compile"] = row["block_ms"] / row["torch_compile_ms"]
    rows.append(row)
f = lambda v, p=".2f": format(v, p) if isinstance(v, (int, float)) else "-"
print("# case       block_ms  TFLOP/s  torch_eager  torch_compile  ratio  forward_ms  fwd/blocks  gpu_GiB")
for r in rows:
    print(f"  {r['case']:<9} {f(r.get('block_ms')):>9} {f(r.get('block_tflops'),'.1f'):>8} "
          f"{f(r.get('torch_eager_ms')):>12} {f(r.get('torch_compile_ms')):>14} {f(r.get('ratio_to_compile'),'.3f'):>6} "
          f"{f(r.get('forward_ms'),'.1f'):>11} {f(r.get('forward_over_blocks'),'.3f'):>11} {f(r.get('gpu_mem_gib')):>8}")
doc = {"bench": "block", "rows": rows}
print(json.dumps(doc))
open(out, "w").write(json.dumps(doc) + "\n")
PYEOF
