#!/usr/bin/env bash
# The Wan 2.2 VAE decoder (TI2V-5B's), staticpipe's CUDA decoder against the
# published PyTorch one, in one run on a GPU machine:
#
#   WAN_REPO=~/Wan2.2 launch/bench/bench_vae22.sh BUILD_DIR [OUT_JSON]
#   launch/bench/bench_vae22.sh --wan-repo ~/Wan2.2 BUILD_DIR [OUT_JSON]
#
# The size: TI2V-5B's default, 121 frames of 704 x 1280 (31 latent frames of
# 44 x 80). Ours: BUILD_DIR/tests/gpu_test_vae22_gpu --bench (the published
# config with synthetic weights from a fixed seed, bf16 and fp32; a warm-up
# decode, then the best of 3; memory is the decoder's one allocation, and
# "used" the device memory it took in all). PyTorch:
# launch/bench/torch_vae22.py, the user's copy of vae2_2.py's WanVAE_
# (--wan-repo or WAN_REPO: a Wan2.2 checkout, or a snapshot's files; nothing
# of it is in this repository), fp32 (torch's defaults: TF32
# convolutions), fp32-strict (TF32 off) and bf16 autocast. Prints a table
# (header lines start with '#') and one JSON line with the ratios ours /
# published measured in this run; OUT_JSON gets the JSON too.
# SIZES="44x80" and FRAMES=31 set the latent; PYTHON picks the interpreter
# with torch.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
wan=${WAN_REPO:-}
if [ "${1:-}" = "--wan-repo" ]; then
  wan=${2:?--wan-repo needs a directory}
  shift 2
fi
B=$(cd "${1:?usage: bench_vae22.sh [--wan-repo DIR] BUILD_DIR [OUT_JSON]}" && pwd)
out=${2:-bench-vae22.json}
py=${PYTHON:-python3}
sizes=${SIZES:-44x80}
frames=${FRAMES:-31}
bin="$B/tests/gpu_test_vae22_gpu"
[ -x "$bin" ] || { echo "bench_vae22.sh: no $bin (a CUDA build of staticpipe)" >&2; exit 2; }
[ -n "$wan" ] || { echo "bench_vae22.sh: pass --wan-repo DIR or set WAN_REPO (a Wan2.2 checkout)" >&2; exit 2; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
: > "$T/ours.jsonl"
for s in ${sizes//,/ }; do
  h=${s%x*}
  w=${s#*x}
  echo "# staticpipe CUDA decoder, latent ${frames}x${h}x${w}" >&2
  "$bin" --bench "$h" "$w" "$frames" --reps 3 > "$T/ours_$s.log" 2>&1 || tail -5 "$T/ours_$s.log" >&2
  grep '^{' "$T/ours_$s.log" >> "$T/ours.jsonl"
done
echo "# published decoder (PyTorch)" >&2
PYTHONUNBUFFERED=1 "$py" "$root/launch/bench/torch_vae22.py" --wan-repo "$wan" --sizes "$sizes" \
  --frames "$frames" --reps 2 --json-out "$T/torch.json" > "$T/torch.log" 2>&1 || tail -5 "$T/torch.log" >&2
python3 - "$T" "$out" <<'PYEOF'
import json, os, sys
d, out = sys.argv[1], sys.argv[2]
ours = {}
for line in open(f"{d}/ours.jsonl"):
    r = json.loads(line)
    ours[(tuple(r["latent"]), r["precision"])] = r
torch, env = {}, {}
if os.path.exists(f"{d}/torch.json"):
    t = json.load(open(f"{d}/torch.json"))
    env = t.get("env", {})
    for r in t.get("results", []):
        if r.get("status") == "ok":
            torch[(tuple(r["latent"]), r["mode"])] = r
rows = []
for L in sorted({k[0] for k in ours} | {k[0] for k in torch}):
    for prec, tmode in (("bf16", "bf16"), ("fp32", "fp32-strict"), ("fp32", "fp32")):
        o, t = ours.get((L, prec)), torch.get((L, tmode))
        row = {"latent": list(L), "ours": prec, "published": tmode,
               "ours_s": o and o["decode_s"], "ours_gib": o and o["layout_gib"],
               "ours_used_gib": o and o["used_gib"], "published_s": t and t["s"],
               "published_gib": t and t["peak_gib"], "ops_ms": o and o["ops_ms"]}
        if o and t:
            row["time_ratio"] = o["decode_s"] / t["s"]
            row["mem_ratio"] = o["layout_gib"] / t["peak_gib"]
        rows.append(row)
f = lambda v, p=".3f": format(v, p) if isinstance(v, (int, float)) else "-"
print(f"# published: torch {env.get('torch', '?')}, cudnn {env.get('cudnn', '?')}, {env.get('gpu', '?')}")
print(f"# {'latent':>10} {'ours':>5} {'published':>12} {'ours s':>8} {'pub s':>8} {'ratio':>6} "
      f"{'ours GiB':>9} {'used GiB':>9} {'pub GiB':>8} {'mem ratio':>9}")
for r in rows:
    print(f"  {'x'.join(map(str, r['latent'])):>10} {r['ours']:>5} {r['published']:>12} "
          f"{f(r['ours_s']):>8} {f(r['published_s']):>8} {f(r.get('time_ratio'), '.2f'):>6} "
          f"{f(r['ours_gib'], '.2f'):>9} {f(r['ours_used_gib'], '.2f'):>9} "
          f"{f(r['published_gib'], '.2f'):>8} {f(r.get('mem_ratio'), '.2f'):>9}")
for r in rows:
    if r["ours_s"] is not None and r["published"] != "fp32":
        ops = ", ".join(f"{k} {v:.0f}" for k, v in r["ops_ms"].items())
        print(f"# ours {'x'.join(map(str, r['latent']))} {r['ours']}, ms per op (one profiled decode): {ops}")
doc = {"bench": "vae22", "published_env": env, "rows": rows}
tmp = out + ".tmp"
with open(tmp, "w") as fh:
    json.dump(doc, fh)
    fh.write("\n")
os.replace(tmp, out)
print(json.dumps(doc))
PYEOF
