"""The VAE parity tests' shared steps (tests/vae/vae_parity.py,
tests/vae/vae_enc_parity.py, tests/vae22/vae22_parity.py): each writes
random float32 weights and an input to an HDF5 file in the C test driver's
layout, runs the driver (tests/vae/test_vae_driver.c,
test_vae_enc_driver.c, tests/vae22/test_vae22_driver.c), and compares its
output with the float64 numpy reference's.

  f32_weights(sd)          sd's arrays rounded to float32 and held in
                           float64: the values the driver reads, so the
                           reference computes with exactly those.
  run_driver(driver, command, tmp, attrs, name, x, sd, out_name)
                           writes TMP/in.h5 (int64 attributes attrs
                           {name: int or sequence}, x as the float32
                           dataset NAME, group weights of sd in float32),
                           runs DRIVER COMMAND in.h5 out.h5 and returns
                           (dataset OUT_NAME of out.h5 in float64, the
                           driver's seconds); RuntimeError naming the exit
                           status and stderr when the driver fails.
  check_case(what, run, reference, tol)
                           one case: run() -> (the driver's output,
                           seconds), as run_driver (a RuntimeError is the
                           case's failure, printed), then reference() ->
                           the float64 output, timed, and compare; True
                           when it passes.
  compare(what, got, ref, tol, seconds)
                           the comparison: prints "ok  " or "FAIL" with the
                           shapes, the relative L2 error, the largest
                           absolute difference, the share of reference
                           values at the clamp (+-1, the decoder's video)
                           and the seconds (C, numpy); True when the shapes
                           agree and the error is within tol.
  summary(name, fails, tol)
                           prints the verdict line; returns the exit status.
"""
import os
import subprocess
import time

import h5py
import numpy as np

from sptest import rel_l2


def f32_weights(sd):
    return {k: np.asarray(v).astype(np.float32).astype(np.float64) for k, v in sd.items()}


def _write_input(path, attrs, name, x, sd):
    with h5py.File(path, "w") as f:
        for k, v in attrs.items():
            f.attrs[k] = np.int64(v) if np.isscalar(v) else np.asarray(v, np.int64)
        f[name] = np.asarray(x, np.float32)
        g = f.create_group("weights")
        for k, v in sd.items():
            g[k] = np.asarray(v, np.float32)


def run_driver(driver, command, tmp, attrs, name, x, sd, out_name):
    inp, out = os.path.join(tmp, "in.h5"), os.path.join(tmp, "out.h5")
    _write_input(inp, attrs, name, x, sd)
    t0 = time.time()
    r = subprocess.run([driver, command, inp, out], capture_output=True, text=True)
    t_c = time.time() - t0
    if r.returncode != 0:
        raise RuntimeError("driver exit %d: %s" % (r.returncode, r.stderr.strip()))
    with h5py.File(out, "r") as f:
        return f[out_name][()].astype(np.float64), t_c


def check_case(what, run, reference, tol):
    try:
        got, t_c = run()
    except RuntimeError as e:
        print("FAIL  %s: %s" % (what, e))
        return False
    t0 = time.time()
    ref = reference()
    return compare(what, got, ref, tol, (t_c, time.time() - t0))


def compare(what, got, ref, tol, seconds):
    if got.shape != ref.shape:
        print("FAIL  %s: shape %s, reference %s" % (what, got.shape, ref.shape))
        return False
    err = rel_l2(got, ref)
    ok = err <= tol
    clamped = float(np.mean(np.abs(ref) == 1.0))
    print("%s  %s -> %s: rel L2 %.2e (max abs %.1e), %.0f%% at the clamp; C %.2fs, numpy %.2fs"
          % ("ok  " if ok else "FAIL", what, got.shape, err, float(np.abs(got - ref).max()),
             100 * clamped, *seconds))
    return ok


def summary(name, fails, tol):
    if fails:
        print("%s: %d case(s) failed (tolerance %g)" % (name, fails, tol))
        return 1
    print("%s: all cases within %g" % (name, tol))
    return 0
