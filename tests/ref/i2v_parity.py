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

Fresh random inputs from a printed seed (SP_SEED replays). Exit 0 when
every case agrees, 1 otherwise, printing each relative error.
"""

import argparse
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import check, finish, rel_l2, run, seed as take_seed  # noqa: E402
import i2v_ref as R  # noqa: E402
import wan22_ref as W22  # noqa: E402
import wan_ref as W  # noqa: E402

FORWARD_TOL = 1e-5   # STYLE.md tolerance table: fp32 path per forward


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("forward",))
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    rng = np.random.default_rng(take_seed("i2v parity " + a.what))
    try:
        cmd_forward(a.bin, a.work, rng)
    except W.RefError as ex:
        check(False, "reference: %s" % ex)
    return finish("i2v parity " + a.what)


if __name__ == "__main__":
    sys.exit(main())
