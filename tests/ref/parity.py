"""Parity of the C engine with the float64 reference (tests/ref/wan_ref.py).

    parity.py forward --bin SP_BIN    one DiT forward of the tiny model, bf16
                                      and fp32 files, several random latents,
                                      timesteps and context lengths:
                                      relative L2 <= 1e-5
    parity.py run --bin SP_BIN        3-step Euler and UniPC runs with CFG 5,
                                      shift 5 (and a cfg 1 run): <= 1e-4

Every input is fresh random data from a printed seed (SP_SEED=<n> replays a
run). Exit 0 when every case agrees, 1 on any mismatch or engine failure,
printing each relative error.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import rel_l2, seed as take_seed  # noqa: E402
import wan_ref as W  # noqa: E402
import h5py  # noqa: E402

FORWARD_TOL = 1e-5   # STYLE.md tolerance table: fp32 path per forward
RUN_TOL = 1e-4       # fp32 path after a multi-step run


def sh(cmd):
    """Run the engine; return True on exit 0, printing its output otherwise."""
    print("  $ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        print("  engine exited %d:\n%s" % (p.returncode, p.stdout.rstrip()), flush=True)
        return False
    return True


def write_h5(path, **datasets):
    with h5py.File(path, "w") as f:
        for k, v in datasets.items():
            f.create_dataset(k, data=np.asarray(v, dtype=np.float32))


def read_h5(path, name, shape):
    with h5py.File(path, "r") as f:
        if name not in f:
            raise W.RefError("%s: no dataset %s" % (path, name))
        a = f[name][()]
    if a.dtype != np.float32 or a.shape != tuple(shape):
        raise W.RefError("%s: dataset %s is %s %s, expected float32 %s"
                         % (path, name, a.dtype, a.shape, tuple(shape)))
    return a.astype(np.float64)


def init_model(bin_, tmp, seed, dtype):
    path = os.path.join(tmp, "tiny_%s.h5" % dtype)
    if not sh([bin_, "init", "--arch", "wan2.1-tiny", "--seed", str(seed),
               "--dtype", dtype, "-q", "-o", path]):
        return None
    m = W.load_model(path)
    c = m.cfg
    if (c["dim"], c["ffn_dim"], c["heads"], c["layers"]) != (256, 640, 2, 4):
        print("  FAIL: wan2.1-tiny is not dim 256, ffn 640, heads 2, layers 4: %s" % c)
        return None
    return path, m


def cmd_forward(bin_, rng, tmp):
    results = []
    for dtype in ("bf16", "fp32"):
        got = init_model(bin_, tmp, int(rng.integers(0, 2 ** 31)), dtype)
        if got is None:
            return False
        mpath, model = got
        cases = [((16, 5, 8, 8), 512, int(rng.integers(0, 1001))),
                 ((16, 2, 6, 10), int(rng.integers(1, 512)), int(rng.integers(0, 1001))),
                 ((16, 1, 4, 4), 1, 0),
                 ((16, 3, 4, 6), int(rng.integers(1, 512)), 1000)]
        for n, (shape, L, t) in enumerate(cases):
            lat = rng.standard_normal(shape).astype(np.float32)
            ctx = rng.standard_normal((L, 4096)).astype(np.float32)
            inp = os.path.join(tmp, "in_%s_%d.h5" % (dtype, n))
            out = os.path.join(tmp, "pred_%s_%d.h5" % (dtype, n))
            # one file holds both inputs (allowed by the forward command)
            write_h5(inp, latent=lat, context=ctx)
            if not sh([bin_, "forward", "--model", mpath, "--latent", inp,
                       "--timestep", str(t), "--cond", inp, "-o", out]):
                results.append(("forward %s %s t=%d L=%d" % (dtype, shape, t, L), None))
                continue
            ref = W.forward(model, lat, t, ctx)
            pred = read_h5(out, "pred", shape)
            results.append(("forward %s latent %s t=%d L=%d" % (dtype, shape, t, L),
                            rel_l2(pred, ref)))
    return report(results, FORWARD_TOL)


def cmd_run(bin_, rng, tmp):
    results = []
    got = init_model(bin_, tmp, int(rng.integers(0, 2 ** 31)), "bf16")
    if got is None:
        return False
    mpath, model = got
    frames, (hgt, wid) = 5, (48, 64)
    shape = (16, (frames - 1) // 4 + 1, hgt // 8, wid // 8)
    cases = [("euler", 5.0), ("unipc", 5.0), ("unipc", 1.0)]
    for n, (sampler, cfg) in enumerate(cases):
        lc, lu = int(rng.integers(1, 513)), int(rng.integers(1, 513))
        ctx = rng.standard_normal((lc, 4096)).astype(np.float32)
        ctxn = rng.standard_normal((lu, 4096)).astype(np.float32)
        noise = rng.standard_normal(shape).astype(np.float32)
        cond = os.path.join(tmp, "cond_%d.h5" % n)
        npath = os.path.join(tmp, "noise_%d.h5" % n)
        out = os.path.join(tmp, "run_%d.h5" % n)
        if cfg != 1.0:
            write_h5(cond, context=ctx, context_null=ctxn)
        else:
            write_h5(cond, context=ctx)   # cfg 1 needs no negative prompt
        write_h5(npath, noise=noise)
        name = "run %s cfg %g steps 3 shift 5 L=%d/%d" % (sampler, cfg, lc, lu)
        if not sh([bin_, "run", "--model", mpath, "--cond", cond, "--frames", str(frames),
                   "--size", "%dx%d" % (hgt, wid), "--steps", "3", "--cfg", "%g" % cfg,
                   "--shift", "5", "--sampler", sampler, "--noise", npath, "-o", out]):
            results.append((name, None))
            continue
        ref = W.sample(model, noise, ctx, ctxn if cfg != 1.0 else None,
                       3, cfg, 5.0, sampler)
        results.append((name, rel_l2(read_h5(out, "latents", shape), ref)))
    return report(results, RUN_TOL)


def report(results, tol):
    ok = True
    for name, err in results:
        if err is None:
            print("FAIL  %-55s engine failed" % name)
            ok = False
        else:
            good = err <= tol
            ok &= good
            print("%s  %-55s rel L2 %.3e (tol %.0e)" % ("ok  " if good else "FAIL", name, err, tol))
    return ok and len(results) > 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("forward", "run"))
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    seed = take_seed("parity " + a.what)
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory(prefix="sp_parity_") as tmp:
        try:
            ok = (cmd_forward if a.what == "forward" else cmd_run)(a.bin, rng, tmp)
        except W.RefError as ex:
            print("FAIL  %s" % ex)
            ok = False
    print("parity %s: %s (seed %d)" % (a.what, "passed" if ok else "FAILED", seed))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
