#!/usr/bin/env bash
# One Wan block and the full forward, staticpipe against PyTorch, in one run
# on a GPU machine:
#
#   launch/bench/bench_block.sh BUILD_DIR [OUT_JSON]
#
# staticpipe: `forward --device cuda` of synth:wan2.1-14b and -1.3b at
# 480x832x81 (32,760 tokens) and of -14b at 720x1280x81 (75,600 tokens); the
# block time is the blocks' time over their number (one forward, weights
# resident), the full forward is embed + blocks + head. The 14B block at
# 480p also with quantized weights, beside its bf16 row of the same run:
# fp8 (--precision fp8: W8A8, the weights quantised at load), fp8-fast (the
# same with --fp8-accum fast: cuBLASLt's fast fp8 accumulation, sm_90),
# fp8-int8attn and fp8-fast-int8attn (fp8 and fp8-fast with --attn
# fa3-int8: the 8-bit attention on the self-attention), fp8-fp8attn and
# fp8-fast-fp8attn (the same with --attn fa3-fp8: the all-8-bit
# attention, P V in e4m3 too), int8
# (--precision int8: W8A8 with int8 GEMMs, the path for GPUs without fp8)
# and Q8_0 (the weight-only path: each weight dequantised to bf16 right
# before its GEMM; an `init --dtype q8_0` file of synth:wan2.1-14b's
# weights, made in QUANT_MODEL_DIR, default a temporary folder: 15 GB, a
# minute or two), each with its ratio to the bf16 block (vs_bf16; target
# for the fp8 rows <= 0.80, their meets_target in the JSON). PyTorch: the
# same block eager and under torch.compile (launch/bench/torch_block.py) in
# the same run. Prints a table (header lines start with '#') and one JSON
# line; OUT_JSON gets the JSON too. BENCH_BLOCK_ROWS picks rows
# (MODEL/RES/WEIGHTS words, default all eleven: 14b/480p/bf16 14b/480p/fp8
# 14b/480p/fp8-fast 14b/480p/fp8-int8attn 14b/480p/fp8-fast-int8attn
# 14b/480p/fp8-fp8attn 14b/480p/fp8-fast-fp8attn 14b/480p/int8 14b/480p/q8_0
# 1.3b/480p/bf16 14b/720p/bf16; a quantized row's ratio needs
# 14b/480p/bf16 among them); TORCH_BUDGET_S=0 leaves PyTorch out (its
# columns then read '-').
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:?usage: bench_block.sh BUILD_DIR [OUT_JSON]}" && pwd)
out=${2:-bench-block.json}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export NCCL_NVLS_ENABLE=0
. "$root/launch/bench/bench_precision.sh"
python3 - "$T" <<'PYEOF'
import sys, h5py, numpy as np
r = np.random.default_rng(11)
for name, (f, h, w) in {"480p": (21, 60, 104), "720p": (21, 90, 160)}.items():
    with h5py.File(f"{sys.argv[1]}/{name}.h5", "w") as fh:
        fh["latent"] = r.standard_normal((16, f, h, w)).astype(np.float32)
        fh["context"] = r.standard_normal((512, 4096)).astype(np.float32)
PYEOF
rows=${BENCH_BLOCK_ROWS:-14b/480p/bf16 14b/480p/fp8 14b/480p/fp8-fast 14b/480p/fp8-int8attn 14b/480p/fp8-fast-int8attn 14b/480p/fp8-fp8attn 14b/480p/fp8-fast-fp8attn 14b/480p/int8 14b/480p/q8_0 1.3b/480p/bf16 14b/720p/bf16}
QD=${QUANT_MODEL_DIR:-$T}
Q8=$QD/wan2.1-14b-q8_0.h5
if [[ " $rows " == *" 14b/480p/q8_0 "* ]] && [ ! -f "$Q8" ]; then
  echo "# making $Q8 (init --dtype q8_0)" >&2
  "$B/staticpipe" init --arch wan2.1-14b --dtype q8_0 -q -o "$Q8" || echo "FAIL: init q8_0" >&2
fi
for c in $rows; do
  set -- ${c//\// }
  model=synth:wan2.1-$1
  if [ "$3" = q8_0 ]; then
    extra=(); model=$Q8
  elif bench_precision "$3"; then
    extra=("${prec_args[@]}")
  else
    echo "FAIL: row $c: weights '$3' is not one of $BENCH_PRECISION_WORDS q8_0" >&2
    continue
  fi
  echo "# staticpipe forward $model ${extra[*]} at $2" >&2
  "$B/staticpipe" forward --model "$model" "${extra[@]}" --latent "$T/$2.h5" --cond "$T/$2.h5" \
    --timestep 999 --device cuda -o "$T/pred.h5" 2> "$T/sp_$1_$2_$3.log" ||
    tail -3 "$T/sp_$1_$2_$3.log" >&2
  # the row's timing line as soon as it is measured: a run stopped before the
  # table still leaves the rows it measured in its log
  grep -h -e "ms per block" -e "device memory in use" "$T/sp_$1_$2_$3.log" | sed "s|^|# $c: |" >&2
done
[ "${TORCH_BUDGET_S:-330}" = 0 ] ||
( cd "$root/launch/bench" && PYTHONUNBUFFERED=1 python3 torch_block.py --reps 5 --time-budget ${TORCH_BUDGET_S:-330} \
    --json-out "$T/torch.json" > "$T/torch.log" 2>&1 ) || tail -5 "$T/torch.log" >&2
python3 - "$T" "$out" "$rows" <<'PYEOF'
import json, os, re, sys
d, out, asked = sys.argv[1], sys.argv[2], sys.argv[3].split()
rows = []
torch = {}
if os.path.exists(f"{d}/torch.json"):
    for r in json.load(open(f"{d}/torch.json")).get("results", []):
        torch[(r.get("case"), r.get("mode"))] = r
TARGET = 0.80  # the fp8 rows' block against the bf16 block of the same run
for c in asked:  # the rows in the order they ran; torch_block.py's case names
    model, res, w = c.split("/")
    case = model if res == "480p" else f"{model}-{res}"
    if not os.path.exists(f"{d}/sp_{model}_{res}_{w}.log"):
        continue  # a row the loop above refused
    log = open(f"{d}/sp_{model}_{res}_{w}.log").read()
    m = re.search(r"embed ([\d.]+) ms, (\d+) blocks ([\d.]+) ms \(([\d.]+) ms per block, ([\d.]+) TFLOP/s\), head ([\d.]+) ms", log)
    mem = re.search(r"device memory in use ([\d.]+) GiB", log)
    row = {"case": case, "weights": w, "gpu_mem_gib": float(mem.group(1)) if mem else None}
    if m:
        emb, nb, blk, per, tf, head = float(m[1]), int(m[2]), float(m[3]), float(m[4]), float(m[5]), float(m[6])
        row.update(block_ms=per, block_tflops=tf, forward_ms=emb + blk + head, blocks_ms=blk,
                   forward_over_blocks=(emb + blk + head) / blk)
    for mode, key in (("eager", "eager"), ("compiled", "compile")):
        t = torch.get((case, mode))
        row[f"torch_{key}_ms"] = t.get("ms") if t else None
        if w == "bf16" and t and t.get("ms") is None and t.get("status"):
            # a baseline torch_block.py did not time (the budget, an error): say why
            row[f"torch_{key}_status"] = t["status"]
            print(f"# {case} torch {mode}: {t['status']}")
    if w != "bf16":  # torch's rows are bf16's
        row["torch_eager_ms"] = row["torch_compile_ms"] = None
    if row.get("block_ms") and row.get("torch_compile_ms"):
        row["ratio_to_compile"] = row["block_ms"] / row["torch_compile_ms"]
    rows.append(row)
for row in rows:  # a quantized row's ratio is to our bf16 block of the same case
    base = next((r for r in rows if r["case"] == row["case"] and r["weights"] == "bf16"), {})
    if row["weights"] != "bf16" and row.get("block_ms") and base.get("block_ms"):
        row["vs_bf16_block"] = row["block_ms"] / base["block_ms"]
        if row["weights"].startswith("fp8"):
            row["meets_target"] = row["vs_bf16_block"] <= TARGET
f = lambda v, p=".2f": format(v, p) if isinstance(v, (int, float)) else "-"
print("# case      weights            block_ms  TFLOP/s  torch_eager  torch_compile  ratio  vs_bf16  forward_ms  fwd/blocks  gpu_GiB")
for r in rows:
    print(f"  {r['case']:<9} {r['weights']:<18} {f(r.get('block_ms')):>9} {f(r.get('block_tflops'),'.1f'):>8} "
          f"{f(r.get('torch_eager_ms')):>12} {f(r.get('torch_compile_ms')):>14} {f(r.get('ratio_to_compile'),'.3f'):>6} "
          f"{f(r.get('vs_bf16_block'),'.3f'):>8} "
          f"{f(r.get('forward_ms'),'.1f'):>11} {f(r.get('forward_over_blocks'),'.3f'):>11} {f(r.get('gpu_mem_gib')):>8}")
doc = {"bench": "block", "rows": rows}
print(json.dumps(doc))
open(out, "w").write(json.dumps(doc) + "\n")
PYEOF
