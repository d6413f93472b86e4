#!/usr/bin/env bash
# staticpipe plan --image --vae: the workload is the image's size as run
# prepares it (TI2V: best_output_size of the image and --max-area; I2V: 8 x
# the latent grid), against tests/ref/image_ref.py; the image encoder is
# reported on rank 0 (either VAE's device bytes; a Wan 2.1 VAE file
# without the encoder said to have none), and a rank 0 whose GPU cannot
# hold the encoder is refused with exit 2 and a line naming its bytes.
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
sp_work_dir plan-image
"$PY" - "$work" <<'PY' || exit 1
import sys
import numpy as np
from sptest import png_write
t = sys.argv[1]
h, w = 70, 120
x, y = np.arange(3 * w)[None, :], np.arange(h)[:, None]  # x: the byte of a row
png_write(f"{t}/img.png", ((x * 7 + y) % 256).astype(np.uint8).reshape(h, w, 3))
PY
ti2v=(plan --model synth:wan2.2-ti2v-tiny --image "$work/img.png" --vae synth:wan2.2-vae-tiny)
i2v=(plan --model synth:wan2.2-i2v-tiny --image "$work/img.png" --vae synth:wan2.1-vae-tiny)
"$SP_BIN" "${ti2v[@]}" --max-area 64*128 --frames 9 --gpu-mem 80gb --json >"$work/ti2v.json" ||
  bad "plan TI2V --image: exit non-zero"
"$SP_BIN" "${ti2v[@]}" --frames 5 --gpu-mem 80gb --json >"$work/ti2v_def.json" ||
  bad "plan TI2V --image at the default area: exit non-zero"
"$SP_BIN" "${i2v[@]}" --max-area 240*416 --gpu-mem 80gb --json >"$work/i2v.json" ||
  bad "plan I2V --image: exit non-zero"
"$SP_BIN" init --arch wan2.1-vae-tiny -q -o "$work/dec_only.h5" || bad "init wan2.1-vae-tiny"
"$SP_BIN" plan --model synth:wan2.2-i2v-tiny --image "$work/img.png" --vae "$work/dec_only.h5" \
  --max-area 240*416 --gpu-mem 80gb --json >"$work/i2v_dec.json" ||
  bad "plan I2V --image with a decoder-only VAE: exit non-zero"
"$PY" - "$work" "$SP_SRC/tests/ref" <<'PY' || fail=1
import json, sys
work, ref = sys.argv[1], sys.argv[2]
sys.path.insert(0, ref)
import image_ref as I
fail = 0
def check(cond, msg):
    global fail
    print(("ok   " if cond else "FAIL ") + msg)
    fail |= not cond
for name, area, frames in (("ti2v", 64 * 128, 9), ("ti2v_def", 704 * 1280, 5)):
    d = json.load(open(f"{work}/{name}.json"))
    ow, oh = I.best_output_size(120, 70, 32, 32, area)
    e = d.get("image_encoder", {})
    tokens = (1 + (frames - 1) // 4) * (oh // 32) * (ow // 32)
    check(e.get("height") == oh and e.get("width") == ow and e.get("frames") == 1 and
          d["tokens"] == tokens,
          "TI2V at area %d: encoder input %sx%s of %s frame, %d tokens (reference %dx%d, %d)"
          % (area, e.get("height"), e.get("width"), e.get("frames"), d["tokens"], oh, ow, tokens))
    check(e.get("rank") == 0 and e.get("can_encode") is True and e.get("device_bytes", 0) > 0
          and e.get("vae") == "Wan 2.2 VAE",
          "TI2V: the Wan 2.2 VAE's encoder on rank 0, %s device bytes" % e.get("device_bytes"))
d = json.load(open(f"{work}/i2v.json"))
lh, lw = I.i2v_grid(70, 120, 240 * 416)
e = d.get("image_encoder", {})
tokens = 21 * (lh // 2) * (lw // 2)
check(e.get("height") == 8 * lh and e.get("width") == 8 * lw and e.get("frames") == 81 and
      d["tokens"] == tokens,
      "I2V at area %d: encoder input %sx%s of %s frames, %d tokens (reference grid %dx%d, 81 "
      "frames, %d)" % (240 * 416, e.get("height"), e.get("width"), e.get("frames"), d["tokens"],
                       lh, lw, tokens))
check(e.get("rank") == 0 and e.get("can_encode") is True and e.get("device_bytes", 0) > 0
      and e.get("vae") == "Wan 2.1 VAE",
      "I2V: the Wan 2.1 VAE's encoder on rank 0, %s device bytes" % e.get("device_bytes"))
e = json.load(open(f"{work}/i2v_dec.json")).get("image_encoder", {})
check(e.get("can_encode") is False and e.get("device_bytes") == 0 and e.get("vae") == "Wan 2.1 VAE",
      "I2V: a Wan 2.1 VAE file without the encoder said to have none")
sys.exit(fail)
PY
sp_refused "a rank 0 GPU smaller than the encoder" "encoder needs" \
  "$SP_BIN" plan --model synth:wan2.2-ti2v-tiny --image "$work/img.png" --vae synth:wan2.2-vae \
  --frames 1 --gpu-mem 2gb,12gb
[ $fail -eq 0 ] && ok "the encoder refused on a rank 0 of 2 GiB"
exit $fail
