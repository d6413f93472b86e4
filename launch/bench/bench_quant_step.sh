#!/usr/bin/env bash
# Wan 2.1 14B at 480x832x81 with CFG on one GPU: the sampling step with
# bf16 weights, in fp8 (W8A8, the weights quantised at load) and on Q8_0
# weights (the weight-only path), in one run, with each run's device peak
# against the plan's.
#
#   launch/bench/bench_quant_step.sh BUILD_DIR [OUT_DIR]      (default bench-quant-step)
#
# Four `run --json` of 3 steps (cfg 5: two micro-batches a step; step 0
# carries one-time costs, the steady step leaves it out): synth:wan2.1-14b,
# synth:wan2.1-14b --precision fp8 with the default budget and with a budget
# of 19 GiB (--budget cuda:0,19gb: the planner chunks the activations to
# fit), and an `init --dtype q8_0` file of the
# same weights (written once into OUT_DIR/model; random weights: timing and
# memory only). Per run: the steady step, its ratio to the bf16 step of the
# same run (targets: fp8 <= 0.80 of bf16 for the block, weight-only <= 1.05
# for the step), the device peak (cudaMemGetInfo over the run, every
# process on the GPU) against the plan's peak (target within 5%), and for
# the fp8 run under the 19 GiB budget the peak against 19 GiB. Table on
# stdout, OUT_DIR/quant_step.json. About 7 minutes of an H100 or H200 (making the Q8_0 file takes 1-2 of
# them; quantising the fp8 weights at load about one).
# SP_BENCH_PRESET, SP_BENCH_FRAMES, SP_BENCH_SIZE and SP_BENCH_DEVICE
# (defaults wan2.1-14b, 81, 480x832, cuda) run it smaller, for a check of
# the script itself (wan2.1-tiny, 5, 32x32, cpu).
set -u
B=$(cd "${1:?usage: bench_quant_step.sh BUILD_DIR [OUT_DIR]}" && pwd)
OUT=${2:-bench-quant-step}
. "$(dirname "$0")/bench_step_lib.sh"
mkdir -p "$OUT/model"
OUT=$(cd "$OUT" && pwd)
SP=$B/staticpipe
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
bench_cond "$T/cond.h5" || exit 1
Q8=$OUT/model/$PRESET-q8_0.h5
if [ ! -f "$Q8" ]; then
  echo "# making $Q8 (init --dtype q8_0: synth:$PRESET's weights, linear weights Q8_0)" >&2
  "$SP" init --arch "$PRESET" --dtype q8_0 -q -o "$Q8" || { echo "FAIL: init q8_0"; exit 1; }
fi
W=(--frames "$FRAMES" --size "$SIZE" --cfg 5)
fail=0
while read -r name model extra; do
  echo "=== $name: $model $extra" >&2
  # shellcheck disable=SC2086 # extra: flags and their values, or nothing
  timeout 540 "$SP" run --model "$model" --cond "$T/cond.h5" "${W[@]}" --steps 3 $extra \
    --device "$DEV" --json --no-preview -q -o "$T/$name.h5" > "$T/$name.json" 2> "$T/$name.err" ||
    { echo "FAIL: $name (rc $?): $(tail -3 "$T/$name.err")"; fail=1; }
done <<EOF
bf16 synth:$PRESET
fp8 synth:$PRESET --precision fp8
fp8-19g synth:$PRESET --precision fp8 --budget cuda:0,19gb
q8_0 $Q8
EOF
python3 - "$T" "$OUT/quant_step.json" <<'PY' || fail=1
import json, sys
d, out = sys.argv[1], sys.argv[2]
rows, ok = {}, True
for name in ("bf16", "fp8", "fp8-19g", "q8_0"):
    try:
        j = json.loads(open(f"{d}/{name}.json").read().strip().splitlines()[-1])
    except Exception as e:
        print(f"FAIL {name}: no JSON ({e})")
        ok = False
        continue
    r, p = j["ranks"][0], j["plan"]["ranks"][0]
    rows[name] = {"steady_step_ms": j["steady_step_ms"], "device_peak_gib": r["device_peak_bytes"] / 2**30,
                  "plan_peak_gib": p["peak_bytes"] / 2**30, "weights_gib": p["weight_bytes"] / 2**30,
                  "load_s": j.get("load_s")}
base = rows.get("bf16", {}).get("steady_step_ms")
print("| weights | steady step ms | vs bf16 | device peak GiB | plan peak GiB | peak / plan | weights GiB |")
print("|---|---|---|---|---|---|---|")
for name, r in rows.items():
    r["vs_bf16"] = r["steady_step_ms"] / base if base else None
    r["peak_vs_plan"] = r["device_peak_gib"] / r["plan_peak_gib"] if r["plan_peak_gib"] else None
    vs = f"{r['vs_bf16']:.3f}" if r["vs_bf16"] else "-"
    pv = f"{r['peak_vs_plan']:.3f}" if r["peak_vs_plan"] else "-"
    print(f"| {name} | {r['steady_step_ms']:.1f} | {vs} | {r['device_peak_gib']:.2f} | "
          f"{r['plan_peak_gib']:.2f} | {pv} | {r['weights_gib']:.2f} |")
targets = {}
if "q8_0" in rows and rows["q8_0"]["vs_bf16"]:
    targets["weight-only step <= 1.05x bf16"] = rows["q8_0"]["vs_bf16"] <= 1.05
if "fp8-19g" in rows:
    targets["fp8 device peak <= 19 GiB"] = rows["fp8-19g"]["device_peak_gib"] <= 19.0
for name, r in rows.items():
    if r["peak_vs_plan"]:
        targets[f"{name}: device peak within 5% of the plan's"] = abs(r["peak_vs_plan"] - 1) <= 0.05
for what, met in targets.items():
    print(f"target {what}: {'met' if met else 'MISSED'}")
doc = {"rows": rows, "targets": targets}
json.dump(doc, open(out, "w"), indent=1)
print(json.dumps(doc))
sys.exit(0 if ok else 1)
PY
exit $fail
