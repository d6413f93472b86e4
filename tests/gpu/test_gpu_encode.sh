#!/usr/bin/env bash
# encode --vae --device cuda against --device cpu: a synthetic tiny VAE with
# the encoder (init --encoder), a random 9-frame video and a PNG image
# (the encoder made for one frame); bf16 within 1e-2, fp32 within 1e-4 and
# tf32 within 1e-2 (SP_TEST_VAE_TOL_TF32: tests/vae/test_vae_enc_driver.c
# measures its CPU emulation at under half of it) relative L2 of the CPU's
# latents, a rerun bit-identical, the latents'
# shape the CPU's. Then the published config (synth:wan2.1-vae) on a 5-frame
# 480x832 video in bf16: finite latents of [16, 2, 60, 104]. Skips (77)
# without a GPU.
set -u
: "${SP_SRC:?}" "${SP_BIN:?}"
. "$SP_SRC/tests/common/script.sh"
sp_need_gpu
sp_python
sp_work_dir gpuencode
sp_seed
"$SP_BIN" init --arch wan2.1-vae-tiny --encoder --seed "$S" -q -o "$work/vae.h5" ||
  { bad "init --encoder"; exit 1; }
"$PY" - "$work" "$S" <<'PY' || { echo "FAIL inputs"; exit 1; }
import sys
import h5py, numpy as np
from sptest import png_write
work, seed = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(seed)
with h5py.File(work + "/v.h5", "w") as f:
    f["video"] = rng.uniform(-1, 1, (3, 9, 40, 56)).astype(np.float32)
with h5py.File(work + "/big.h5", "w") as f:
    f["video"] = rng.uniform(-1, 1, (3, 5, 480, 832)).astype(np.float32)
png_write(work + "/img.png", rng.integers(0, 256, (64, 80, 3), dtype=np.uint8))
PY
enc() { # OUT DEVICE PRECISION FLAG INPUT
  "$SP_BIN" encode --vae "$work/vae.h5" "$4" "$5" --device "$2" --vae-precision "$3" -q \
    -o "$work/$1" 2>"$work/$1.err" || { bad "encode $4 $2 $3: $(tail -1 "$work/$1.err")"; return 1; }
}
for input in "--video v.h5" "--image img.png"; do
  set -- $input
  tag=${2%%.*}
  enc "$tag-cpu.h5" cpu bf16 "$1" "$work/$2" || continue
  for p in bf16 fp32 tf32; do
    enc "$tag-$p.h5" cuda $p "$1" "$work/$2" && enc "$tag-$p-2.h5" cuda $p "$1" "$work/$2" || continue
    tol=$([ $p = fp32 ] && echo 1e-4 || echo 1e-2)
    msg=$("$PY" - "$work/$tag-cpu.h5" "$work/$tag-$p.h5" "$work/$tag-$p-2.h5" "$tol" <<'PY'
import sys, h5py, numpy as np
from sptest import rel_l2
ref, a, b = (h5py.File(p, "r")["latents"][()] for p in sys.argv[1:4])
e = rel_l2(a.astype(np.float64), ref.astype(np.float64)) if a.shape == ref.shape else float("inf")
ok = e <= float(sys.argv[4]) and np.array_equal(a, b)
print("%s rel L2 %.2e (tol %s), shape %s, rerun %s" % ("ok" if ok else "FAIL", e, sys.argv[4],
      a.shape, "same" if np.array_equal(a, b) else "DIFFERS"))
PY
)
    case $msg in ok*) ok "$tag cuda $p: ${msg#ok }" ;; *) bad "$tag cuda $p: ${msg#FAIL }" ;; esac
  done
done
if "$SP_BIN" encode --vae synth:wan2.1-vae --video "$work/big.h5" --device cuda -q \
     -o "$work/big-lat.h5" 2>"$work/big.err"; then
  "$PY" -c "
import sys, h5py, numpy as np
a = h5py.File('$work/big-lat.h5', 'r')['latents'][()]
sys.exit(0 if a.shape == (16, 2, 60, 104) and np.isfinite(a).all() and a.std() > 0 else 1)" &&
    ok "published config, 5 frames of 480x832, bf16: [16, 2, 60, 104], finite" ||
    bad "published config 480x832: shape or values"
else
  bad "published config 480x832: $(tail -1 "$work/big.err")"
fi
exit $fail
