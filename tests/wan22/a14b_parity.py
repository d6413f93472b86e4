"""Parity of `staticpipe run` on a two-expert model (wan2.2-tiny, fp32) with
the float64 reference of the published Wan 2.2 loop (tests/ref/wan22_ref.py):
6 UniPC steps with the model's defaults (shift 12, boundary 0.875: 4
high-noise steps, then 2 low-noise ones; cfg 4,3), a run with --cfg and
--boundary given, and a run with a LoRA on one expert (@low, merged by the
reference in float64 as MODEL.md "LoRA" says and rounded to the model's
fp32). Relative L2 <= 1e-4 each (STYLE.md 9); and `forward` at t = 875 and
874 against the high- and the low-noise expert's forward (<= 1e-5). Fresh random inputs from a
printed seed (SP_SEED replays).
usage: a14b_parity.py STATICPIPE_BIN WORKDIR"""
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import rel_l2, seed  # noqa: E402
import wan22_ref as R  # noqa: E402
import loralib  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
SEED = seed("a14b_parity")
rng = np.random.default_rng(SEED)
TOL = 1e-4
failures = []


def run(args):
    r = subprocess.run([BIN, *args], capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"{args}: exit {r.returncode}")
        print(r.stderr[-3000:])
    return r


model = os.path.join(WORK, "a14b_tiny.h5")
run(["init", "--arch", "wan2.2-tiny", "--seed", str(int(rng.integers(0, 2 ** 31))),
     "--dtype", "fp32", "-q", "-o", model])
high, low, defaults = R.load_experts(model)
want = dict(boundary=0.875, cfg_high=4.0, cfg_low=3.0, shift=12.0, steps=40.0)
if defaults != want:
    failures.append(f"defaults {defaults}, want {want}")
frames, hgt, wid = 5, 32, 48
shape = (16, (frames - 1) // 4 + 1, hgt // 8, wid // 8)
cond = os.path.join(WORK, "cond.h5")
ctx = rng.standard_normal((int(rng.integers(1, 513)), 4096)).astype(np.float32)
ctxn = rng.standard_normal((int(rng.integers(1, 513)), 4096)).astype(np.float32)
noise = rng.standard_normal(shape).astype(np.float32)
with h5py.File(cond, "w") as f:
    f["context"], f["context_null"] = ctx, ctxn
npath = os.path.join(WORK, "noise.h5")
with h5py.File(npath, "w") as f:
    f["noise"] = noise

# A LoRA of the tiny config for the low-noise expert.
c = {k: high.cfg[k] for k in ("dim", "ffn_dim", "heads", "layers", "in_dim", "out_dim",
                              "text_dim", "freq_dim")}
lora = loralib.make_loras(rng, c)[0]
lpath = os.path.join(WORK, "lora.safetensors")
lora.write(lpath)
strength = 0.8


def merged(m):
    """m with the LoRA merged in float64, rounded to float32 (the file's dtype)."""
    w = {("embed", -1, k): v for k, v in m.embed.items()}
    w.update({("head", -1, k): v for k, v in m.head.items()})
    for b, blk in enumerate(m.blocks):
        w.update({("block", b, k): v for k, v in blk.items()})
    out = loralib.reference_merge(w, [lora], [strength])
    embed, head = dict(m.embed), dict(m.head)
    blocks = [dict(b) for b in m.blocks]
    for (g, b, k), v in out.items():
        v = v.astype(np.float32).astype(np.float64)
        (embed if g == "embed" else head if g == "head" else blocks[b])[k] = v
    return R.W.Model(m.cfg, embed, blocks, head)


cases = [
    ("defaults (6 steps, shift 12, cfg 4,3, boundary 0.875)", [], high, low, (3.0, 4.0), 12.0,
     0.875, ["high"] * 4 + ["low"] * 2),
    ("--cfg 2.5,6 --boundary 0.93 --shift 8", ["--cfg", "2.5,6", "--boundary", "0.93",
                                               "--shift", "8"], high, low, (6.0, 2.5), 8.0,
     0.93, None),
    ("LoRA @low:0.8", ["--lora", f"{lpath}:{strength}@low"], high, merged(low), (3.0, 4.0), 12.0,
     0.875, None),
]
for n, (name, extra, mh, ml, gs, shift, b, want_used) in enumerate(cases):
    out = os.path.join(WORK, f"run{n}.h5")
    r = run(["run", "--model", model, "--cond", cond, "--noise", npath, "--frames", str(frames),
             "--size", f"{hgt}x{wid}", "--steps", "6", "--device", "cpu", "--no-preview", "-q",
             *extra, "-o", out])
    if r.returncode != 0:
        continue
    ref, used = R.sample_a14b(mh, ml, noise, ctx, ctxn, 6, gs, shift, b)
    if "high" not in used or "low" not in used:
        failures.append(f"{name}: the run does not switch experts ({used})")
    if want_used and used != want_used:
        failures.append(f"{name}: experts per step {used}, MODEL.md says {want_used}")
    with h5py.File(out, "r") as f:
        got = f["latents"][...].astype(np.float64)
    err = rel_l2(got, ref)
    ok = err <= TOL
    print(f"{'ok  ' if ok else 'FAIL'}  {name}: experts {used}, rel L2 {err:.3e} (tol {TOL:.0e})")
    if not ok:
        failures.append(f"{name}: rel L2 {err:.3e}")
    if n == 0:
        # The test tells the guidance order apart: (high, low) read as
        # (low, high) must not pass.
        wrong, _ = R.sample_a14b(mh, ml, noise, ctx, ctxn, 6, gs[::-1], shift, b)
        werr = rel_l2(got, wrong)
        print(f"{'ok  ' if werr > 1e-3 else 'FAIL'}  the guidance pair swapped is {werr:.3e} away")
        if not werr > 1e-3:
            failures.append(f"{name}: the swapped guidance pair is only {werr:.3e} away")

# forward at the boundary: t = 875 runs the high-noise expert, 874 the
# low-noise one (relative L2 <= 1e-5 per forward, STYLE.md 9).
lat = rng.standard_normal(shape).astype(np.float32)
fin = os.path.join(WORK, "fwd_in.h5")
with h5py.File(fin, "w") as f:
    f["latent"], f["context"] = lat, ctx
for t, m, name in ((875, high, "high"), (874, low, "low")):
    fout = os.path.join(WORK, f"fwd_{t}.h5")
    r = run(["forward", "--model", model, "--latent", fin, "--cond", fin, "--timestep", str(t),
             "--device", "cpu", "-o", fout])
    if r.returncode != 0:
        continue
    with h5py.File(fout, "r") as f:
        got = f["pred"][...].astype(np.float64)
    err = rel_l2(got, R.W.forward(m, lat, t, ctx))
    ok = err <= 1e-5 and f"the {name}-noise expert" in r.stderr
    print(f"{'ok  ' if ok else 'FAIL'}  forward t={t}: the {name}-noise expert, rel L2 {err:.3e}")
    if not ok:
        failures.append(f"forward t={t}: rel L2 {err:.3e} against the {name}-noise expert")

# The LoRA changes the run (so its parity is not the base run's by accident).
if not failures:
    with h5py.File(os.path.join(WORK, "run0.h5"), "r") as f0, \
            h5py.File(os.path.join(WORK, "run2.h5"), "r") as f2:
        d = rel_l2(f2["latents"][...].astype(np.float64), f0["latents"][...].astype(np.float64))
    if not d > 1e-3:
        failures.append(f"the LoRA on the low-noise expert moves the latents by only {d:.2e}")
    else:
        print(f"ok    the LoRA @low moves the latents by rel L2 {d:.3e}")
if failures:
    for f in failures:
        print("FAIL:", f)
    sys.exit(1)
print("a14b parity: all checks passed")
