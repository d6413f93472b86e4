"""Parity of the C engine's image-to-video DiT and loops with the float64
references of the published Wan 2.2 code (tests/ref/i2v_ref.py, wan_ref.py,
wan22_ref.py; I2V.md).

    i2v_parity.py forward --bin SP_BIN --work DIR
        `staticpipe forward` of the tiny image-to-video models, fp32 files:
        wan2.2-i2v-tiny (in_dim 36: [x; y], each expert at a timestep of
        its side of the boundary) against wan_ref's forward of the same
        36 channels; wan2.2-ti2v-tiny (in/out 48) with --frame0-timestep 0
        (the tokens of latent frame 0 at timestep 0, the others at t)
        against i2v_ref.forward_tokens, and without it (every token at t)
        against wan_ref.forward: relative L2 <= 1e-5 each.

    i2v_parity.py run --bin SP_BIN --work DIR
        `staticpipe run` (UniPC, the models' defaults) of the tiny models,
        fp32 files, against the references' loops: relative L2 <= 1e-4
        (STYLE.md: fp32 after a multi-step run).
        TI2V, image to video: a PNG through run --image --vae (the
        wan2.2-vae-tiny file: the size rule, LANCZOS, the crop, the Wan 2.2
        encoder) against i2v_ref.ti2v_image_latent and sample_ti2v (latent
        frame 0 the image's latent, its tokens at timestep 0); text to
        video against sample_ti2v without an image.
        I2V, two experts across the switch (4 steps at shift 5: high, high,
        low, low): run --image-latents (random latents of the image and its
        zero frames) against i2v_ref.sample_i2v on y = [mask; latents].
        I2V from a PNG through run --image --vae (a wan2.1-vae-tiny file
        with the encoder: the latent grid from --max-area, the bicubic
        resize, the Wan 2.1 encoder of the image and its zero frames, the
        mask) against i2v_ref.i2v_condition and sample_i2v.

Fresh random inputs from a printed seed (SP_SEED replays). Exit 0 when
every case agrees, 1 otherwise, printing each relative error.
"""

import argparse
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import check, finish, png_write, rel_l2, run, seed as take_seed  # noqa: E402
import i2v_ref as R  # noqa: E402
import image_ref as I  # noqa: E402
import wan22_ref as W22  # noqa: E402
import wan_ref as W  # noqa: E402
import wan_vae22_ref as V  # noqa: E402
import wan_vae_enc_ref as E  # noqa: E402

FORWARD_TOL = 1e-5   # STYLE.md tolerance table: fp32 path per forward
RUN_TOL = 1e-4       # fp32 path after a multi-step run
VAE22_TINY = V.Config(8, 8, 48, (1, 2, 4, 4), 2, (False, True, True))  # wan2.2-vae-tiny
VAE21_TINY = E.Config(8, 16, (1, 2, 4, 4), 2, (False, True, True))      # wan2.1-vae-tiny


def write_h5(path, **datasets):
    with h5py.File(path, "w") as f:
        for k, v in datasets.items():
            f.create_dataset(k, data=np.asarray(v, dtype=np.float32))


def read_h5(path, name):
    with h5py.File(path, "r") as f:
        return f[name][()].astype(np.float64)


def init(bin_, work, arch, rng):
    path = os.path.join(work, arch + ".h5")
    run([bin_, "init", "--arch", arch, "--seed", int(rng.integers(0, 2 ** 31)), "--dtype",
         "fp32", "-q", "-o", path])
    return path


def forward(bin_, work, mpath, lat, ctx, t, t_first=None, tag=""):
    """The engine's prediction for lat at t (frame 0's tokens at t_first)."""
    inp = os.path.join(work, "in%s.h5" % tag)
    out = os.path.join(work, "pred%s.h5" % tag)
    write_h5(inp, latent=lat, context=ctx)
    args = [bin_, "forward", "--model", mpath, "--latent", inp, "--timestep", t, "--cond", inp,
            "-o", out]
    if t_first is not None:
        args += ["--frame0-timestep", t_first]
    run(args)
    return read_h5(out, "pred")


def cmd_forward(bin_, work, rng):
    # I2V: two experts of in_dim 36; each at a timestep of its side of 900.
    mpath = init(bin_, work, "wan2.2-i2v-tiny", rng)
    high, low, defaults = W22.load_experts(mpath)
    want = dict(boundary=0.9, cfg_high=3.5, cfg_low=3.5, shift=5.0, steps=40.0)
    check(defaults == want, "wan2.2-i2v-tiny's defaults are I2V-A14B's published ones: %s"
          % defaults)
    check((high.cfg["in_dim"], high.cfg["out_dim"]) == (36, 16),
          "wan2.2-i2v-tiny: in_dim 36, out_dim 16 (%d, %d)" % (high.cfg["in_dim"],
                                                                high.cfg["out_dim"]))
    for n, (shape, t) in enumerate((((36, 2, 4, 6), int(rng.integers(900, 1001))),
                                    ((36, 3, 6, 4), int(rng.integers(0, 900))),
                                    ((36, 1, 2, 2), 899))):
        lat = rng.standard_normal(shape).astype(np.float32)
        ctx = rng.standard_normal((int(rng.integers(1, 513)), 4096)).astype(np.float32)
        pred = forward(bin_, work, mpath, lat, ctx, t, tag="i%d" % n)
        model = high if t >= 900 else low
        ref = W.forward(model, lat, t, ctx)
        err = rel_l2(pred, ref)
        check(pred.shape == (16,) + shape[1:] and err <= FORWARD_TOL,
              "I2V forward [x; y] %s t=%d (%s expert): pred %s, rel L2 %.3e (tol %.0e)"
              % (shape, t, "high" if t >= 900 else "low", pred.shape, err, FORWARD_TOL))
    # TI2V: per-token timesteps, latent frame 0 at 0.
    mpath = init(bin_, work, "wan2.2-ti2v-tiny", rng)
    model = W.load_model(mpath)
    check((model.cfg["in_dim"], model.cfg["out_dim"]) == (48, 48),
          "wan2.2-ti2v-tiny: in and out 48")
    for n, (shape, t) in enumerate((((48, 3, 4, 6), int(rng.integers(1, 1001))),
                                    ((48, 2, 2, 4), 999), ((48, 1, 4, 2), 500))):
        lat = rng.standard_normal(shape).astype(np.float32)
        ctx = rng.standard_normal((int(rng.integers(1, 513)), 4096)).astype(np.float32)
        grid = R.token_grid(shape)
        pred = forward(bin_, work, mpath, lat, ctx, t, 0, tag="t%d" % n)
        ref = R.forward_tokens(model, lat, R.ti2v_token_timesteps(t, grid, True),
                               W.embed_text(model, ctx))
        err = rel_l2(pred, ref)
        check(err <= FORWARD_TOL, "TI2V forward %s t=%d, frame 0 at 0: rel L2 %.3e (tol %.0e)"
              % (shape, t, err, FORWARD_TOL))
        pred = forward(bin_, work, mpath, lat, ctx, t, tag="u%d" % n)
        err = rel_l2(pred, W.forward(model, lat, t, ctx))
        check(err <= FORWARD_TOL, "TI2V forward %s t=%d, every token at t: rel L2 %.3e"
              % (shape, t, err))


def vae_weights(path, part):
    """The weights of one part of a VAE file as float64 (encoder: the keys
    of its group, encoder.* and conv1.*)."""
    with h5py.File(path, "r") as f:
        return {k: d[()].astype(np.float64) for k, d in f[part].items()}


def contexts(work, rng):
    ctx = rng.standard_normal((int(rng.integers(1, 513)), 4096)).astype(np.float32)
    ctxn = rng.standard_normal((int(rng.integers(1, 513)), 4096)).astype(np.float32)
    cond = os.path.join(work, "cond.h5")
    write_h5(cond, context=ctx, context_null=ctxn)
    return cond, ctx, ctxn


def sample(bin_, work, tag, noise, args):
    """The engine's latents of a run from noise with args (its -o added)."""
    npath, out = os.path.join(work, "noise_%s.h5" % tag), os.path.join(work, "run_%s.h5" % tag)
    write_h5(npath, noise=noise)
    p = run([bin_, "run", "--noise", npath, "-o", out, "-q", *args], fatal=False)
    if p.returncode != 0:
        check(False, "run %s: exit %d" % (tag, p.returncode))
        return None
    return read_h5(out, "latents")


def run_ti2v(bin_, work, rng):
    mpath = init(bin_, work, "wan2.2-ti2v-tiny", rng)
    model = W.load_model(mpath)
    vpath = os.path.join(work, "vae22.h5")
    run([bin_, "init", "--arch", "wan2.2-vae-tiny", "--seed", int(rng.integers(0, 2 ** 31)),
         "--dtype", "fp32", "-q", "-o", vpath])
    cond, ctx, ctxn = contexts(work, rng)
    h, w = (int(v) for v in rng.integers(30, 90, 2))
    u8 = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    png = os.path.join(work, "ti2v.png")
    png_write(png, u8)
    area = 64 * 96
    z, (oh, ow) = R.ti2v_image_latent(VAE22_TINY, vae_weights(vpath, "encoder"), u8, area)
    noise = rng.standard_normal((48, 2, oh // 16, ow // 16)).astype(np.float32)
    got = sample(bin_, work, "ti2v", noise, ["--model", mpath, "--cond", cond, "--frames", 5,
                                             "--steps", 3, "--image", png, "--max-area", area,
                                             "--vae", vpath])
    ref = R.sample_ti2v(model, noise, z, ctx, ctxn, 3)
    if got is not None:
        err = rel_l2(got, ref) if got.shape == ref.shape else float("inf")
        check(err <= RUN_TOL, "TI2V image to video, a %dx%d PNG at area %d -> %dx%d, 3 steps: "
              "latents %s, rel L2 %.3e (tol %.0e)" % (w, h, area, ow, oh, got.shape, err, RUN_TOL))
        err0 = rel_l2(got[:, :1], z) if got.shape == ref.shape else float("inf")
        check(err0 <= FORWARD_TOL, "TI2V: latent frame 0 is the image's latent (the reference's "
              "encoding of the prepared image): rel L2 %.3e" % err0)
    noise = rng.standard_normal((48, 2, 4, 6)).astype(np.float32)
    got = sample(bin_, work, "t2v", noise, ["--model", mpath, "--cond", cond, "--frames", 5,
                                            "--size", "64x96", "--steps", 3])
    ref = R.sample_ti2v(model, noise, None, ctx, ctxn, 3)
    if got is not None:
        err = rel_l2(got, ref)
        check(err <= RUN_TOL, "TI2V text to video, 3 steps: rel L2 %.3e (tol %.0e)"
              % (err, RUN_TOL))


def run_i2v(bin_, work, rng):
    mpath = init(bin_, work, "wan2.2-i2v-tiny", rng)
    high, low, _ = W22.load_experts(mpath)
    cond, ctx, ctxn = contexts(work, rng)
    lat = rng.standard_normal((16, 2, 4, 6)).astype(np.float32)
    ipath = os.path.join(work, "image_latents.h5")
    write_h5(ipath, latents=lat)
    noise = rng.standard_normal((16, 2, 4, 6)).astype(np.float32)
    got = sample(bin_, work, "i2v", noise, ["--model", mpath, "--cond", cond, "--steps", 4,
                                            "--image-latents", ipath])
    y = np.concatenate([R.i2v_mask(5, 4, 6), lat.astype(np.float64)], axis=0)
    ref, used = R.sample_i2v(high, low, noise, y, ctx, ctxn, 4)
    if got is not None:
        err = rel_l2(got, ref) if got.shape == ref.shape else float("inf")
        check(used == ["high", "high", "low", "low"] and err <= RUN_TOL,
              "I2V image latents, 4 steps across the switch (%s): rel L2 %.3e (tol %.0e)"
              % (",".join(used), err, RUN_TOL))
    # --image: the Wan 2.1 VAE's encoder.
    vpath = os.path.join(work, "vae21.h5")
    run([bin_, "init", "--arch", "wan2.1-vae-tiny", "--encoder",
         "--seed", int(rng.integers(0, 2 ** 31)), "--dtype", "fp32", "-q", "-o", vpath])
    h, w = (int(v) for v in rng.integers(30, 90, 2))
    u8 = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    png = os.path.join(work, "i2v.png")
    png_write(png, u8)
    area = 32 * 48
    lh, lw = I.i2v_grid(h, w, area)
    noise = rng.standard_normal((16, 2, lh, lw)).astype(np.float32)
    npath, out = os.path.join(work, "noise_i2v_img.h5"), os.path.join(work, "run_i2v_img.h5")
    write_h5(npath, noise=noise)
    p = run([bin_, "run", "--model", mpath, "--cond", cond, "--steps", 2, "--frames", 5,
             "--image", png, "--max-area", area, "--vae", vpath, "--noise", npath, "-o", out,
             "-q"], expect=None)
    with h5py.File(vpath, "r") as f:
        has_encoder = "encoder" in f
    if not check(p.returncode == 0 and has_encoder, "I2V --image: exit %d, encoder in the VAE "
                 "file: %s" % (p.returncode, has_encoder)):
        print(p.stderr[-2000:])
        return
    y, _ = R.i2v_condition(VAE21_TINY, vae_weights(vpath, "encoder"), u8, area, 5)
    ref, _ = R.sample_i2v(high, low, noise, y, ctx, ctxn, 2)
    got = read_h5(out, "latents")
    err = rel_l2(got, ref) if got.shape == ref.shape else float("inf")
    check(err <= RUN_TOL, "I2V --image end to end (a %dx%d PNG at area %d: grid %dx%d, bicubic, "
          "the Wan 2.1 encoder, the mask), 2 steps: rel L2 %.3e" % (w, h, area, lh, lw, err))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("forward", "run"))
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    rng = np.random.default_rng(take_seed("i2v parity " + a.what))
    try:
        if a.what == "forward":
            cmd_forward(a.bin, a.work, rng)
        else:
            run_ti2v(a.bin, a.work, rng)
            run_i2v(a.bin, a.work, rng)
    except W.RefError as ex:
        check(False, "reference: %s" % ex)
    return finish("i2v parity " + a.what)


if __name__ == "__main__":
    sys.exit(main())
