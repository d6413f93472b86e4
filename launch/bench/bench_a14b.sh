#!/usr/bin/env bash
# Wan 2.2 A14B (two experts) on one GPU: the step that switches experts
# against the other steps, with both experts resident and with the blocks
# swapped at the switch.
#
#   launch/bench/bench_a14b.sh BUILD_DIR [OUT_DIR]      (default OUT_DIR bench-a14b)
#
# synth:wan2.2-a14b (random weights: timing only), 480x832x81 (32,760
# tokens), CFG 4,3 (2 micro-batches), 4 steps with --shift 12 --boundary 0.95: the
# shifted schedule (shift 12) gives timesteps 999, 972 (high noise), 922,
# 799 (low noise), so step 2 is the switch; step 1 and 3 are the other
# steps (step 0 carries one-time costs and is left out). Two runs:
#   resident  both experts' blocks in device memory (the default budget);
#   swap      a budget 1 byte short of that plan's peak with a cpu entry, so
#             the planner must pick swap (one device copy of the blocks, both
#             experts' in pinned host memory; run --json's plan says "swap").
# Prints a table (per run: the plan's choice and predicted switch cost, the
# switch step, the other steps' mean, their ratio against the target 1.05)
# and writes OUT_DIR/a14b.json. About 4 minutes on an H200 (most of it
# making the random weights, twice).
set -u
B=$(cd "${1:?usage: bench_a14b.sh BUILD_DIR [OUT_DIR]}" && pwd)
OUT=${2:-bench-a14b}
mkdir -p "$OUT"
SP=$B/staticpipe
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
python3 - "$T/cond.h5" <<'PY' || exit 1
import sys, h5py, numpy as np
r = np.random.default_rng(3)
with h5py.File(sys.argv[1], "w") as f:
    f["context"] = r.standard_normal((512, 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((512, 4096)).astype(np.float32)
PY
W=(--frames 81 --size 480x832 --cfg 4,3)
RUN=(run --model synth:wan2.2-a14b --cond "$T/cond.h5" "${W[@]}" --steps 4 --shift 12 --boundary 0.95
     --device cuda --json --no-preview -q)
# The resident plan on this GPU (its memory as the planner sees it), then
# the swap budget: 1 byte short of that peak.
gib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | head -1)
"$SP" plan --model synth:wan2.2-a14b "${W[@]}" --ranks 1 --gpu-mem "$((gib / 1024))gb" --json \
  > "$T/plan.json" || { echo "FAIL: plan"; exit 1; }
budget=$(python3 - "$T/plan.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["ranks"][0]
assert r["experts"] == "resident", r["experts"]
print(f"cuda:0,{r['peak_bytes'] - 1}b;cpu,*")
PY
) || { echo "FAIL: both experts do not fit one GPU of $gib MiB: no resident baseline"; exit 1; }
fail=0
for mode in resident swap; do
  extra=()
  [ $mode = swap ] && extra=(--budget "$budget")
  echo "=== $mode ${extra[*]}" >&2
  timeout 200 "$SP" "${RUN[@]}" "${extra[@]}" -o "$T/$mode.h5" > "$T/$mode.json" 2> "$T/$mode.err" ||
    { echo "FAIL: $mode run (rc $?): $(tail -3 "$T/$mode.err")"; fail=1; }
done
python3 - "$T" "$OUT/a14b.json" <<'PY' || fail=1
import json, sys, h5py
d, out = sys.argv[1], sys.argv[2]
rows, ok = [], True
for mode in ("resident", "swap"):
    try:
        j = json.loads(open(f"{d}/{mode}.json").read().strip().splitlines()[-1])
    except Exception as e:
        print(f"FAIL {mode}: no JSON ({e})"); ok = False; continue
    p = j["plan"]["ranks"][0]
    row = {"mode": mode, "plan": p["experts"], "predicted_switch_ms": p["predicted_switch_ms"],
           "step_ms": j["step_ms"], "switch_step_ms": j.get("switch_step_ms", 0),
           "other_step_ms": j.get("other_step_ms", 0), "ratio": j.get("switch_ratio", 0),
           "h2d_gb": j["ranks"][0]["h2d_bytes_per_step"] * j["steps"] / 1e9,
           "device_peak_gib": j["ranks"][0]["device_peak_bytes"] / 2**30}
    row["within_target"] = 0 < row["ratio"] <= 1.05
    ok &= row["plan"] == mode and row["ratio"] > 0
    rows.append(row)
try:
    same = h5py.File(f"{d}/resident.h5")["latents"][...].tobytes() == \
        h5py.File(f"{d}/swap.h5")["latents"][...].tobytes()
except Exception:
    same = False
print("| run | plan | predicted switch ms | mean step ms | switch step ms | other steps ms "
      "| switch / other (target <= 1.05) | H2D GB | device peak GiB |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['mode']} | {r['plan']} | {r['predicted_switch_ms']:.1f} | {r['step_ms']:.1f} | "
          f"{r['switch_step_ms']:.1f} | {r['other_step_ms']:.1f} | {r['ratio']:.3f}"
          f"{'' if r['within_target'] else ' (over)'} | {r['h2d_gb']:.1f} | "
          f"{r['device_peak_gib']:.1f} |")
print(f"latents of the two runs bit-identical: {same}")
json.dump({"rows": rows, "bit_identical": same}, open(out, "w"), indent=1)
print(json.dumps({"rows": rows, "bit_identical": same}))
sys.exit(0 if ok and same else 1)
PY
exit $fail
