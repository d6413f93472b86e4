"""The image preparation of image to video (ranks/io/image_prep.h, through
$SP_BUILD/tests/io_image_prep_dump) against the float64 references of the
published steps (tests/ref/image_ref.py, I2V.md "Preparing the image"):

  - 8-bit RGB to [-1, 1] in float32: bit for bit;
  - the I2V latent grid (WanI2V.generate's rounding in double): equal for
    random images and areas and the worked examples (480x832 at 480*832
    gives 58 rows), a grid below 2 refused (exit 2);
  - PyTorch's bicubic resize: the engine's float32 equals the float64
    reference rounded to float32 (a value within 1e-12 of a rounding
    boundary may round the other way: none has, so far; at most one float32
    ulp and one value in 10^4 are allowed);
  - Pillow's LANCZOS on 8-bit RGB at random sizes, up and down: bit for bit;
  - TI2V's size rule, resize and centre crop: bit for bit;
  - I2V's mask channels of y (ranks/pipeline/job_image.h) against
    i2v_ref.i2v_mask (itself checked against the published repeat,
    reshape and transpose): bit for bit;
  - I2V's y = [mask; latents] from random latents: bit for bit;
  - I2V's video, the encoder's input (the grid, the bicubic resize, the
    zero frames) against i2v_ref.i2v_condition's steps: the grid and the
    zero frames bit for bit, the first frame as the bicubic check.

usage: image_prep_parity.py DUMP_BIN WORKDIR. Fresh random images from a
printed seed (SP_SEED replays)."""
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import check, finish, png_write, seed  # noqa: E402
import i2v_ref as R  # noqa: E402
import image_ref as I  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(seed("image_prep_parity"))


def dump(u8, ops, tag, expect=0):
    png = os.path.join(WORK, tag + ".png")
    out = os.path.join(WORK, tag + ".h5")
    png_write(png, u8)
    p = subprocess.run([BIN, png, out, *ops], capture_output=True, text=True)
    if p.returncode != expect:
        check(False, "io_image_prep_dump %s: exit %d (expected %d): %s"
              % (" ".join(ops), p.returncode, expect, p.stderr[-800:]))
        return None
    if expect != 0:
        return p.stderr
    with h5py.File(out, "r") as f:
        return {k: f[k][()] for k in f}


def image(h, w):
    """A random image with smooth parts and noise (both matter to a filter)."""
    yy, xx = np.mgrid[0:h, 0:w]
    base = 127.5 + 100 * np.sin(xx[..., None] * rng.uniform(0.05, 0.5) +
                                yy[..., None] * rng.uniform(0.05, 0.5) + rng.uniform(0, 6, 3))
    return np.clip(base + rng.normal(0, 30, (h, w, 3)), 0, 255).astype(np.uint8)


def float32_close(got, ref64):
    """got (float32) against ref64 rounded to float32: equal but for values
    whose float64 lies within a hair of a float32 rounding boundary."""
    want = ref64.astype(np.float32)
    diff = got != want
    if not diff.any():
        return True, 0
    ulp = np.abs(np.spacing(want[diff]))
    near = np.all(np.abs(got[diff].astype(np.float64) - ref64[diff]) <= 0.5 * ulp + 1e-12 *
                  np.abs(ref64[diff]))
    return bool(near and diff.mean() <= 1e-4), int(diff.sum())


# I2V: worked grid examples (I2V.md), then random images, areas and resizes.
for (h, w, area, want) in ((720, 1280, 720 * 1280, (90, 160)), (480, 832, 480 * 832, (58, 104)),
                           (832, 480, 480 * 832, (104, 60)), (1024, 1024, 720 * 1280, (120, 120))):
    u8 = np.zeros((h, w, 3), np.uint8)
    d = dump(u8, ["grid:%d" % area], "g%dx%d" % (h, w))
    got = tuple(int(v) for v in d["grid_%d" % area]) if d else None
    check(got == want == I.i2v_grid(h, w, area),
          "I2V grid of %dx%d at area %d: %s (by hand and the reference: %s)" % (h, w, area, got,
                                                                                want))
err = dump(np.zeros((4, 300, 3), np.uint8), ["grid:2000"], "thin", expect=2)
check(err is not None and "latent grid" in err,
      "a 300x4 image at area 2000 (grid below 2) refused, naming the latent grid")

for n in range(6):
    h, w = (int(v) for v in rng.integers(5, 90, 2))
    u8 = image(h, w)
    area = int(rng.integers(32 * 32, 96 * 96))
    try:
        lh, lw = I.i2v_grid(h, w, area)
    except I.RefError:
        continue
    oh, ow = 8 * lh, 8 * lw
    d = dump(u8, ["grid:%d" % area, "bicubic:%d:%d" % (oh, ow)], "i%d" % n)
    if d is None:
        continue
    unit = I.to_unit(u8)
    check(np.array_equal(d["rgb"].astype(np.uint8), u8) and
          np.array_equal(d["unit"], unit.astype(np.float32)),
          "%dx%d PNG read back, [-1, 1] bit for bit (float32)" % (h, w))
    check(tuple(int(v) for v in d["grid_%d" % area]) == (lh, lw),
          "I2V grid %dx%d at area %d: %s" % (h, w, area, (lh, lw)))
    ok, ndiff = float32_close(d["bicubic_%dx%d" % (oh, ow)], I.bicubic_resize(unit, oh, ow))
    check(ok, "bicubic %dx%d -> %dx%d == the float64 reference in float32 (%d values "
          "differ by a rounding)" % (h, w, oh, ow, ndiff))

# Bicubic on sizes the grid never asks for (down, up, equal, one row).
for n, (h, w, oh, ow) in enumerate(((7, 9, 3, 17), (40, 12, 40, 12), (1, 6, 4, 2), (33, 5, 8, 40))):
    u8 = image(h, w)
    d = dump(u8, ["bicubic:%d:%d" % (oh, ow)], "b%d" % n)
    if d is None:
        continue
    ok, ndiff = float32_close(d["bicubic_%dx%d" % (oh, ow)],
                              I.bicubic_resize(I.to_unit(u8), oh, ow))
    check(ok, "bicubic %dx%d -> %dx%d (%d values differ by a rounding)" % (h, w, oh, ow, ndiff))

# LANCZOS at random sizes, then the TI2V preparation.
for n in range(8):
    h, w, oh, ow = (int(v) for v in rng.integers(1, 70, 4))
    u8 = image(h, w)
    d = dump(u8, ["lanczos:%d:%d" % (ow, oh)], "l%d" % n)
    if d is None:
        continue
    check(np.array_equal(d["lanczos_%dx%d" % (ow, oh)].astype(np.uint8),
                         I.pil_resize_lanczos(u8, ow, oh)),
          "LANCZOS %dx%d -> %dx%d bit for bit" % (w, h, ow, oh))
for n, (h, w, area) in enumerate(((45, 70, 64 * 96), (90, 41, 96 * 64), (64, 64, 64 * 64),
                                  (37, 120, 48 * 160), (150, 100, 100 * 120))):
    u8 = image(h, w)
    d = dump(u8, ["ti2v:%d" % area], "t%d" % n)
    if d is None:
        continue
    ref = I.ti2v_image(u8, area)
    got = d["ti2v_%d" % area].astype(np.uint8)
    check(got.shape == ref.shape and np.array_equal(got, ref),
          "TI2V image of %dx%d at area %d: %s, bit for bit" % (w, h, area, got.shape[:2]))
for frames, h, w in ((1, 2, 2), (5, 4, 6), (81, 6, 10), (21, 3, 1)):
    d = dump(np.zeros((2, 2, 3), np.uint8), ["mask:%d:%d:%d" % (frames, h, w)], "m%d" % frames)
    if d is None:
        continue
    ref = R.i2v_mask(frames, h, w)
    got = d["mask_%d" % frames]
    check(got.shape == ref.shape and np.array_equal(got, ref),
          "I2V mask of %d frames %dx%d: %s, bit for bit" % (frames, h, w, got.shape))
for frames, c, h, w in ((1, 16, 2, 4), (9, 16, 4, 6), (13, 3, 6, 2)):
    f = 1 + (frames - 1) // 4
    lat = rng.standard_normal((c, f, h, w)).astype(np.float32)
    lpath = os.path.join(WORK, "lat%d.h5" % frames)
    with h5py.File(lpath, "w") as hf:
        hf["latents"] = lat
    d = dump(np.zeros((2, 2, 3), np.uint8), ["cond:%d:%s" % (frames, lpath)], "c%d" % frames)
    if d is None:
        continue
    ref = np.concatenate([R.i2v_mask(frames, h, w), lat.astype(np.float64)], axis=0)
    got = d["cond_%d" % frames]
    check(got.shape == ref.shape and np.array_equal(got, ref.astype(np.float32)),
          "I2V y = [mask; latents] of %d frames, %d latent channels %dx%d: %s, bit for bit"
          % (frames, c, h, w, got.shape))
for n, (h, w, area, frames) in enumerate(((45, 70, 32 * 48, 5), (90, 41, 48 * 32, 9),
                                          (33, 33, 40 * 40, 1))):
    u8 = image(h, w)
    d = dump(u8, ["i2v:%d:%d" % (area, frames)], "v%d" % n)
    if d is None:
        continue
    lh, lw = I.i2v_grid(h, w, area)
    got = d["i2v_%d_%d" % (area, frames)]
    shape_ok = got.shape == (3, frames, 8 * lh, 8 * lw)
    check(shape_ok, "I2V video of a %dx%d image at area %d, %d frames: %s, grid %dx%d"
          % (h, w, area, frames, got.shape, lh, lw))
    if not shape_ok:
        continue
    first = I.bicubic_resize(I.to_unit(u8, np.float32), 8 * lh, 8 * lw)
    check(float32_close(got[:, 0], first)[0] and not got[:, 1:].any(),
          "I2V video: frame 0 the bicubic resize (float32 of the float64 reference), frames "
          "1..%d zero bit for bit" % (frames - 1))
sys.exit(finish("image_prep_parity"))
