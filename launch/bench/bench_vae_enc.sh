#!/usr/bin/env bash
# The Wan 2.1 VAE encoder, staticpipe's CUDA encoder against the published
# PyTorch one, in one run on a GPU machine:
#
#   WAN_REPO=~/Wan2.1 launch/bench/bench_vae_enc.sh BUILD_DIR [OUT_JSON]
#
# Sizes: 81 frames of 480x832 and of 720x1280 (SIZES="480x832" limits them,
# FRAMES=5 shortens the video). Ours: BUILD_DIR/tests/gpu_test_vae_enc_gpu
# --bench (the published config with synthetic weights from a fixed seed,
# bf16 and fp32; a warm-up encode, then the best of 3; memory is the
# encoder's one allocation, and "used" the device memory it took in all).
# PyTorch: launch/bench/torch_vae_enc.py with the user's copy of WanVAE_
# (fp32 with torch's TF32 default, fp32-strict, bf16 autocast). Prints one
# line per case and a JSON object with the ratios ours / published measured
# in this run; OUT_JSON gets the JSON too. PYTHON picks the interpreter
# with torch.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:?usage: bench_vae_enc.sh BUILD_DIR [OUT_JSON]}" && pwd)
out=${2:-bench-vae-enc.json}
py=${PYTHON:-python3}
sizes=${SIZES:-480x832,720x1280}
frames=${FRAMES:-81}
bin="$B/tests/gpu_test_vae_enc_gpu"
[ -x "$bin" ] || { echo "bench_vae_enc.sh: no $bin (a CUDA build of staticpipe)" >&2; exit 2; }
[ -n "${WAN_REPO:-}" ] || { echo "bench_vae_enc.sh: set WAN_REPO (a Wan2.1 checkout)" >&2; exit 2; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
: > "$T/ours.jsonl"
for s in ${sizes//,/ }; do
  echo "# staticpipe CUDA encoder, ${frames}x$s" >&2
  "$bin" --bench "${s%x*}" "${s#*x}" "$frames" --reps 3 > "$T/ours_$s.log" 2>&1 ||
    tail -5 "$T/ours_$s.log" >&2
  grep '^{' "$T/ours_$s.log" >> "$T/ours.jsonl"
done
echo "# published encoder (PyTorch)" >&2
PYTHONUNBUFFERED=1 "$py" "$root/launch/bench/torch_vae_enc.py" --sizes "$sizes" \
  --frames "$frames" --reps 2 --json-out "$T/torch.json" > "$T/torch.log" 2>&1 ||
  tail -5 "$T/torch.log" >&2
python3 - "$T" "$out" <<'PYEOF'
import json, os, sys
d, out = sys.argv[1], sys.argv[2]
ours = {}
for line in open(f"{d}/ours.jsonl"):
    r = json.loads(line)
    ours[(tuple(r["video"]), r["precision"])] = r
torch, env = {}, {}
if os.path.exists(f"{d}/torch.json"):
    t = json.load(open(f"{d}/torch.json"))
    env = t.get("env", {})
    torch = {(tuple(r["video"]), r["mode"]): r for r in t.get("results", [])
             if r.get("status") == "ok"}
rows = []
for V in sorted({k[0] for k in ours} | {k[0] for k in torch}):
    for prec, tmode in (("bf16", "bf16"), ("fp32", "fp32-strict"), ("fp32", "fp32")):
        o, t = ours.get((V, prec)), torch.get((V, tmode))
        row = {"video": list(V), "ours": prec, "published": tmode,
               "ours_s": o and o["encode_s"], "ours_gib": o and o["layout_gib"],
               "ours_used_gib": o and o["used_gib"], "published_s": t and t["s"],
               "published_gib": t and t["peak_gib"], "ops_ms": o and o["ops_ms"]}
        if o and t:
            row["time_ratio"] = o["encode_s"] / t["s"]
            row["mem_ratio"] = o["layout_gib"] / t["peak_gib"]
        rows.append(row)
print(f"# published: torch {env.get('torch', '?')}, cudnn {env.get('cudnn', '?')}, "
      f"{env.get('gpu', '?')}")
for r in rows:
    print("  %s %s vs %s: ours %s s %s GiB, published %s s %s GiB, ratios %s / %s" % (
        "x".join(map(str, r["video"])), r["ours"], r["published"], r["ours_s"], r["ours_gib"],
        r["published_s"], r["published_gib"], r.get("time_ratio"), r.get("mem_ratio")))
doc = {"bench": "vae_enc", "published_env": env, "rows": rows}
with open(out + ".tmp", "w") as fh:
    json.dump(doc, fh)
    fh.write("\n")
os.replace(out + ".tmp", out)
print(json.dumps(doc))
PYEOF
