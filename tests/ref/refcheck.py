"""The Python tests' one check and error helper: `check` prints ok/FAIL per
assertion and records the failures in FAILS; `rel_l2` is the relative L2
error of the tolerance table (STYLE.md 9), ||a - b|| / ||b||."""

import numpy as np

FAILS = []


def check(cond, what):
    print("%s  %s" % ("ok  " if cond else "FAIL", what))
    if not cond:
        FAILS.append(what)


def rel_l2(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))
