#!/usr/bin/env bash
# Image to video from a PNG with the tiny models, as a user runs it: init
# umt5-tiny, wan2.2-i2v-tiny and wan2.1-vae-tiny --encoder (synthetic
# weights), then one `run --t5 --prompt --image PNG --max-area --vae
# --video`: exit 0, the image encoded by the Wan 2.1 VAE, the latents
# [16, 3, h, w] of the latent grid tests/ref/image_ref.py gives for the
# image's aspect ratio and --max-area, and the video an MP4 that ffprobe
# reads as 9 frames of 8 x that grid. The same run on 2 ranks logs the
# same latents' CRC-32C. Skips (77) where FFmpeg's libraries or ffprobe
# are missing.
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_mpi
sp_need_tool ffprobe
sp_has_ffmpeg || {
  echo "skip: FFmpeg's libraries do not load here (decode --help)"
  exit 77
}
sp_work_dir i2v-video
T=$work
h=90 w=154
"$PY" - "$T/img.png" "$h" "$w" <<'PY' || exit 1
import sys
import numpy as np
from sptest import png_write
path, h, w = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
yy, xx = np.mgrid[0:h, 0:w]
u8 = np.stack([xx * 255 // (w - 1), yy * 255 // (h - 1), (xx + yy) % 256], -1).astype(np.uint8)
png_write(path, u8)
PY
area=96*176
read -r gh gw < <(cd "$SP_SRC/tests/ref" &&
  "$PY" -c "import image_ref as I; print(*I.i2v_grid($h, $w, $area))") || exit 1
"$SP_BIN" init --arch umt5-tiny --seed 1 -q -o "$T/t5.h5" &&
  "$SP_BIN" init --arch wan2.2-i2v-tiny --seed 2 -q -o "$T/dit.h5" &&
  "$SP_BIN" init --arch wan2.1-vae-tiny --encoder --seed 3 -q -o "$T/vae.h5" ||
  { bad "init of the tiny models"; exit 1; }
args=(run --t5 "$T/t5.h5" --prompt "a paper boat on a pond" --model "$T/dit.h5" --frames 9
      --steps 4 --seed 7 --image "$T/img.png" --max-area "$area" --vae "$T/vae.h5")
crc_of() { grep -o 'latents crc32c:[0-9a-f]*' "$1" | tail -n 1 | cut -d: -f2; }
"$SP_BIN" "${args[@]}" -o "$T/lat.h5" --video "$T/video.mp4" >"$T/run.log" 2>&1 &&
  ok "run --image with the Wan 2.1 VAE's encoder: exit 0" ||
  bad "run --image: exit non-zero: $(tail -n 20 "$T/run.log")"
grep -q "encoded by the Wan 2.1 VAE" "$T/run.log" && ok "the image encoded by the Wan 2.1 VAE" ||
  bad "no line of the Wan 2.1 VAE's encoding"
"$PY" - "$T/lat.h5" "$gh" "$gw" <<'PY' && ok "latents [16, 3, $gh, $gw]: the image's grid at $area" ||
import sys, h5py
a = h5py.File(sys.argv[1], "r")["latents"]
print("latents", a.shape)
sys.exit(a.shape != (16, 3, int(sys.argv[2]), int(sys.argv[3])))
PY
  bad "the latents' shape is not [16, 3, $gh, $gw]"
s=$(ffprobe -v error -count_frames -show_entries stream=width,height,nb_read_frames -of csv=p=0 \
  "$T/video.mp4")
[ "$s" = "$((8 * gw)),$((8 * gh)),9" ] && ok "ffprobe: 9 frames of $((8 * gw))x$((8 * gh))" ||
  bad "ffprobe: '$s', expected $((8 * gw)),$((8 * gh)),9"
mpirun -np 2 "$SP_BIN" "${args[@]}" -o "$T/lat2.h5" >"$T/run2.log" 2>&1 ||
  bad "2 ranks: exit non-zero: $(tail -n 20 "$T/run2.log")"
c1=$(crc_of "$T/run.log") c2=$(crc_of "$T/run2.log")
[ -n "$c1" ] && [ "$c1" = "$c2" ] && ok "2 ranks: the same latents (crc32c:$c1)" ||
  bad "2 ranks: latents crc32c '$c2', 1 rank '$c1'"
exit $fail
