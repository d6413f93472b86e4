#!/usr/bin/env bash
# Image to video on the CUDA backend through run, against the CPU backend
# (bf16 end to end: relative L2 <= 2e-2, the tolerance of test_gpu_run.sh):
# TI2V (wan2.2-ti2v-tiny) from a PNG through the Wan 2.2 VAE's CUDA encoder
# (latent frame 0 the image's, its tokens at timestep 0: the second time
# table of every block and of the head), its latent frame 0 against the CPU
# encoder's (bf16 encoder: <= 1e-2) and decoded to a video of 9 frames of
# the image's size; I2V (wan2.2-i2v-tiny, two experts across the
# switch) from image latents, and from the PNG through the Wan 2.1 VAE's
# CUDA encoder (wan2.1-vae-tiny with the encoder: the image and its 8 zero
# frames at the latent grid of --max-area 96*160, 80x160) decoded to a
# video of 9 frames of 160x80. The videos are .mp4 (ffprobe checks them)
# where FFmpeg's libraries load, else .h5 (their shape). Then, bit-identical to each 1-rank
# GPU run: a rerun, 2 and 3 ranks sharing the GPU, Ulysses 1x1x2 (the
# tokens of frame 0 split between the ranks). Skips (77) without a GPU.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_need_gpu
sp_python
sp_mpi
export OMP_NUM_THREADS=2
sp_work_dir gpu-i2v
T=$work
seed=$RANDOM
"$PY" - "$T" "$seed" <<'PYEOF' || exit 1
import sys
import h5py, numpy as np
from sptest import png_write
t, seed = sys.argv[1], int(sys.argv[2])
r = np.random.default_rng(seed)
h, w = 75, 130
yy, xx = np.mgrid[0:h, 0:w]
u8 = np.clip(127.5 + 100 * np.sin(xx[..., None] * 0.11 + yy[..., None] * 0.07 + r.uniform(0, 6, 3))
             + r.normal(0, 20, (h, w, 3)), 0, 255).astype(np.uint8)
png_write(f"{t}/img.png", u8)
with h5py.File(f"{t}/cond.h5", "w") as f:
    f["context"] = r.standard_normal((int(r.integers(1, 513)), 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((int(r.integers(1, 513)), 4096)).astype(np.float32)
with h5py.File(f"{t}/lat.h5", "w") as f:
    f["latents"] = r.standard_normal((16, 3, 6, 10)).astype(np.float32)
PYEOF
run() { # TAG NP ARGS...: run on NP ranks into $T/TAG.h5
  local tag=$1 np=$2
  shift 2
  if ! mpirun -np "$np" "$SP_BIN" run "$@" -q --no-preview -o "$T/$tag.h5" >"$T/$tag.log" 2>&1
  then
    cat "$T/$tag.log"
    echo "FAIL $tag: exit non-zero"
    fail=1
  fi
}
TI=(--model "synth:wan2.2-ti2v-tiny:$seed" --cond "$T/cond.h5" --frames 9 --steps 4 --seed "$seed"
    --image "$T/img.png" --max-area 96*160 --vae "synth:wan2.2-vae-tiny:$seed")
IV=(--model "synth:wan2.2-i2v-tiny:$seed" --cond "$T/cond.h5" --steps 4 --seed "$seed"
    --image-latents "$T/lat.h5")
IM=(--model "synth:wan2.2-i2v-tiny:$seed" --cond "$T/cond.h5" --frames 9 --steps 4 --seed "$seed"
    --image "$T/img.png" --max-area 96*160 --vae "synth:wan2.1-vae-tiny:$seed")
# The decoded videos: .mp4 where FFmpeg's libraries load, else .h5 (the
# frames as float32 [3, T, H, W]); either way checked below.
vx=h5
sp_has_ffmpeg && vx=mp4
run ti_cpu 1 "${TI[@]}" --device cpu
run ti_gpu 1 "${TI[@]}" --device cuda --video "$T/ti_video.$vx"
run ti_gpu2 1 "${TI[@]}" --device cuda
run ti_np2 2 "${TI[@]}" --device cuda
run ti_np3 3 "${TI[@]}" --device cuda
run ti_uly 2 "${TI[@]}" --device cuda --layout 1x1x2
run iv_cpu 1 "${IV[@]}" --device cpu
run iv_gpu 1 "${IV[@]}" --device cuda
run iv_np2 2 "${IV[@]}" --device cuda
run iv_uly 2 "${IV[@]}" --device cuda --layout 1x1x2
run im_cpu 1 "${IM[@]}" --device cpu
run im_gpu 1 "${IM[@]}" --device cuda --video "$T/im_video.$vx"
run im_gpu2 1 "${IM[@]}" --device cuda
run im_np2 2 "${IM[@]}" --device cuda
run im_uly 2 "${IM[@]}" --device cuda --layout 1x1x2
if [ $vx = mp4 ] && command -v ffprobe >/dev/null; then
  got=$(ffprobe -v error -select_streams v:0 -count_frames \
    -show_entries stream=width,height,nb_read_frames -of csv=p=0 "$T/ti_video.mp4")
  [ "$got" = "160,96,9" ] && echo "ok   TI2V video: $got" ||
    { echo "FAIL TI2V video: ffprobe says '$got'"; fail=1; }
  got=$(ffprobe -v error -select_streams v:0 -count_frames \
    -show_entries stream=width,height,nb_read_frames -of csv=p=0 "$T/im_video.mp4")
  [ "$got" = "160,80,9" ] && echo "ok   I2V video: $got" ||
    { echo "FAIL I2V video: ffprobe says '$got'"; fail=1; }
fi
"$PY" - "$T" "$vx" <<'PYEOF' || fail=1
import os, sys, h5py, numpy as np
d, vx = sys.argv[1], sys.argv[2]
ok = True
def check(c, what):
    global ok
    print(("ok   " if c else "FAIL ") + what)
    ok = ok and c
if vx == "h5":
    for n, shape in (("ti_video", (3, 9, 96, 160)), ("im_video", (3, 9, 80, 160))):
        p = os.path.join(d, n + ".h5")
        v = h5py.File(p)["video"] if os.path.exists(p) else None
        check(v is not None and v.shape == shape and np.isfinite(v[...]).all(),
              f"{n}: video [3, T, H, W] {None if v is None else v.shape}, want {shape}")
def get(n):
    p = os.path.join(d, n + ".h5")
    return h5py.File(p)["latents"][...] if os.path.exists(p) else None
rel = lambda a, b: np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64))
for tag, others in (("ti", ("gpu2", "np2", "np3", "uly")), ("iv", ("np2", "uly")),
                    ("im", ("gpu2", "np2", "uly"))):
    c, g = get(tag + "_cpu"), get(tag + "_gpu")
    if c is None or g is None:
        check(False, f"{tag}: a run is missing")
        continue
    check(c.shape == g.shape and rel(g, c) <= 2e-2,
          f"{tag}: gpu vs cpu {g.shape}, rel L2 {rel(g, c):.3e} (tol 2e-2)")
    if tag == "ti":
        e0 = rel(g[:, :1], c[:, :1])
        check(e0 <= 1e-2, f"ti: latent frame 0 (the CUDA encoder's against the CPU's): "
              f"rel L2 {e0:.3e} (tol 1e-2)")
    for o in others:
        x = get(f"{tag}_{o}")
        check(x is not None and x.tobytes() == g.tobytes(),
              f"{tag}_{o} bit-identical to the 1-rank GPU run")
sys.exit(0 if ok else 1)
PYEOF
exit $fail
