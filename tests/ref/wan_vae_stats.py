"""The latent statistics of the Wan VAEs, read from wan_vae_stats.json (the
one place the tests keep the published numbers).

    stats(family)      -> (mean, std), tuples of floats as published
    scale_f32(family)  -> (mean, inv_std) as float64 arrays holding the
                          float32 values the published wrappers compute with:
                          float32(mean) and float32(1 / float32(std))

family is "wan2.1" (z_dim 16) or "wan2.2" (z_dim 48).
"""

import json
import os

import numpy as np

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wan_vae_stats.json")
_CACHE = {}


def _load():
    if not _CACHE:
        with open(_PATH) as f:
            _CACHE.update(json.load(f))
    return _CACHE


def stats(family):
    d = _load()[family]
    mean, std = tuple(float(v) for v in d["mean"]), tuple(float(v) for v in d["std"])
    if not len(mean) == len(std) == int(d["z_dim"]):
        raise ValueError("%s: %s holds %d means and %d stds for z_dim %d"
                         % (_PATH, family, len(mean), len(std), d["z_dim"]))
    return mean, std


def scale_f32(family):
    mean, std = stats(family)
    m = np.asarray(mean, dtype=np.float32)
    inv = np.float32(1.0) / np.asarray(std, dtype=np.float32)
    return m.astype(np.float64), inv.astype(np.float64)
