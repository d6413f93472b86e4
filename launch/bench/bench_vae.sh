#!/usr/bin/env bash
# The Wan 2.1 VAE decoder, staticpipe's CUDA decoder against the published
# PyTorch one, in one run on a GPU machine:
#
#   WAN_REPO=~/Wan2.1 launch/bench/bench_vae.sh BUILD_DIR [OUT_JSON]
#   launch/bench/bench_vae.sh --wan-repo ~/Wan2.1 BUILD_DIR [OUT_JSON]
#
# Sizes: 21 latent frames of 60x104 (81 frames of 480x832) and of 90x160
# (81 frames of 720x1280). Ours: BUILD_DIR/tests/gpu_test_vae_gpu --bench
# (the published config with synthetic weights from a fixed seed, bf16,
# fp32 and tf32; a warm-up decode, then the best of 3; memory is the
# decoder's one allocation, and "used" the device memory it took in all).
# PyTorch: launch/bench/torch_vae.py, the user's copy of WanVAE_ (--wan-repo
# or WAN_REPO; nothing of it is in this repository), fp32 (torch's
# defaults: TF32 convolutions), fp32-strict (TF32 off) and bf16 autocast.
# Rows pair like with like: bf16 with bf16 autocast, our fp32 with
# fp32-strict and with torch's default, our tf32 (--vae-precision tf32)
# with torch's default fp32, which also runs its convolutions in TF32.
# Prints a table (header lines start with '#') and one JSON line with the
# ratios ours / published measured in this run; OUT_JSON gets the JSON too.
# SIZES="60x104" limits the sizes; PYTHON picks the interpreter with torch.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/launch/bench/bench_vae_lib.sh"
bench_vae_args bench_vae.sh bench-vae.json "$@"
py=${PYTHON:-python3}
sizes=${SIZES:-60x104,90x160}
bin="$B/tests/gpu_test_vae_gpu"
[ -x "$bin" ] || { echo "bench_vae.sh: no $bin (a CUDA build of staticpipe)" >&2; exit 2; }
[ -n "$wan" ] || { echo "bench_vae.sh: pass --wan-repo DIR or set WAN_REPO (a Wan2.1 checkout)" >&2; exit 2; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
bench_vae_ours "$bin" 21 "$sizes" "$T"
echo "# published decoder (PyTorch)" >&2
PYTHONUNBUFFERED=1 "$py" "$root/launch/bench/torch_vae.py" --wan-repo "$wan" --sizes "$sizes" \
  --frames 21 --reps 2 --json-out "$T/torch.json" > "$T/torch.log" 2>&1 || tail -5 "$T/torch.log" >&2
python3 "$root/launch/bench/bench_vae_report.py" "$T" "$out" vae \
  bf16:bf16,fp32:fp32-strict,fp32:fp32,tf32:fp32
