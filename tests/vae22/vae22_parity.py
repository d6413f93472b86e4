"""Parity of the C Wan 2.2 VAE (ranks/nets/wan_vae22/, CPU fp32, through
tests/vae22/test_vae22_driver.c) with the float64 numpy reference
(tests/ref/wan_vae22_ref.py), encoder and decoder.

For each case: random float32 weights of a small config and a random
float32 input, written to an HDF5 file in the driver's layout; the driver
encodes or decodes it; the reference computes the same float32 values in
float64 (its published chunk loops). The output must have the same shape
and match to relative L2 <= 1e-5 (STYLE.md: fp32 path, per forward). The
decoder's head weights are widened so that part of the video reaches the
clamp. Also: the C tables of the 48 latent means and stds are the float32
values of tests/ref/wan_vae_stats.json. The seed is printed; SP_SEED
replays it.

    python3 vae22_parity.py --driver build/tests/vae22_test_vae22_driver
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import seed as take_seed  # noqa: E402
import vae_driver as V  # noqa: E402
import wan_vae22_ref as R  # noqa: E402
import wan_vae_stats as S  # noqa: E402

TOL = 1e-5

# (config, decoder cases (F, h, w), encoder cases (T, H, W)): odd latent
# sizes, F = 1, 2, 3 and T = 1, 5, 9 (1 + 4k); the published structure at
# small widths, then one residual block per level with temporal
# downsampling at the first and last resamples, then three levels (8x in
# space).
CASES = [
    (R.Config(8, 8, 48, (1, 2, 4, 4), 2, (False, True, True)),
     [(1, 3, 5), (2, 1, 3), (3, 3, 1)], [(1, 16, 48), (5, 48, 16), (9, 32, 16)]),
    (R.Config(8, 16, 48, (1, 2, 4, 4), 1, (True, False, True)),
     [(2, 3, 3), (3, 1, 1)], [(5, 16, 16), (9, 16, 32)]),
    (R.Config(16, 8, 48, (1, 2, 2), 2, (True, True)),
     [(3, 3, 5)], [(9, 24, 8)]),
]


def config_attrs(cfg):
    """The driver's config attributes (the model file's)."""
    return {"dim": cfg.dim, "dec_dim": cfg.dec_dim, "z_dim": cfg.z_dim,
            "n_mult": len(cfg.dim_mult), "num_res_blocks": cfg.num_res_blocks,
            "dim_mult": cfg.dim_mult, "temporal_down": cfg.temporal_downsample}


def f32_weights(cfg, rng, part):
    sd = V.f32_weights(R.random_weights(cfg, rng, part))
    if part == "decoder":  # doubling keeps them float32 values
        sd["decoder.head.2.weight"] = sd["decoder.head.2.weight"] * 2
    return sd


def check_case(driver, tmp, cfg, part, sd, x):
    """One case of part (encoder: video to latents; decoder: latents to
    video) against the reference (vae_driver.check_case)."""
    enc = part == "encoder"
    return V.check_case(
        "%r %s %s" % (cfg, part, x.shape),
        lambda: V.run_driver(driver, "encode" if enc else "decode", tmp, config_attrs(cfg),
                             "video" if enc else "latents", x, sd, "latents" if enc else "video"),
        lambda: (R.encode if enc else R.decode)(cfg, sd, x.astype(np.float64)), TOL)


def check_stats(driver):
    r = subprocess.run([driver, "stats"], capture_output=True, text=True, check=True)
    got = np.array([[float(v) for v in line.split()] for line in r.stdout.split("\n") if line])
    mean, std = S.stats("wan2.2")
    want = np.stack([np.asarray(mean, np.float32), np.asarray(std, np.float32)], 1)
    ok = got.shape == want.shape and np.array_equal(got.astype(np.float32), want)
    print("%s  the C latent statistics are the float32 values of wan_vae_stats.json"
          % ("ok  " if ok else "FAIL"))
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    args = ap.parse_args()
    seed = take_seed("vae22_parity")
    rng = np.random.default_rng(seed)
    fails = 0 if check_stats(args.driver) else 1
    with tempfile.TemporaryDirectory() as tmp:
        for cfg, dec_cases, enc_cases in CASES:
            for part, cases in (("decoder", dec_cases), ("encoder", enc_cases)):
                sd = f32_weights(cfg, rng, part)
                for n, h, w in cases:
                    if part == "decoder":
                        x = rng.standard_normal((cfg.z_dim, n, h, w)).astype(np.float32)
                    else:
                        x = rng.uniform(-1, 1, (3, n, h, w)).astype(np.float32)
                    fails += not check_case(args.driver, tmp, cfg, part, sd, x)
    return V.summary("vae22_parity", fails, TOL)


if __name__ == "__main__":
    sys.exit(main())
