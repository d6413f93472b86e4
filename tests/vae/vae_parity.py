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
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import seed as take_seed  # noqa: E402
import vae_driver as V  # noqa: E402
import wan_vae_ref as R  # noqa: E402

TOL = 1e-5

# (config, [(F, H, W), ...]): odd sizes, F = 1, 2, 5; a second config with
# one residual block per level and temporal upsampling at the other levels.
CASES = [
    (R.Config(8, 16, (1, 2, 4, 4), 2, (True, True, False)), [(1, 3, 5), (2, 5, 3), (5, 3, 3)]),
    (R.Config(4, 16, (1, 2, 4, 4), 1, (False, True, True)), [(2, 1, 3), (5, 3, 1)]),
]


def config_attrs(cfg):
    """The driver's config attributes (the model file's)."""
    return {"dim": cfg.dim, "z_dim": cfg.z_dim, "n_mult": len(cfg.dim_mult),
            "num_res_blocks": cfg.num_res_blocks, "dim_mult": cfg.dim_mult,
            "temporal_up": cfg.temporal_upsample}


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
            sd = V.f32_weights(R.random_weights(cfg, rng))
            # the head conv widened so that part of the video reaches the clamp
            # (doubling keeps them float32 values)
            sd["decoder.head.2.weight"] = sd["decoder.head.2.weight"] * 2
            for F, H, W in sizes:
                z = rng.standard_normal((16, F, H, W)).astype(np.float32)
                fails += not V.check_case(
                    "%r F=%d %dx%d" % (cfg, F, H, W),
                    lambda: V.run_driver(args.driver, "decode", tmp, config_attrs(cfg), "latents",
                                         z, sd, "video"),
                    lambda: R.decode(cfg, sd, z.astype(np.float64)), TOL)
    return V.summary("vae_parity", fails, TOL)


if __name__ == "__main__":
    sys.exit(main())
