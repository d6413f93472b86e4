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
. "$root/launch/bench/bench_vae_lib.sh"
bench_vae_args bench_vae22.sh bench-vae22.json "$@"
py=${PYTHON:-python3}
sizes=${SIZES:-44x80}
frames=${FRAMES:-31}
bin="$B/tests/gpu_test_vae22_gpu"
[ -x "$bin" ] || { echo "bench_vae22.sh: no $bin (a CUDA build of staticpipe)" >&2; exit 2; }
[ -n "$wan" ] || { echo "bench_vae22.sh: pass --wan-repo DIR or set WAN_REPO (a Wan2.2 checkout)" >&2; exit 2; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
bench_vae_ours "$bin" "$frames" "$sizes" "$T"
echo "# published decoder (PyTorch)" >&2
PYTHONUNBUFFERED=1 "$py" "$root/launch/bench/torch_vae22.py" --wan-repo "$wan" --sizes "$sizes" \
  --frames "$frames" --reps 2 --json-out "$T/torch.json" > "$T/torch.log" 2>&1 || tail -5 "$T/torch.log" >&2
python3 "$root/launch/bench/bench_vae_report.py" "$T" "$out" vae22 \
  bf16:bf16,fp32:fp32-strict,fp32:fp32
