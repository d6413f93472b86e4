"""Parity of the C VAE encoder (ranks/nets/wan_vae/wan_vae_enc_cpu.c,
through tests/vae/test_vae_enc_driver.c) with the float64 numpy reference
(tests/ref/wan_vae_enc_ref.py, checked against the published
WanVAE_.encode to ~1e-16).

For each case: random float32 weights of a small config and a random
float32 video in [-1, 1], written to an HDF5 file in the driver's layout;
the driver encodes it; the reference encodes the same float32 values in
float64 (the published chunk loop, normalised as Wan2_1_VAE.encode). The
latents must match to relative L2 <= 1e-5 (STYLE.md: fp32 path) and have
the reference's shape. Odd sizes, T = 1 and 1 + 4k. The seed is printed;
SP_SEED replays it.

    python3 vae_enc_parity.py --driver build/tests/vae_test_vae_enc_driver
    python3 vae_enc_parity.py --driver ... --published   # the published
                                                         # widths (384 channels)
"""

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import seed as take_seed  # noqa: E402
import vae_driver as V  # noqa: E402
import wan_vae_enc_ref as E  # noqa: E402

TOL = 1e-5

# (config, [(T, H, W), ...]): the published structure at dim 8 (odd sizes,
# T = 1, 5, 9; a latent of 4 x 5 for the middle attention), a second with
# one residual block per level, three levels and temporal downsampling at
# both resamples, a third with one temporal downsample (two latent frames
# per chunk).
CASES = [
    (E.Config(8, 16, (1, 2, 4, 4), 2, (False, True, True)),
     [(1, 9, 13), (5, 8, 11), (9, 17, 10), (5, 33, 47)]),
    (E.Config(4, 16, (1, 2, 2), 1, (True, True)), [(1, 5, 7), (9, 6, 9)]),
    (E.Config(4, 16, (1, 2, 2), 1, (False, True)), [(9, 12, 10)]),
]


def config_attrs(cfg):
    """The driver's config attributes (the model file's): the VAE config's
    temporal_up is the decoder's, the encoder's flags reversed."""
    return {"dim": cfg.dim, "z_dim": cfg.z_dim, "n_mult": len(cfg.dim_mult),
            "num_res_blocks": cfg.num_res_blocks, "dim_mult": cfg.dim_mult,
            "temporal_up": cfg.temporal_downsample[::-1]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--published", action="store_true",
                    help="one case at the published config instead of the small ones")
    args = ap.parse_args()
    cases = [(E.published_config(), [(5, 16, 24)])] if args.published else CASES
    rng = np.random.default_rng(take_seed("vae_enc_parity"))
    fails = 0
    with tempfile.TemporaryDirectory() as tmp:
        for cfg, sizes in cases:
            sd = V.f32_weights(E.random_weights(cfg, rng))
            for T, H, W in sizes:
                video = rng.uniform(-1, 1, (3, T, H, W)).astype(np.float32)
                fails += not V.check_case(
                    "%r T=%d %dx%d" % (cfg, T, H, W),
                    lambda: V.run_driver(args.driver, "encode", tmp, config_attrs(cfg), "video",
                                         video, sd, "latents"),
                    lambda: E.encode(cfg, sd, video.astype(np.float64)), TOL)
    return V.summary("vae_enc_parity", fails, TOL)


if __name__ == "__main__":
    sys.exit(main())
