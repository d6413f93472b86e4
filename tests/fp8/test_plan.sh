#!/bin/bash
# plan --precision fp8 (MODEL.md "fp8 weights"): the 14B model's blocks on
# the GPU are 1 byte per linear weight plus a float32 scale per output
# channel, the other block tensors bf16. The bytes are computed here from
# MODEL.md "Configs" (D 5120, F 13824, 351,394,304 parameters and
# 702,788,608 bf16 bytes per block, 40 blocks), not from the code: the
# plan's weights shrink by 40 x (bf16 block - fp8 block) up to the
# buffers' alignment, its header says so, and on a 24 GB GPU (host memory
# for streaming) the fp8 blocks stay resident where the bf16 ones stream.
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir fp8-plan
P=(plan --model synth:wan2.1-14b --ranks 1)
"$SP_BIN" "${P[@]}" --gpu-mem 141GB --json > "$work/b.json" &&
  "$SP_BIN" "${P[@]}" --gpu-mem 141GB --json --precision fp8 > "$work/f.json" &&
  "$SP_BIN" "${P[@]}" --gpu-mem 141GB --precision fp8 > "$work/f.txt" &&
  "$SP_BIN" "${P[@]}" --gpu-mem 24GB --budget 'cpu,*' --json > "$work/b24.json" &&
  "$SP_BIN" "${P[@]}" --gpu-mem 24GB --budget 'cpu,*' --json --precision fp8 > "$work/f24.json" ||
  { echo "FAIL: plan"; exit 1; }
"$PY" - "$work" <<'PYEOF'
import json, sys
d = sys.argv[1]
D, F, params, bf16_block, blocks = 5120, 13824, 351_394_304, 702_788_608, 40
linear = 8 * D * D + 2 * D * F              # the ten linear weights' elements
scales = 9 * D + F                          # their output channels: 8 x D, F, D
fp8_block = linear + 4 * scales + 2 * (params - linear)
print(f"14B block: bf16 {bf16_block} bytes, fp8 {fp8_block} bytes; 40 blocks in fp8 "
      f"{blocks * fp8_block / 1e9:.2f} GB")
w = lambda n: json.load(open(f"{d}/{n}.json"))["ranks"][0]
saved = w("b")["weight_bytes"] - w("f")["weight_bytes"]
want = blocks * (bf16_block - fp8_block)
fails = 0
if abs(saved - want) > blocks * 2 * 256:
    print(f"FAIL: fp8 saves {saved} bytes of weights, MODEL.md gives {want}"); fails += 1
else:
    print(f"ok   fp8 weights {w('f')['weight_bytes']} bytes, {saved} fewer than bf16 (expected {want})")
head = open(f"{d}/f.txt").readline()
gib = blocks * fp8_block / 2**30
if f"{gib:.2f} GB of blocks" not in head or "fp8" not in head:
    print(f"FAIL: the header does not show {gib:.2f} GB of fp8 blocks: {head}"); fails += 1
else:
    print("ok   " + head.strip())
if not (w("b24")["streamed"] and not w("f24")["streamed"]):
    print(f"FAIL: at 24 GB bf16 streams {w('b24')['streamed']}, fp8 {w('f24')['streamed']}")
    fails += 1
else:
    print(f"ok   at 24 GB: bf16 streams {len(w('b24')['streamed'])} blocks, fp8 none")
sys.exit(1 if fails else 0)
PYEOF
