"""LoRA bypass mode against merged mode, jobs that switch LoRAs, and the
inputs bypass refuses (MODEL.md "LoRA").

usage: bypass_check.py STATICPIPE WORKDIR [SEED]   (mpirun on the PATH)

1. On the CPU backend (fp32), a run with --lora-mode bypass against the
   same run with --lora-mode merged: latents within relative L2 1e-5, the
   LoRAs moving them by much more than that; lora_mode attributes; auto
   picks merged for one run.
2. Bypass on 1 to 4 ranks: bit-identical latents.
3. A --jobs file whose lines name different LoRAs (lora= repeatable,
   lora=none, a line without lora= taking --lora): auto picks bypass, and
   every job's latents are bit-identical to its own single bypass run (on
   1 and 2 ranks, the latter with jobs in flight together); each job
   records its own LoRAs.
4. Refused: a LoRA with a full difference (diff, diff_b) or a pair on the
   head in bypass mode, --lora-mode merged with lines naming different
   LoRAs (exit 2, one line saying why, no output); in a jobs file a line
   whose LoRAs cannot be bypassed, or with a bad lora= value, fails alone."""
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import sptest  # noqa: E402
from sptest import FAILS as failures, rel_l2 as rel, require as check, run as sh, same  # noqa: E402
import loralib  # noqa: E402
from stlib import LINEARS  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
SEED = sptest.seed("bypass_check", sys.argv[3] if len(sys.argv) > 3 else None)
rng = np.random.default_rng(SEED)


def w(name):
    return os.path.join(WORK, name)


def latents(path):
    with h5py.File(path, "r") as f:
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        return f["latents"][...], attrs


model = w("tiny.h5")
sh([BIN, "init", "--arch", "wan2.1-tiny", "--seed", str(SEED % 1000), "--dtype", "fp32", "-o", model])
c, _ = loralib.model_config(model)
sh_ = loralib.shapes(c)


def pairs_lora(style, rank, names, dt, alpha):
    """Pairs on the named linear layers of every block (bypassable)."""
    return loralib.block_pairs(rng, c, style, rank, names, dt, alpha)


# A on every linear layer, B and C on some, overlapping A (stacked along r).
files = {
    "A": pairs_lora("comfy", 4, LINEARS, "F32", 2.0),
    "B": pairs_lora("diffusers", 3, ["self_attn.q.weight", "ffn.0.weight", "cross_attn.k.weight"],
                    "BF16", None),
    "C": pairs_lora("kohya", 2, ["ffn.2.weight", "self_attn.v.weight", "cross_attn.v.weight"],
                    "F16", 1.0),
}
for k, lo in files.items():
    lo.write(w(f"{k}.safetensors"))
A, B, C = (w(f"{k}.safetensors") for k in "ABC")

with h5py.File(w("cond.h5"), "w") as f:
    f["context"] = rng.standard_normal((11, 4096)).astype(np.float32)
    f["context_null"] = rng.standard_normal((6, 4096)).astype(np.float32)
base = [BIN, "run", "--model", model, "--frames", "5", "--size", "32x32", "--steps", "3", "--cfg",
        "4", "--device", "cpu", "--no-preview"]
common = base + ["--cond", w("cond.h5"), "--seed", str(SEED), "-q"]

# ---- 1. bypass against merged -------------------------------------------------

two = ["--lora", A + ":0.8", "--lora", B + ":-1.5", "--lora", C]
sh(common + two + ["--lora-mode", "merged", "-o", w("merged.h5")])
sh(common + two + ["--lora-mode", "bypass", "-o", w("bypass.h5")])
sh(common + two + ["-o", w("auto.h5")])
sh(common + ["-o", w("plain.h5")])
m, mattr = latents(w("merged.h5"))
b1, battr = latents(w("bypass.h5"))
au, aattr = latents(w("auto.h5"))
plain, pattr = latents(w("plain.h5"))
e, moved = rel(b1, m), rel(m, plain)
print(f"bypass vs merged (3 LoRAs, fp32 CPU): rel L2 {e:.3g}; the LoRAs move the latents by "
      f"{moved:.3g}")
check(np.all(np.isfinite(b1)), "bypass: non-finite latents")
check(e <= 1e-5, f"bypass differs from merged: rel L2 {e:.3g} > 1e-5")
check(moved > 1e-3, f"the LoRAs hardly move the latents ({moved:.3g})")
check(battr.get("lora_mode") == "bypass", f"bypass: lora_mode attribute {battr.get('lora_mode')}")
check(aattr.get("lora_mode") == "merged" and same(au, m),
      f"auto on one run: lora_mode {aattr.get('lora_mode')}, equal to merged: {same(au, m)}")
check("lora_mode" not in pattr and "lora0" not in pattr, "a run without LoRAs has LoRA attributes")
check(battr.get("lora1") == B + ":-1.5", f"bypass: lora1 attribute {battr.get('lora1')}")

# ---- 2. ranks -------------------------------------------------------------------

for n in (2, 3, 4):
    sh(common + two + ["--lora-mode", "bypass", "-o", w(f"bypass{n}.h5")], ranks=n)
    r, _ = latents(w(f"bypass{n}.h5"))
    print(f"bypass on {n} ranks: {'bit-identical to' if same(r, b1) else 'DIFFERS from'} 1 rank")
    check(same(r, b1), f"bypass on {n} ranks differs from 1 rank")

# ---- 3. jobs switching LoRAs ------------------------------------------------------

jobs = [  # (lora= keys of the line, the LoRAs of its own single run)
    ([f"lora={A}:0.8", f"lora={B}:-1.5", f"lora={C}"], two),
    ([], ["--lora", C + ":2"]),                      # takes --lora
    (["lora=none"], []),
    ([f"lora={B}"], ["--lora", B]),
    ([f"lora={A}:0.8", f"lora={B}:-1.5", f"lora={C}"], two),  # back to the first set
    ([f"lora={A}:0.8", f"lora={B}:-1.5", f"lora={C}"], two),  # in flight with the one before
]
for ranks in (1, 2):
    lines = []
    for i, (keys, _) in enumerate(jobs):
        lines.append(" ".join([f"cond={w('cond.h5')}", f"out={w(f'j{ranks}_{i}.h5')}",
                               f"seed={SEED + i}"] + keys))
    with open(w("jobs.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    p = sh(base + ["--lora", C + ":2", "--jobs", w("jobs.txt")], ranks=ranks)
    check("lora (bypass)" in p.stderr, f"{ranks} ranks: auto did not pick bypass for jobs with "
          f"different LoRAs")
    for i, (keys, own) in enumerate(jobs):
        single = w(f"s{i}.h5")
        if ranks == 1:
            sh(base + ["--cond", w("cond.h5"), "--seed", str(SEED + i), "-q"] + own +
               ["--lora-mode", "bypass", "-o", single])
        got, gattr = latents(w(f"j{ranks}_{i}.h5"))
        ref, _ = latents(single)
        print(f"jobs on {ranks} rank(s), line {i + 1}: "
              f"{'bit-identical to' if same(got, ref) else 'DIFFERS from'} its own bypass run")
        check(same(got, ref), f"jobs on {ranks} ranks: line {i + 1} differs from its own run")
        want0 = None if not own else own[1] if ":" in own[1] else own[1] + ":1"
        check(gattr.get("lora0") == want0, f"line {i + 1}: lora0 attribute {gattr.get('lora0')}, "
              f"expected {want0}")
    j0, _ = latents(w(f"j{ranks}_0.h5"))
    j2, _ = latents(w(f"j{ranks}_2.h5"))
    check(not same(j0, j2), "jobs with and without LoRAs give the same latents")

# ---- 4. refused -------------------------------------------------------------------

D = c["dim"]
withdiff = loralib.Lora("comfy")
withdiff.pair(rng, "block", 0, "self_attn.q.weight", sh_[("block", 0, "self_attn.q.weight")], 2)
withdiff.diff(rng, "block", 1, "norm3.weight", sh_[("block", 1, "norm3.weight")])
withdiff.write(w("diff.safetensors"))
head = loralib.Lora("comfy")
head.pair(rng, "head", -1, "head.head.weight", sh_[("head", -1, "head.head.weight")], 2)
head.write(w("head.safetensors"))
cases = [
    ("diff in bypass", ["--lora", w("diff.safetensors"), "--lora-mode", "bypass"],
     ["diff.safetensors", "cannot be bypassed", "norm3", "--lora-mode merged"]),
    ("head pair in bypass", ["--lora", w("head.safetensors"), "--lora-mode", "bypass"],
     ["head.safetensors", "cannot be bypassed", "head.head"]),
]
for name, args, want in cases:
    out = w("bad-out.h5")
    p = sh(common + args + ["-o", out], expect=None)
    errs = [ln for ln in p.stderr.splitlines() if "error" in ln]
    print(f"refused ({name}): exit {p.returncode}: {errs[0] if errs else p.stderr.strip()[:200]}")
    check(p.returncode == 2 and not os.path.exists(out) and len(errs) == 1 and
          all(s in errs[0] for s in want), f"refused ({name}): exit {p.returncode}, wanted 2 "
          f"and one line with {want}")

with open(w("jobs-bad.txt"), "w") as f:
    f.write(f"cond={w('cond.h5')} out={w('k0.h5')} lora={A}\n")
    f.write(f"cond={w('cond.h5')} out={w('k1.h5')} lora={B}\n")
out_ok = not os.path.exists(w("k0.h5"))
p = sh(base + ["--lora-mode", "merged", "--jobs", w("jobs-bad.txt")], expect=None)
errs = [ln for ln in p.stderr.splitlines() if "error" in ln]
print(f"refused (merged, lines with different LoRAs): exit {p.returncode}: {errs[:1]}")
check(p.returncode == 2 and out_ok and not os.path.exists(w("k0.h5")) and errs and
      "jobs-bad.txt:2" in errs[0] and "--lora-mode bypass" in errs[0],
      f"merged with different LoRAs per line: exit {p.returncode}, {errs[:1]}")

with open(w("jobs-mixed.txt"), "w") as f:
    f.write(f"cond={w('cond.h5')} out={w('m0.h5')} lora={A}:0.5\n")
    f.write(f"cond={w('cond.h5')} out={w('m1.h5')} lora={w('diff.safetensors')}\n")
    f.write(f"cond={w('cond.h5')} out={w('m2.h5')} lora={A}:nan\n")
    f.write(f"cond={w('cond.h5')} out={w('m3.h5')} lora=none\n")
p = sh(base + ["--jobs", w("jobs-mixed.txt")], expect=None)
errs = [ln for ln in p.stderr.splitlines() if "error" in ln]
print(f"jobs with refused LoRAs: exit {p.returncode}; errors: {len(errs)}")
for e_ in errs:
    print("   ", e_)
check(p.returncode != 0 and os.path.exists(w("m0.h5")) and os.path.exists(w("m3.h5")) and
      not os.path.exists(w("m1.h5")) and not os.path.exists(w("m2.h5")),
      f"a line with refused LoRAs does not fail alone (exit {p.returncode})")
check(any("jobs-mixed.txt:2" in e_ for e_ in errs) and any("cannot be bypassed" in e_ for e_ in errs),
      "the line with a diff LoRA is not named")
check(any("jobs-mixed.txt:3" in e_ and "strength" in e_ for e_ in errs),
      "the line with a bad strength is not named")

print(f"{len(failures)} check(s) failed" if failures else "all checks passed")
sys.exit(1 if failures else 0)
