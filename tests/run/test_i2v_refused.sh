#!/usr/bin/env bash
# Image to video: every refusal happens before any work, exit 2 with a line
# naming the cause: an image for a text-to-video model, none for an I2V
# model, an image without --vae, a VAE of the wrong family for the model
# (the Wan 2.1 VAE for TI2V, the Wan 2.2 VAE for I2V), a VAE without the
# encoder the image needs, a file that is no image, an image whose grid
# leaves no token, --size with an image, --image with --image-latents,
# --max-area without an image, image latents of the wrong shape or frames,
# a TI2V size that is not of multiples of 32, image= on a streamed line.
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir i2v-refused
T=$work
"$PY" - "$T" <<'PY' || exit 1
import sys
import h5py, numpy as np
from sptest import png_write
t = sys.argv[1]
png_write(f"{t}/img.png", np.zeros((40, 60, 3), np.uint8))
png_write(f"{t}/thin.png", np.zeros((2, 300, 3), np.uint8))
with open(f"{t}/not.png", "w") as f:
    f.write("not an image\n")
r = np.random.default_rng(0)
with h5py.File(f"{t}/cond.h5", "w") as f:
    f["context"] = r.standard_normal((3, 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((3, 4096)).astype(np.float32)
with h5py.File(f"{t}/lat16.h5", "w") as f:
    f["latents"] = r.standard_normal((16, 2, 4, 6)).astype(np.float32)
with h5py.File(f"{t}/lat48.h5", "w") as f:
    f["latents"] = r.standard_normal((48, 2, 4, 6)).astype(np.float32)
PY
t2v=(run --model synth:wan2.1-tiny --cond "$T/cond.h5" --frames 5 --steps 1 -o "$T/o.h5")
i2v=(run --model synth:wan2.2-i2v-tiny --cond "$T/cond.h5" --steps 1 -o "$T/o.h5")
ti2v=(run --model synth:wan2.2-ti2v-tiny --cond "$T/cond.h5" --frames 5 --steps 1 -o "$T/o.h5")
sp_refused "T2V with an image" "text-to-video model" \
  "$SP_BIN" "${t2v[@]}" --size 32x32 --image-latents "$T/lat16.h5"
sp_refused "I2V without an image" "starts from an image" "$SP_BIN" "${i2v[@]}"
sp_refused "--image without --vae" "needs --vae" "$SP_BIN" "${ti2v[@]}" --image "$T/img.png"
sp_refused "TI2V with the Wan 2.1 VAE" "a TI2V model takes the Wan 2.2 VAE" \
  "$SP_BIN" "${ti2v[@]}" --image "$T/img.png" --vae synth:wan2.1-vae-tiny
sp_refused "I2V with the Wan 2.2 VAE" "this model takes the Wan 2.1 VAE" \
  "$SP_BIN" "${i2v[@]}" --image "$T/img.png" --vae synth:wan2.2-vae-tiny
"$SP_BIN" init --arch wan2.1-vae-tiny -q -o "$T/dec_only.h5" || bad "init wan2.1-vae-tiny"
"$PY" -c "import h5py, sys; sys.exit('encoder' in h5py.File('$T/dec_only.h5', 'r'))" &&
  sp_refused "I2V with a VAE file without the encoder" "encoder" \
    "$SP_BIN" "${i2v[@]}" --image "$T/img.png" --vae "$T/dec_only.h5"
sp_refused "a file that is no image" "neither a PNG nor a JPEG" \
  "$SP_BIN" "${ti2v[@]}" --image "$T/not.png" --vae synth:wan2.2-vae-tiny
sp_refused "an image whose I2V grid leaves no token" "latent grid" \
  "$SP_BIN" "${i2v[@]}" --image "$T/thin.png" --max-area 2000 --vae synth:wan2.1-vae-tiny
sp_refused "an image whose TI2V size leaves no token" "32x32 block" \
  "$SP_BIN" "${ti2v[@]}" --image "$T/thin.png" --max-area 2000 --vae synth:wan2.2-vae-tiny
sp_refused "--size with an image" "leave size out" \
  "$SP_BIN" "${ti2v[@]}" --image "$T/img.png" --vae synth:wan2.2-vae-tiny --size 64x64
sp_refused "--image and --image-latents" "exclude each other" \
  "$SP_BIN" "${ti2v[@]}" --image "$T/img.png" --vae synth:wan2.2-vae-tiny \
  --image-latents "$T/lat48.h5"
sp_refused "--max-area without an image" "this job has no image" \
  "$SP_BIN" "${ti2v[@]}" --max-area 4096
sp_refused "TI2V image latents of two frames" "needs [48, 1, h, w]" \
  "$SP_BIN" "${ti2v[@]}" --image-latents "$T/lat48.h5"
sp_refused "I2V image latents of 48 channels" "needs [16, F, h, w]" \
  "$SP_BIN" "${i2v[@]}" --image-latents "$T/lat48.h5"
sp_refused "I2V image latents against --frames" "leave --frames out" \
  "$SP_BIN" "${i2v[@]}" --image-latents "$T/lat16.h5" --frames 9
sp_refused "TI2V --size not of multiples of 32" "multiples of 32" \
  "$SP_BIN" "${ti2v[@]}" --size 48x64
sp_refused "--max-area out of range" "max-area" "$SP_BIN" "${ti2v[@]}" --image "$T/img.png" \
  --vae synth:wan2.2-vae-tiny --max-area 100
printf 'cond=%s out=%s image=%s\n' "$T/cond.h5" "$T/q.h5" "$T/img.png" >"$T/line.txt"
"$SP_BIN" run --model synth:wan2.2-ti2v-tiny --vae synth:wan2.2-vae-tiny --frames 5 --steps 1 \
  --jobs - <"$T/line.txt" >"$T/stream.out" 2>"$T/stream.err"
rc=$?
[ $rc -eq 2 ] && grep -qF "image=$T/img.png: refused on a streamed line (the VAE encoder runs" "$T/stream.err" &&
  grep -qF "encode it beforehand with 'staticpipe encode --vae synth:wan2.2-vae-tiny --model synth:wan2.2-ti2v-tiny --image $T/img.png --size 704x1280 -o L.h5'" "$T/stream.err" &&
  grep -qF "latents [48, 1, 44, 80]) and give image-latents=L.h5" "$T/stream.err" &&
  ok "image= on a streamed line refused" ||
  bad "image= on a streamed line: exit $rc: $(cat "$T/stream.err")"
[ $fail -eq 0 ] && ok "every refusal: exit 2 with its cause"
exit $fail
