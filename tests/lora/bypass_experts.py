"""LoRA bypass mode on a two-expert model (wan2.2-tiny, fp32, CPU backend):
each expert has its own pairs, those of the LoRAs tagged for it and of the
untagged ones (MODEL.md "LoRA", bypass).

usage: bypass_experts.py STATICPIPE WORKDIR [SEED]   (mpirun on the PATH)

1. With a LoRA @high, one @low, and both with an untagged one as well
   (three files, three key styles): --lora-mode bypass against merged,
   latents within relative L2 1e-5 while the LoRAs move them by more than
   1e-3; the @high and the @low run differ from each other.
2. The same bypass runs against the independent float64 reference of the
   published two-expert loop (tests/ref/wan22_ref.py) with each expert's
   LoRAs merged in float64 (tests/lora/loralib.py): relative L2 <= 1e-4
   (STYLE.md 9, multi-step run).
3. Bypass with all three on 2, 3 and 4 ranks: bit-identical to 1 rank.
4. A --jobs file whose lines switch between those sets (and lora=none) on
   1 and 2 ranks: auto picks bypass, and every job is bit-identical to its
   own single bypass run."""
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import sptest  # noqa: E402
from sptest import FAILS as failures, read as latents, rel_l2 as rel, require as check  # noqa: E402
from sptest import run as sh, same  # noqa: E402
import loralib  # noqa: E402
from stlib import LINEARS  # noqa: E402
import wan22_ref as R  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
SEED = sptest.seed("bypass_experts", sys.argv[3] if len(sys.argv) > 3 else None)
rng = np.random.default_rng(SEED)


def w(name):
    return os.path.join(WORK, name)


model = w("a14b_tiny.h5")
sh([BIN, "init", "--arch", "wan2.2-tiny", "--seed", str(SEED % 100000), "--dtype", "fp32", "-q",
    "-o", model])
high, low, _ = R.load_experts(model)
c, _ = loralib.model_config(model)


def pairs_lora(style, rank, names, dt, alpha):
    return loralib.block_pairs(rng, c, style, rank, names, dt, alpha)


loras = {  # name: (Lora, strength, tag)
    "H": (pairs_lora("comfy", 4, LINEARS, "F32", 2.0), 0.8, "@high"),
    "L": (pairs_lora("diffusers", 3, ["self_attn.q.weight", "ffn.0.weight",
                                      "cross_attn.k.weight", "cross_attn.v.weight"], "BF16", None),
          -1.5, "@low"),
    "U": (pairs_lora("kohya", 2, ["ffn.2.weight", "self_attn.v.weight", "cross_attn.q.weight"],
                     "F16", 1.0), 1.2, ""),
}
spec = {}
for k, (lo, s, tag) in loras.items():
    lo.write(w(f"{k}.safetensors"))
    spec[k] = f"{w(k + '.safetensors')}:{s}{tag}"
sets = {"@high": ["H"], "@low": ["L"], "both": ["H", "L", "U"]}

frames, hgt, wid, steps = 5, 32, 48, 6
shape = (16, (frames - 1) // 4 + 1, hgt // 8, wid // 8)
ctx = rng.standard_normal((int(rng.integers(1, 300)), 4096)).astype(np.float32)
ctxn = rng.standard_normal((int(rng.integers(1, 300)), 4096)).astype(np.float32)
noise = rng.standard_normal(shape).astype(np.float32)
with h5py.File(w("cond.h5"), "w") as f:
    f["context"], f["context_null"] = ctx, ctxn
with h5py.File(w("noise.h5"), "w") as f:
    f["noise"] = noise
base = [BIN, "run", "--model", model, "--frames", str(frames), "--size", f"{hgt}x{wid}",
        "--steps", str(steps), "--device", "cpu", "--no-preview", "-q"]
common = base + ["--cond", w("cond.h5"), "--noise", w("noise.h5")]


def lora_args(names):
    return [a for k in names for a in ("--lora", spec[k])]


# ---- 1. bypass against merged; 2. against the float64 reference -------------------

sh(common + ["-o", w("plain.h5")])
plain = latents(w("plain.h5"))


def merged64(m, expert):
    """m with the LoRAs of the set that apply to expert merged in float64."""
    wts = {("block", b, k): v for b, blk in enumerate(m.blocks) for k, v in blk.items()}
    use = [k for k in cur if loras[k][2] in ("", "@" + expert)]
    if not use:
        return m
    out = loralib.reference_merge(wts, [loras[k][0] for k in use], [loras[k][1] for k in use])
    blocks = [dict(b) for b in m.blocks]
    for (_, b, k), v in out.items():
        blocks[b][k] = v
    return R.W.Model(m.cfg, m.embed, blocks, m.head)


byp = {}
for name, cur in sets.items():
    sh(common + lora_args(cur) + ["--lora-mode", "merged", "-o", w(f"m_{name}.h5")])
    sh(common + lora_args(cur) + ["--lora-mode", "bypass", "-o", w(f"b_{name}.h5")])
    m, b = latents(w(f"m_{name}.h5")), latents(w(f"b_{name}.h5"))
    byp[name] = b
    e, moved = rel(b, m), rel(m, plain)
    print(f"{name}: bypass vs merged rel L2 {e:.3g}; the LoRAs move the latents by {moved:.3g}")
    check(np.all(np.isfinite(b)), f"{name}: non-finite latents")
    check(e <= 1e-5, f"{name}: bypass differs from merged: rel L2 {e:.3g} > 1e-5")
    check(moved > 1e-3, f"{name}: the LoRAs hardly move the latents ({moved:.3g})")
    ref, used = R.sample_a14b(merged64(high, "high"), merged64(low, "low"), noise, ctx, ctxn,
                              steps, (3.0, 4.0), 12.0, 0.875)
    er = rel(b, ref)
    print(f"{name}: bypass vs the float64 two-expert reference (experts {used}): rel L2 {er:.3g}")
    check("high" in used and "low" in used, f"{name}: the reference does not switch ({used})")
    check(er <= 1e-4, f"{name}: bypass differs from the float64 reference: rel L2 {er:.3g}")
d = rel(byp["@high"], byp["@low"])
check(d > 1e-3, f"the @high and the @low run are only {d:.3g} apart")

# ---- 3. ranks -------------------------------------------------------------------------

for n in (2, 3, 4):
    sh(common + lora_args(sets["both"]) + ["--lora-mode", "bypass", "-o", w(f"b{n}.h5")], ranks=n)
    ok = same(latents(w(f"b{n}.h5")), byp["both"])
    print(f"both, bypass on {n} ranks: {'bit-identical to' if ok else 'DIFFERS from'} 1 rank")
    check(ok, f"bypass on {n} ranks differs from 1 rank")

# ---- 4. jobs switching LoRAs ------------------------------------------------------------

jobs = [("@high", sets["@high"]), ("both", sets["both"]), ("none", []), ("@low", sets["@low"]),
        ("@high", sets["@high"])]
for ranks in (1, 2):
    lines = []
    for i, (_, names) in enumerate(jobs):
        keys = [f"lora={spec[k]}" for k in names] or ["lora=none"]
        lines.append(" ".join([f"cond={w('cond.h5')}", f"noise={w('noise.h5')}",
                               f"out={w(f'j{ranks}_{i}.h5')}"] + keys))
    with open(w("jobs.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    sh(base + ["--jobs", w("jobs.txt")], ranks=ranks)
    for i, (name, _) in enumerate(jobs):
        want = plain if name == "none" else byp[name]
        with h5py.File(w(f"j{ranks}_{i}.h5"), "r") as f:
            mode = f.attrs.get("lora_mode", b"")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        check(mode == ("" if name == "none" else "bypass"),
              f"jobs on {ranks} ranks: line {i + 1} ({name}): lora_mode '{mode}'")
        ok = same(latents(w(f"j{ranks}_{i}.h5")), want)
        print(f"jobs on {ranks} rank(s), line {i + 1} ({name}): "
              f"{'bit-identical to' if ok else 'DIFFERS from'} its own run")
        check(ok, f"jobs on {ranks} ranks: line {i + 1} ({name}) differs from its own run")

print(f"{len(failures)} check(s) failed" if failures else "all checks passed")
sys.exit(1 if failures else 0)
