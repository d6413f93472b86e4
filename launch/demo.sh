#!/usr/bin/env bash
# A prompt to a video on the built-in tiny models, from a fresh machine:
# installs what is missing, builds, writes the three tiny models (the text
# encoder umt5-tiny with its built-in tokenizer, the DiT wan2.1-tiny and
# the VAE decoder wan2.1-vae-tiny: synthetic weights, nothing downloaded),
# then turns a prompt into a video with one `staticpipe run --t5 --prompt
# --vae --video`, and runs the same as a 2-rank MPI pipeline, checking that
# both give the same latents (the CRC-32C of the latents that each run
# logs). The video is an MP4 where FFmpeg's libraries load, else an .h5
# video. Works with or without a GPU. The build shows its progress
# (launch/build.sh); the end says where each output is, how to play the
# video, and how to call the binary.
#
#   launch/demo.sh [OUTDIR [PROMPT]]     (default: ./demo, a red fox in the snow)
#
# SP_DEMO_BIN=PATH uses that staticpipe binary: nothing installed or built
# (tests/run/test_demo.sh).
set -eu -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/demo}
prompt=${2:-a red fox running in the snow}
if [ -n "${SP_DEMO_BIN:-}" ]; then
  bin=$SP_DEMO_BIN
else
  bash "$root/launch/deps.sh"
  echo "== building (launch/build.sh: a few minutes the first time, with CUDA longer)"
  bin=$(bash "$root/launch/build.sh" | tail -n 1)
fi
# mpirun refuses to run as root unless told twice (the 2-rank run below).
if [ "$(id -u)" = 0 ]; then
  echo "demo: running as root: mpirun needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" \
    "(set here; export them to call mpirun as root yourself)"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mkdir -p "$out"
out=$(cd "$out" && pwd)

echo "== staticpipe init: the tiny models (synthetic weights)"
"$bin" init --arch umt5-tiny --seed 1 -o "$out/t5.h5"        # its tokenizer is built in
"$bin" init --arch wan2.1-tiny --seed 1 -o "$out/dit.h5"
"$bin" init --arch wan2.1-vae-tiny --seed 1 -o "$out/vae.h5"
# An MP4 where FFmpeg's libraries load (decode --help says), else .h5.
if "$bin" decode --help | grep -q "Here: libavformat"; then
  video=$out/video.mp4
else
  video=$out/video.h5
  echo "demo: FFmpeg's libraries are not found here (decode --help says why): the video is" \
    "written as .h5 (launch/deps.sh installs them)"
fi

# The latents' CRC-32C from a run's log ("run: wrote ... (latents crc32c:X)").
crc_of() { grep -o 'latents crc32c:[0-9a-f]*' "$1" | tail -n 1 | cut -d: -f2; }
run_args=(--t5 "$out/t5.h5" --prompt "$prompt" --model "$out/dit.h5"
          --frames 17 --size 128x128 --steps 8 --cfg 5 --seed 42)
echo "== staticpipe run: the prompt to a video, one command: 17 frames at 128x128, 8 steps"
echo "   $(printf '%q ' "$bin" run "${run_args[@]}" -o "$out/latents.h5" --vae "$out/vae.h5" --video "$video")"
"$bin" run "${run_args[@]}" -o "$out/latents.h5" --vae "$out/vae.h5" --video "$video" 2>&1 |
  tee "$out/run.log"
if command -v ffprobe >/dev/null 2>&1 && [ "${video%.mp4}" != "$video" ]; then
  ffprobe -v error -show_entries stream=codec_name,width,height,r_frame_rate,nb_frames \
    -of compact "$video"
fi

echo "== the same as a 2-rank pipeline: mpirun -np 2 staticpipe run ..."
OMP_NUM_THREADS=1 mpirun -np 2 "$bin" run "${run_args[@]}" -o "$out/latents_np2.h5" 2>&1 |
  tee "$out/run_np2.log"
one=$(crc_of "$out/run.log"); two=$(crc_of "$out/run_np2.log")
if [ -z "$one" ] || [ "$one" != "$two" ]; then
  echo "demo: FAILED: the latents of 1 rank (crc32c:${one:-none}) and 2 ranks" \
    "(crc32c:${two:-none}) differ"
  exit 1
fi
echo "demo: latents of 1 rank and 2 ranks bit-identical (crc32c:$one)"

echo "demo: outputs in $out:"
echo "  video    $video (the prompt \"$prompt\"; random weights, so expect colourful noise)"
if [ "${video%.mp4}" != "$video" ]; then
  echo "           play it with any video player: ffplay $video (or mpv, vlc, a browser)"
else
  echo "           an .h5 video: dataset 'video' float32 [3, 17, 128, 128] in [-1, 1]; PNG frames to look at:"
  echo "           $bin decode --vae $out/vae.h5 --latents $out/latents.h5 --frames-dir $out/frames"
fi
echo "  latents  $out/latents.h5 (dataset 'latents' float32 [16, 5, 16, 16]; 2 ranks: latents_np2.h5)"
echo "  preview  $out/latents.h5.png (up to 4 latent frames in a grid, 8x upscaled)"
echo "  models   $out/t5.h5, dit.h5, vae.h5; the runs' logs run.log, run_np2.log"
echo "demo: the binary is $bin: call it by that path ($bin --help), or install it on PATH" \
  "with: cmake --install $(dirname "$bin") --prefix ~/.local (then: staticpipe --help)"
