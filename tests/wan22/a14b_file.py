"""The two-expert model file (MODEL.md "Model file"): `init --arch
wan2.2-tiny` writes both experts under /experts/high and /experts/low with
the defaults as root attributes and the synth: weights (keyed
high_noise_model.* / low_noise_model.*, so the experts differ); a
one-expert file keeps its layout; the reader refuses damaged two-expert
files with one line naming what is wrong (exit 2), and `inspect --verify`
finds a flipped byte in the low-noise expert.
usage: a14b_file.py STATICPIPE_BIN WORKDIR"""
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import FAILS as failures, fail  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]


def run(args):
    return subprocess.run([BIN, *args], capture_output=True, text=True)


two = os.path.join(WORK, "two.h5")
one = os.path.join(WORK, "one.h5")
for arch, path in (("wan2.2-tiny", two), ("wan2.1-tiny", one)):
    r = run(["init", "--arch", arch, "--seed", "7", "--dtype", "fp32", "-q", "-o", path])
    if r.returncode != 0:
        fail(f"init {arch}: {r.stderr}")
with h5py.File(one, "r") as f:
    if sorted(f.keys()) != ["blocks", "embed", "head"] or "experts" in f.attrs:
        fail(f"a one-expert file changed its layout: {sorted(f.keys())}")
    q1 = f["/blocks/0001/self_attn.q.weight"][...]
with h5py.File(two, "r") as f:
    if sorted(f.keys()) != ["experts"]:
        fail(f"two-expert root holds {sorted(f.keys())}")
    qh = f["/experts/high/blocks/0001/self_attn.q.weight"][...]
    ql = f["/experts/low/blocks/0001/self_attn.q.weight"][...]
    if np.array_equal(qh, ql) or np.array_equal(qh, q1):
        fail("the experts' weights are not distinct (from each other and from wan2.1-tiny)")
    # variance 1/fan_in (MODEL.md "Model file", synth): both experts alike
    for name, q in (("high", qh), ("low", ql)):
        v = float(np.var(q.astype(np.float64))) * q.shape[1]
        if not 0.8 < v < 1.2:
            fail(f"{name}: q weight variance x fan_in = {v:.3f}, want ~1")
ri = run(["inspect", "--json", two])
if ri.returncode or '"experts":2' not in ri.stdout.replace(" ", ""):
    fail(f"inspect two.h5: {ri.stdout} {ri.stderr}")
v = run(["inspect", "--verify", two])
if v.returncode != 0:
    fail(f"inspect --verify of a fresh file: {v.stderr}")


def damaged(label, edit, want):
    p = os.path.join(WORK, "bad.h5")
    shutil.copy(two, p)
    with h5py.File(p, "r+") as f:
        edit(f)
    r = run(["inspect", "--verify", p])
    if r.returncode != 2 or want not in r.stderr:
        fail(f"{label}: exit {r.returncode} (want 2), stderr {r.stderr.strip()!r} (want {want!r})")
    else:
        print(f"refused ({label}): {r.stderr.strip().splitlines()[-1]}")


def flip(f):
    ds = f["/experts/low/blocks/0002/ffn.0.weight"]
    a = ds[...]
    a.view(np.uint32)[0, 0] ^= 1
    ds[...] = a


damaged("experts = 3", lambda f: f.attrs.modify("experts", np.int64(3)), "experts is not the integer 2")
damaged("boundary 1.5", lambda f: f.attrs.modify("boundary", 1.5), "boundary 1.5 is not in (0, 1)")
damaged("no steps", lambda f: f.attrs.__delitem__("steps"), "root attribute steps")
damaged("low expert missing", lambda f: f.__delitem__("/experts/low"), "/experts")
damaged("extra root group", lambda f: f.create_group("/embed"), "/")
damaged("a block missing", lambda f: f.__delitem__("/experts/high/blocks/0003"),
        "/experts/high/blocks has 3 groups")
damaged("flipped bit in the low expert", flip, "/experts/low/blocks/0002/ffn.0.weight")
if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("two-expert model file: all checks passed")
