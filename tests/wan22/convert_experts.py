"""`staticpipe convert --expert high=PATH --expert low=PATH`: two generated
checkpoints (different key styles and dtypes, one of them sharded) become
one two-expert model file; read back with h5py, every tensor of each expert
must equal its own source bit for bit (fp32 out), the root must carry
experts = 2 and the published defaults, and the loader's own validation
(inspect --verify) must accept the file. Bad inputs are refused with one
line and no file: one expert only, experts of different configs, a bad
--expert value, an expert given twice, --expert beside a positional input.
usage: convert_experts.py STATICPIPE_BIN WORKDIR"""
import json
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import FAILS as failures, fail, seed  # noqa: E402
import stlib  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
SEED = seed("convert_experts")
rng = np.random.default_rng(SEED)
CFG = dict(stlib.SMALL)


def run(args):
    return subprocess.run([BIN, *args], capture_output=True, text=True)


# The high-noise expert: official keys, F32, one file. The low-noise one:
# diffusers keys, BF16, in two shards of a directory.
high = stlib.make_checkpoint(rng, CFG, "official", "F32")
low = stlib.make_checkpoint(rng, CFG, "diffusers", "BF16")
high_path = os.path.join(WORK, "high.safetensors")
stlib.write_st(high_path, high, {"which": "high"})
low_dir = os.path.join(WORK, "low")
os.mkdir(low_dir)
half = len(low) // 2
stlib.write_st(os.path.join(low_dir, "a.safetensors"), low[:half])
stlib.write_st(os.path.join(low_dir, "b.safetensors"), low[half:])

out = os.path.join(WORK, "a14b.h5")
r = run(["convert", "--expert", "high=" + high_path, "--expert", "low=" + low_dir, "-o", out,
         "--dtype", "fp32", "-q"])
if r.returncode != 0:
    fail(f"convert --expert: exit {r.returncode}: {r.stderr[-2000:]}")
else:
    v = run(["inspect", "--verify", "--json", out])
    if v.returncode != 0:
        fail(f"inspect --verify: exit {v.returncode}: {v.stderr[-1000:]}")
    else:
        j = json.loads(v.stdout)
        if j["experts"] != 2 or j["defaults"] != {"boundary": 0.875, "cfg": [4.0, 3.0],
                                                  "shift": 12.0, "steps": 40}:
            fail(f"inspect: experts {j.get('experts')}, defaults {j.get('defaults')}")
    with h5py.File(out, "r") as f:
        if sorted(f.keys()) != ["experts"] or sorted(f["experts"].keys()) != ["high", "low"]:
            fail(f"root groups {sorted(f.keys())}, /experts {sorted(f['experts'].keys())}")
        want = dict(experts=2, boundary=0.875, cfg_high=4.0, cfg_low=3.0, shift=12.0, steps=40)
        for a, x in want.items():
            got = float(np.asarray(f.attrs[a]).reshape(-1)[0])
            if got != x:
                fail(f"root attribute {a} = {got}, want {x}")
        n = 0
        for name, entries, style in (("high", high, "official"), ("low", low, "diffusers")):
            src = {k: (dt, raw) for k, dt, s, raw in entries}
            for g, b, tn, shape in stlib.table(CFG):
                p = f"/experts/{name}" + stlib.h5_path(g, b, tn)
                got = f[p][...]
                dt, raw = src[stlib.key(style, g, b, tn)]
                ref = stlib.to_f32(dt, raw).reshape(shape)
                if got.shape != tuple(shape) or not np.array_equal(
                        got.view(np.uint32), ref.view(np.uint32)):
                    fail(f"{p}: differs from its source")
                n += 1
        print(f"two experts: {n} tensors equal their sources bit for bit")

# One expert given.
bad = [
    ("one expert", ["--expert", "high=" + high_path], "both --expert high=PATH and --expert low"),
    ("bad value", ["--expert", "mid=" + high_path, "--expert", "low=" + low_dir],
     "not high=PATH or low=PATH"),
    ("twice", ["--expert", "high=" + high_path, "--expert", "high=" + high_path], "given twice"),
    ("positional too", ["--expert", "high=" + high_path, "--expert", "low=" + low_dir, high_path],
     "give no other input"),
]
# Experts of different configs: the low-noise one with three blocks.
c3 = dict(CFG, layers=3)
other = os.path.join(WORK, "three.safetensors")
stlib.write_st(other, stlib.make_checkpoint(rng, c3, "official", "F32"))
bad.append(("different configs", ["--expert", "high=" + high_path, "--expert", "low=" + other],
            "differ in their config (layers: high 2, low 3)"))
for label, args, msg in bad:
    o = os.path.join(WORK, "bad.h5")
    r = run(["convert", *args, "-o", o, "-q"])
    if r.returncode != 2 or msg not in r.stderr or os.path.exists(o):
        fail(f"{label}: exit {r.returncode} (want 2), file left {os.path.exists(o)}, "
             f"stderr {r.stderr[-500:]!r} (want {msg!r})")
    else:
        print(f"refused ({label}): {r.stderr.strip().splitlines()[-1]}")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("convert --expert: all checks passed")
