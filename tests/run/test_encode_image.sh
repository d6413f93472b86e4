#!/usr/bin/env bash
# encode --vae --model: an image's latents made beforehand are the ones run
# --image conditions on. For a tiny I2V model (the Wan 2.1 VAE, a PNG of
# odd size, --max-area 96*160, 9 frames) and a tiny TI2V model (the Wan
# 2.2 VAE): `encode` then `run --image-latents` gives latents bit-identical
# to `run --image` (h5py, and the CRC-32C of run's "wrote" lines), the
# latent grid the one tests/ref/image_ref.py gives for the image; --size
# of that same grid gives the same latents as --max-area. A stream's
# refusal of image= names one command; run as printed, its latents feed
# the stream's image-latents= line. Refused before any work, naming the
# flag and the check: a VAE of the wrong family for the model, a VAE
# without an encoder, a text-to-video model, bad sizes and frames, options
# that go only with --model. SP_ENCODE_IMAGE_DEVICE=cuda runs the encodes
# and the runs on the GPU (the CUDA encoders of both families through the
# same path; the refusals stay on the CPU).
set -u
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir encode-image
sp_seed
cd "$work" || exit 1
h=75 w=131
"$PY" - "$S" "$h" "$w" <<'PY' || exit 1
import sys
import h5py, numpy as np
from sptest import png_write
r = np.random.default_rng(int(sys.argv[1]))
h, w = int(sys.argv[2]), int(sys.argv[3])
png_write("img.png", r.integers(0, 256, (h, w, 3), dtype=np.uint8))
with h5py.File("cond.h5", "w") as f:
    f["context"] = r.standard_normal((7, 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((4, 4096)).astype(np.float32)
PY
area=96*160
read -r gh gw th tw < <(cd "$SP_SRC/tests/ref" && "$PY" -c "
import image_ref as I
gh, gw = I.i2v_grid($h, $w, $area)
tw, th = I.best_output_size($w, $h, 32, 32, $area)
print(gh, gw, th, tw)") || exit 1
crc() { sed -n "s/.*wrote $1 .*crc32c:\([0-9a-f]*\)).*/\1/p" "$2"; }
shape() { "$PY" -c "import h5py, sys; print(*h5py.File(sys.argv[1], 'r')['latents'].shape)" "$1"; }

I2V=synth:wan2.2-i2v-tiny:$S V21=synth:wan2.1-vae-tiny:$S
TI2V=synth:wan2.2-ti2v-tiny:$S V22=synth:wan2.2-vae-tiny:$S
DEV=${SP_ENCODE_IMAGE_DEVICE:-cpu}
R=(run --steps 2 --device "$DEV" --seed "$((S + 1))" --no-preview)

# family MODEL VAE FRAMES LATENT-SHAPE: encode, then run both ways.
family() {
  local name=$1 model=$2 vae=$3 frames=$4 want=$5
  "$SP_BIN" encode --vae "$vae" --model "$model" --image img.png --max-area "$area" \
    ${frames:+--frames "$frames"} --device "$DEV" -o "$name.lat.h5" >"$name.enc.log" 2>&1 ||
    { bad "$name: encode: exit non-zero: $(tail -5 "$name.enc.log")"; return; }
  [ "$(shape "$name.lat.h5")" = "$want" ] && ok "$name: encode wrote latents [$want]" ||
    bad "$name: latents [$(shape "$name.lat.h5")], want [$want]"
  "$SP_BIN" "${R[@]}" --cond cond.h5 --model "$model" --frames 9 --image img.png --max-area "$area" \
    --vae "$vae" -o "$name.run.h5" >"$name.run.log" 2>&1 ||
    { bad "$name: run --image: $(tail -5 "$name.run.log")"; return; }
  "$SP_BIN" "${R[@]}" --cond cond.h5 --model "$model" --frames 9 --image-latents "$name.lat.h5" \
    -o "$name.pre.h5" >"$name.pre.log" 2>&1 ||
    { bad "$name: run --image-latents: $(tail -5 "$name.pre.log")"; return; }
  local c1 c2
  c1=$(crc "$name.run.h5" "$name.run.log") c2=$(crc "$name.pre.h5" "$name.pre.log")
  sp_same "$name.run.h5" "$name.pre.h5" && [ -n "$c1" ] && [ "$c1" = "$c2" ] &&
    ok "$name: run --image-latents of encode's latents = run --image (crc32c:$c1)" ||
    bad "$name: run --image crc32c:$c1, --image-latents crc32c:$c2"
}
family i2v "$I2V" "$V21" 9 "16 3 $gh $gw"
family ti2v "$TI2V" "$V22" "" "48 1 $((th / 16)) $((tw / 16))"

# --size of the grid --max-area gives: the same latents.
"$SP_BIN" encode --vae "$V21" --model "$I2V" --image img.png --frames 9 \
  --size "$((8 * gh))x$((8 * gw))" --device "$DEV" -o i2v.size.h5 >i2v.size.log 2>&1 &&
  sp_same i2v.size.h5 i2v.lat.h5 && ok "i2v: --size $((8 * gh))x$((8 * gw)) = --max-area $area" ||
  bad "i2v: --size: $(tail -3 i2v.size.log)"
"$SP_BIN" encode --vae "$V22" --model "$TI2V" --image img.png --size "${th}x$tw" \
  --device "$DEV" -o ti2v.size.h5 >ti2v.size.log 2>&1 &&
  sp_same ti2v.size.h5 ti2v.lat.h5 && ok "ti2v: --size ${th}x$tw = --max-area $area" ||
  bad "ti2v: --size: $(tail -3 ti2v.size.log)"

# A stream refuses image= with one command; run as printed, its latents
# are what the stream's image-latents= takes.
stream() {
  local name=$1 model=$2 vae=$3 size=$4 cmd
  printf '%s\n' "cond=cond.h5 out=$name.s1.h5 image=img.png" |
    timeout 60 "$SP_BIN" "${R[@]}" --model "$model" --vae "$vae" --frames 5 --size "$size" \
      --jobs - >"$name.s1.log" 2>&1
  cmd=$(sed -n "s/.*stdin:1: image=img.png: refused on a streamed line .*encode it beforehand with '\([^']*\)'.*/\1/p" \
    "$name.s1.log")
  [ -n "$cmd" ] && [ ! -e "$name.s1.h5" ] && ok "$name stream: image= refused: '$cmd'" ||
    { bad "$name stream: image=: $(cat "$name.s1.log")"; return; }
  cmd=${cmd/staticpipe/$SP_BIN}
  cmd=${cmd/L.h5/$name.L.h5}
  $cmd --device "$DEV" >"$name.cmd.log" 2>&1 || { bad "$name: '$cmd': $(tail -3 "$name.cmd.log")"; return; }
  printf '%s\n' "cond=cond.h5 out=$name.s2.h5 image-latents=$name.L.h5" |
    timeout 60 "$SP_BIN" "${R[@]}" --model "$model" --frames 5 --size "$size" \
      --jobs - >"$name.s2.log" 2>&1 && [ -e "$name.s2.h5" ] &&
    ok "$name stream: the command's latents run on image-latents=" ||
    bad "$name stream: image-latents=: $(tail -3 "$name.s2.log")"
}
stream i2v "$I2V" "$V21" 48x32
stream ti2v "$TI2V" "$V22" 64x96

# Refusals: exit 2, the flag and the check named, nothing written.
"$SP_BIN" init --arch wan2.1-vae-tiny --seed 3 -q -o dec.h5 || { bad "init of a decoder-only VAE"; exit 1; }
E=(encode --image img.png --device cpu -o no.h5)
sp_refused "wrong family (2.1 for TI2V)" "the model $TI2V (ti2v) samples 48" \
  "$SP_BIN" "${E[@]}" --vae "$V21" --model "$TI2V"
sp_refused "wrong family (2.2 for I2V)" "the Wan 2.2 VAE is TI2V-5B's; this model takes the Wan 2.1 VAE" \
  "$SP_BIN" "${E[@]}" --vae "$V22" --model "$I2V"
sp_refused "no encoder" "--vae dec.h5: this VAE file holds only the decoder" \
  "$SP_BIN" "${E[@]}" --vae dec.h5 --model "$I2V"
sp_refused "T2V model" "--model synth:wan2.1-tiny: a text-to-video model" \
  "$SP_BIN" "${E[@]}" --vae "$V21" --model synth:wan2.1-tiny
sp_refused "size not of 16" "--size: '40x48' is not valid: height and width must be multiples of 16" \
  "$SP_BIN" "${E[@]}" --vae "$V21" --model "$I2V" --size 40x48
sp_refused "TI2V size not of 32" "--size 48x64: a TI2V model's latent" \
  "$SP_BIN" "${E[@]}" --vae "$V22" --model "$TI2V" --size 48x64
sp_refused "area out of range" "--max-area: '1' is out of range" \
  "$SP_BIN" "${E[@]}" --vae "$V21" --model "$I2V" --max-area 1
sp_refused "frames not 4k+1" "--frames 6: the encoder takes 1 + 4k frames" \
  "$SP_BIN" "${E[@]}" --vae "$V21" --model "$I2V" --frames 6
sp_refused "TI2V frames" "--frames 5: the TI2V model $TI2V conditions on the image alone" \
  "$SP_BIN" "${E[@]}" --vae "$V22" --model "$TI2V" --frames 5
sp_refused "max-area without model" "encode: --max-area sizes an image prepared for a model's task: give --model" \
  "$SP_BIN" "${E[@]}" --vae "$V21" --max-area 96x160
sp_refused "max-area and size" "encode: --max-area and --size exclude each other" \
  "$SP_BIN" "${E[@]}" --vae "$V21" --model "$I2V" --max-area 96x160 --size 48x32
sp_refused "model with video" "encode: --model prepares an --image as run --image does" \
  "$SP_BIN" encode --vae "$V21" --model "$I2V" --video x.h5 -o no.h5
sp_refused "2.2 VAE without model" "and the Wan 2.2 VAE's (TI2V-5B's) on an --image prepared for a TI2V --model: give --model" \
  "$SP_BIN" "${E[@]}" --vae "$V22"
[ ! -e no.h5 ] && ok "refusals: nothing written" || bad "a refusal wrote no.h5"
[ $fail -eq 0 ] && echo "encode image: all checks passed" || echo "encode image: FAILED"
exit $fail
