#!/usr/bin/env bash
# PREDICTIONS of the planner's layout choice (planner/grid_choice.c), not
# measurements: no multi-GPU machine has been measured.
#
#   launch/bench/predict_layouts.sh [STATICPIPE] [JSON_OUT]
#
# For Wan 2.1 14B and Wan 2.2 A14B (synth:wan2.1-14b, synth:wan2.2-a14b) at
# 480x832x81 and 720x1280x81 with CFG (2 micro-batches), on the inventories
# of launch/bench/inventories/ (1, 2, 4, 8 H200 on NVLink; 2, 4 RTX 4090 on
# PCIe), runs `staticpipe plan --layout auto --budget 'cpu,*' --json` and
# prints a markdown table: the chosen layout, its predicted step and the
# whole sampling (50 steps for 2.1, 40 for 2.2; the DiT only, no text
# encoder or VAE), beside the published times where there are some, then
# every layout considered per case. The JSON of every case goes to JSON_OUT
# (default: predict_layouts.json in the current directory).
# Needs only a CPU build and python3; about a minute on two cores.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
SP=${1:-$root/build/staticpipe}
OUT=${2:-predict_layouts.json}
[ -x "$SP" ] || { echo "predict_layouts.sh: $SP is not an executable staticpipe" >&2; exit 2; }
: >"$OUT" || { echo "predict_layouts.sh: cannot write $OUT" >&2; exit 2; }
INV=$root/launch/bench/inventories
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for model in wan2.1-14b wan2.2-a14b; do
  for size in 480x832 720x1280; do
    for inv in h200x1 h200x2 h200x4 h200x8 rtx4090x2 rtx4090x4; do
      "$SP" plan --model synth:$model --cfg 5 --frames 81 --size $size --inventory "$INV/$inv.json" \
        --budget 'cpu,*' --layout auto --json >"$TMP/$model-$size-$inv.json" 2>"$TMP/err" \
        || { echo "predict_layouts.sh: plan failed for $model $size $inv: $(cat "$TMP/err")" >&2; exit 1; }
    done
  done
done
python3 - "$TMP" "$OUT" <<'PY'
import json, os, sys
tmp, out = sys.argv[1], sys.argv[2]
steps = {"wan2.1-14b": 50, "wan2.2-a14b": 40}
# published wall times (whole generation) for comparison, H100
published = {
    ("wan2.2-a14b", "720x1280", "h200x1"): "1041.5 s (1 H100)",
    ("wan2.2-a14b", "720x1280", "h200x8"): "155.1 s (8 H100, Ulysses)",
    ("wan2.1-14b", "720x1280", "h200x1"): "1837.9 s (1 H100, offloaded)",
    ("wan2.1-14b", "720x1280", "h200x8"): "287.9 s (8 H100)",
}
gpus = {"h200x1": "1 H200", "h200x2": "2 H200", "h200x4": "4 H200", "h200x8": "8 H200",
        "rtx4090x2": "2 RTX 4090", "rtx4090x4": "4 RTX 4090"}
cases, rows, detail = [], [], []
for model in ("wan2.1-14b", "wan2.2-a14b"):
    for size in ("480x832", "720x1280"):
        for inv in gpus:
            c = json.load(open(os.path.join(tmp, "%s-%s-%s.json" % (model, size, inv))))
            c.update(model=model, size=size, inventory=inv, steps=steps[model])
            cases.append(c)
            ch = [e for e in c["layouts"] if e["layout"] == c["chosen"]]
            if ch:
                e = ch[0]
                step = e["step_ms"] / 1e3
                rows.append("| %s | %sx81 | %s | %s | %.2f | %.1f | %.1f | %d | %s |" % (
                    model, size, gpus[inv], e["layout"], step, step * steps[model],
                    e["peak_bytes"] / 2**30, e["streamed_blocks"],
                    published.get((model, size, inv), "-")))
            else:
                rows.append("| %s | %sx81 | %s | none fits | - | - | - | - | %s |" % (
                    model, size, gpus[inv], published.get((model, size, inv), "-")))
            cells = []
            for e in c["layouts"]:
                if e["ok"]:
                    cells.append("%s%s %.2f" % (e["layout"], "*" if e["layout"] == c["chosen"] else "",
                                                e["step_ms"] / 1e3))
                else:
                    why = "micro-batches" if "micro-batch" in e["why"] else (
                        "heads" if "divide" in e["why"] else "memory")
                    cells.append("%s refused (%s)" % (e["layout"], why))
            detail.append("| %s | %sx81 | %s | %s |" % (model, size, gpus[inv], ", ".join(cells)))
print("PREDICTIONS (planner/grid_choice.c; no multi-GPU machine measured). CFG on (2 micro-batches),")
print("budget auto with streaming allowed (cpu,*); the DiT's sampling only (no text encoder, no VAE).")
print()
print("| model | clip | GPUs | chosen layout | predicted s/step | predicted DiT s (steps) | peak GiB/rank | streamed blocks | published (whole run) |")
print("|---|---|---|---|---|---|---|---|---|")
print("\n".join(rows))
print()
print("Every layout considered (R x S x U: predicted s/step; * chosen; refused with the reason):")
print()
print("| model | clip | GPUs | layouts |")
print("|---|---|---|---|")
print("\n".join(detail))
json.dump({"predictions": True, "cases": cases}, open(out, "w"), indent=1)
print()
print("JSON of every case: %s" % out)
PY
