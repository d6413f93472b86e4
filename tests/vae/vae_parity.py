"""Parity of the C VAE decoder (ranks/nets/wan_vae/wan_vae_cpu.c, through
tests/vae/test_vae_driver.c) with the float64 numpy reference
(tests/ref/wan_vae_ref.py).

For each case: random float32 weights of a small config and random float32
latents, written to an HDF5 file in the driver's layout; the driver decodes
them; the reference decodes the same float32 values in float64. The video
must match to relative L2 <= 1e-5 (STYLE.md: fp32 path, per forward) and
have the same shape. The head conv's weights are widened so that part of
the video reaches the clamp. The seed is printed; SP_SEED replays it.

    python3 vae_parity.py --driver build/tests/vae_test_vae_driver
    python3 vae_parity.py --driver ... --published   # the published widths
                                                     # (384 channels; ~1 min)
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import rel_l2, seed as take_seed  # noqa: E402
import wan_vae_ref as R  # noqa: E402

TOL = 1e-5

# (config, [(F, H, W), ...]): odd sizes, F = 1, 2, 5; a second config with
# one residual block per level and temporal upsampling at the other levels.
CASES = [
    (R.Config(8, 16, (1, 2, 4, 4), 2, (True, True, False)), [(1, 3, 5), (2, 5, 3), (5, 3, 3)]),
    (R.Config(4, 16, (1, 2, 4, 4), 1, (False, True, True)), [(2, 1, 3), (5, 3, 1)]),
]


def write_input(path, cfg, sd, z):
    with h5py.File(path, "w") as f:
        for k, v in (("dim", cfg.dim), ("z_dim", cfg.z_dim), ("n_mult", len(cfg.dim_mult)),
                     ("num_res_blocks", cfg.num_res_blocks)):
            f.attrs[k] = np.int64(v)
        f.attrs["dim_mult"] = np.asarray(cfg.dim_mult, np.int64)
        f.attrs["temporal_up"] = np.asarray(cfg.temporal_upsample, np.int64)
        f["latents"] = z.astype(np.float32)
        g = f.create_group("weights")
        for k, v in sd.items():
            g[k] = v.astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--published", action="store_true",
                    help="one case at the published config instead of the small ones")
    args = ap.parse_args()
    cases = [(R.published_config(), [(2, 3, 5)])] if args.published else CASES
    seed = take_seed("vae_parity")
    rng = np.random.default_rng(seed)
    fails = 0
    with tempfile.TemporaryDirectory() as tmp:
        for cfg, sizes in cases:
            # float32 weights, then the reference uses exactly those values.
            sd = {k: v.astype(np.float32).astype(np.float64)
                  for k, v in R.random_weights(cfg, rng).items()}
            sd["decoder.head.2.weight"] = (sd["decoder.head.2.weight"] * 2).astype(np.float32) \
                .astype(np.float64)
            for F, H, W in sizes:
                z = rng.standard_normal((16, F, H, W)).astype(np.float32)
                inp, out = os.path.join(tmp, "in.h5"), os.path.join(tmp, "out.h5")
                write_input(inp, cfg, sd, z)
                t0 = time.time()
                r = subprocess.run([args.driver, "decode", inp, out], capture_output=True,
                                   text=True)
                t_c = time.time() - t0
                what = "%r F=%d %dx%d" % (cfg, F, H, W)
                if r.returncode != 0:
                    print("FAIL  %s: driver exit %d: %s" % (what, r.returncode, r.stderr.strip()))
                    fails += 1
                    continue
                with h5py.File(out, "r") as f:
                    got = f["video"][()].astype(np.float64)
                t0 = time.time()
                ref = R.decode(cfg, sd, z.astype(np.float64))
                t_ref = time.time() - t0
                if got.shape != ref.shape:
                    print("FAIL  %s: shape %s, reference %s" % (what, got.shape, ref.shape))
                    fails += 1
                    continue
                err = rel_l2(got, ref)
                worst = float(np.abs(got - ref).max())
                clamped = float(np.mean(np.abs(ref) == 1.0))
                ok = err <= TOL
                fails += not ok
                print("%s  %s -> %s: rel L2 %.2e (max abs %.1e), %.0f%% clamped; "
                      "C %.2fs, numpy %.2fs"
                      % ("ok  " if ok else "FAIL", what, got.shape, err, worst, 100 * clamped,
                         t_c, t_ref))
    if fails:
        print("vae_parity: %d case(s) failed (tolerance %g)" % (fails, TOL))
        return 1
    print("vae_parity: all cases within %g" % TOL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
