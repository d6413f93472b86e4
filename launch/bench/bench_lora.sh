#!/usr/bin/env bash
# A bypassed LoRA's cost per sampling step on one GPU (MODEL.md "LoRA",
# bypass), in one run:
#
#   launch/bench/bench_lora.sh BUILD_DIR [OUT_DIR]      (default bench-lora)
#
# `run --json` of 4 steps (cfg 5: two micro-batches a step; the steady step
# leaves step 0 out) of synth:wan2.1-14b at 480x832x81, without a LoRA and
# with a rank-LORA_RANK (default 64) LoRA on every linear layer of every
# block (q, k, v, o of both attentions, ffn.0, ffn.2; ComfyUI keys, bf16
# values; its shapes from `inspect --json` of the model) in `--lora-mode
# bypass`. LORA_ROWS picks the precisions (default "bf16"; "bf16 fp8" adds
# the same pair of runs with --precision fp8, whose pairs run as GEMMs of
# their own on the quantised input). Per precision: the steady step without
# and with the LoRA and their ratio (target for bf16: <= 1.03). Table on
# stdout, OUT_DIR/lora_step.json. About 3 minutes of an H100 per precision
# (the synthetic weights are made on the host for each run).
# SP_BENCH_PRESET, SP_BENCH_FRAMES, SP_BENCH_SIZE and SP_BENCH_DEVICE
# (defaults wan2.1-14b, 81, 480x832, cuda) run it smaller, for a check of
# the script itself (wan2.1-tiny, 5, 32x32, cpu).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:?usage: bench_lora.sh BUILD_DIR [OUT_DIR]}" && pwd)
OUT=${2:-bench-lora}
. "$root/launch/bench/bench_step_lib.sh"
RANK=${LORA_RANK:-64}
ROWS=${LORA_ROWS:-bf16}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SP=$B/staticpipe
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$SP" inspect "synth:$PRESET" --json > "$T/inspect.json" || { echo "FAIL: inspect"; exit 1; }
python3 - "$T" "$root" "$RANK" <<'PY' || exit 1
import json, os, sys
import numpy as np
t, root, r = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, os.path.join(root, "tests", "lora"))
import loralib, stlib
c = json.load(open(f"{t}/inspect.json"))["config"]
rng = np.random.default_rng(5)
loralib.block_pairs(rng, c, "comfy", r, stlib.LINEARS, "BF16").write(f"{t}/lora.safetensors")
PY
bench_cond "$T/cond.h5" || exit 1
W=(--model "synth:$PRESET" --cond "$T/cond.h5" --frames "$FRAMES" --size "$SIZE" --cfg 5 --steps 4)
fail=0
for prec in $ROWS; do
  case $prec in
    bf16|fp8|int8) ;;
    *) echo "FAIL: unknown precision '$prec' (bf16, fp8 or int8)"; fail=1; continue ;;
  esac
  for lora in none bypass; do
    name=$prec-$lora
    L=(); [ $lora = bypass ] && L=(--lora "$T/lora.safetensors" --lora-mode bypass)
    echo "=== $name" >&2
    timeout 540 "$SP" run "${W[@]}" --precision "$prec" "${L[@]}" --device "$DEV" --json \
      --no-preview -q -o "$T/$name.h5" > "$T/$name.json" 2> "$T/$name.err" ||
      { echo "FAIL: $name (rc $?): $(tail -3 "$T/$name.err")"; fail=1; }
  done
done
python3 - "$T" "$OUT/lora_step.json" "$RANK" $ROWS <<'PY' || fail=1
import json, sys
d, out, rank, precs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
def step(name):
    try:
        return json.loads(open(f"{d}/{name}.json").read().strip().splitlines()[-1])["steady_step_ms"]
    except Exception as e:
        print(f"FAIL {name}: no JSON ({e})")
        return None
rows, targets, ok = {}, {}, True
print(f"# a rank-{rank} LoRA on every linear layer, --lora-mode bypass; steady step of 4")
print("| precision | step ms, no LoRA | step ms, bypass | ratio |")
print("|---|---|---|---|")
for p in precs:
    a, b = step(f"{p}-none"), step(f"{p}-bypass")
    ok &= a is not None and b is not None
    ratio = b / a if a and b else None
    rows[p] = {"steady_step_ms_none": a, "steady_step_ms_bypass": b, "ratio": ratio}
    fmt = lambda v, f: f % v if v is not None else "-"
    print(f"| {p} | {fmt(a, '%.1f')} | {fmt(b, '%.1f')} | {fmt(ratio, '%.4f')} |")
    if p == "bf16" and ratio is not None:
        targets["bf16 bypass <= 1.03x the step without a LoRA"] = ratio <= 1.03
for what, met in targets.items():
    print(f"target {what}: {'met' if met else 'MISSED'}")
doc = {"bench": "lora_step", "rank": rank, "rows": rows, "targets": targets}
json.dump(doc, open(out, "w"), indent=1)
print(json.dumps(doc))
sys.exit(0 if ok else 1)
PY
exit $fail
