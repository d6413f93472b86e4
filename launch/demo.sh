#!/usr/bin/env bash
# The main job on the built-in tiny model, from a fresh machine: installs
# what is missing, builds, writes the synthetic wan2.1-tiny model, makes a
# conditioning file of random text embeddings (a stand-in for an encoded
# prompt: real ones come from launch/encode_prompt.py), and samples a short
# clip, first in one process and then as a 2-rank MPI pipeline, checking
# that both give the same latents; the first run also decodes its latents
# with the synthetic tiny VAE into a video (an MP4 where FFmpeg's libraries
# load, else an .h5 video). Works with or without a GPU. The build shows its
# progress (launch/build.sh); the end says where each output and the binary
# are, and how to call it.
#
#   launch/demo.sh [OUTDIR]        (default: ./demo)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/demo}
bash "$root/launch/deps.sh"
# mpirun refuses to run as root unless told twice (the 2-rank run below).
if [ "$(id -u)" = 0 ]; then
  echo "demo: running as root: mpirun needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" \
    "(set here; export them to call mpirun as root yourself)"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
echo "== building (launch/build.sh: a few minutes the first time, with CUDA longer)"
bin=$(bash "$root/launch/build.sh" | tail -n 1)
mkdir -p "$out"
. "$root/tests/common/find_python.sh"

echo "== staticpipe init: the synthetic tiny model"
"$bin" init --arch wan2.1-tiny --seed 1 -o "$out/tiny.h5"
"$bin" inspect "$out/tiny.h5"
echo "== staticpipe init: the synthetic tiny VAE decoder"
"$bin" init --preset wan2.1-vae-tiny --seed 1 -o "$out/vae.h5"
# An MP4 where FFmpeg's libraries load (decode --help says), else .h5.
if "$bin" decode --help | grep -q "Here: libavformat"; then
  video=$out/video.mp4
else
  video=$out/video.h5
fi

echo "== a conditioning file (random embeddings standing in for an encoded prompt)"
"$PY" - "$out/cond.h5" <<'PYEOF'
import os, sys, h5py, numpy as np
rng = np.random.default_rng(0)
tmp = sys.argv[1] + ".tmp"
with h5py.File(tmp, "w") as f:
    f["context"] = rng.standard_normal((77, 4096)).astype(np.float32)
    f["context_null"] = rng.standard_normal((126, 4096)).astype(np.float32)
os.replace(tmp, sys.argv[1])
PYEOF

echo "== staticpipe run: 17 frames at 128x128, 8 UniPC steps, cfg 5, one process, then the video"
"$bin" run --model "$out/tiny.h5" --cond "$out/cond.h5" --frames 17 --size 128x128 \
  --steps 8 --cfg 5 --seed 42 -o "$out/latents.h5" --vae "$out/vae.h5" --video "$video"
if command -v ffprobe >/dev/null 2>&1 && [ "${video%.mp4}" != "$video" ]; then
  ffprobe -v error -show_entries stream=codec_name,width,height,r_frame_rate,nb_frames \
    -of compact "$video"
fi

echo "== the same as a 2-rank pipeline: mpirun -np 2 staticpipe run ..."
OMP_NUM_THREADS=1 mpirun -np 2 "$bin" run --model "$out/tiny.h5" --cond "$out/cond.h5" \
  --frames 17 --size 128x128 --steps 8 --cfg 5 --seed 42 -o "$out/latents_np2.h5"

"$PY" - "$out/latents.h5" "$out/latents_np2.h5" <<'PYEOF'
import sys, h5py
a, b = (h5py.File(p)["latents"][...] for p in sys.argv[1:3])
same = a.tobytes() == b.tobytes()
print(f"latents {a.shape}: 1 rank and 2 ranks {'bit-identical' if same else 'DIFFER'}")
sys.exit(0 if same else 1)
PYEOF
echo "demo: outputs in $out: latents.h5 (dataset 'latents'), latents.h5.png (preview)," \
  "$(basename "$video") (the decoded video: random weights, so expect colourful noise)"
echo "demo: the binary is $bin: call it by that path ($bin --help), or install it on PATH" \
  "with: cmake --install $(dirname "$bin") --prefix ~/.local (then: staticpipe --help)"
