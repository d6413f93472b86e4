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
# (fp32 with torch's TF32 default, fp32-strict, bf16 autocast). Prints a
# table, ours' time per op, and a JSON object with the ratios ours /
# published measured in this run (bench_vae_report.py, as the decoders'
# benches); OUT_JSON gets the JSON too. PYTHON picks the interpreter
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
python3 "$root/launch/bench/bench_vae_report.py" "$T" "$out" vae_enc \
  bf16:bf16,fp32:fp32-strict,fp32:fp32 video encode_s
