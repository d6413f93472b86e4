"""LoRA merging against an independent numpy reference, and runs with LoRAs
and explicit schedules (MODEL.md "LoRA", "Sampler").

usage: lora_check.py STATICPIPE LORA_MERGE_DUMP WORKDIR [SEED]

1. Merged weights (lora_merge_dump, which reads groups as the stages do)
   of an fp32 model against the float64 reference: relative L2 <= 1e-6 per
   tensor, and the change itself within 1e-5; untouched tensors unchanged.
   A bf16 model: each merged value is the reference rounded to bf16, or
   one bf16 step from it (where the float64 sums, summed in another
   order, straddle a rounding boundary).
2. A run with the LoRAs on the CPU backend (fp32) against the same run on
   a model file made from the reference's merged weights (convert): latents
   within relative L2 1e-5 (bit-identical when the merged weights are).
3. Bad LoRAs and bad --lora/--lora-mode/--timesteps/--sigmas: exit 2, one
   error line saying what is wrong, no output written.
4. Explicit schedules: --sigmas with the default schedule's own values and
   --timesteps against the --sigmas they are shifted to give bit-identical
   latents; --cfg 1 runs one micro-batch per step."""
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import sptest  # noqa: E402
from sptest import FAILS as failures, require as check, run as sh  # noqa: E402
import loralib  # noqa: E402
import stlib  # noqa: E402

BIN, DUMP, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
SEED = sptest.seed("lora_check", sys.argv[4] if len(sys.argv) > 4 else None)
rng = np.random.default_rng(SEED)


def w(name):
    return os.path.join(WORK, name)


# ---- 1. merged weights ------------------------------------------------------

for dt in ("fp32", "bf16"):
    model = w(f"tiny-{dt}.h5")
    sh([BIN, "init", "--arch", "wan2.1-tiny", "--seed", str(SEED % 1000), "--dtype", dt, "-o", model])
c, _ = loralib.model_config(w("tiny-fp32.h5"))
loras = loralib.make_loras(rng, c)
strengths = [0.8, -0.5, 1.3, 1.0]
specs = []
for i, (lo, s) in enumerate(zip(loras, strengths)):
    lo.write(w(f"lora{i}.safetensors"))
    specs.append(f"{w(f'lora{i}.safetensors')}:{s!r}")

for dt in ("fp32", "bf16"):
    base = loralib.read_model(w(f"tiny-{dt}.h5"))
    sh([DUMP, w(f"tiny-{dt}.h5"), w(f"merged-{dt}.h5")] + specs)
    got = loralib.read_model(w(f"merged-{dt}.h5"))
    ref = loralib.reference_merge(base, loras, strengths)
    worst_w = worst_d = 0.0
    exact = total = off_one = 0
    for key, wt in base.items():
        g = got[key]
        if key not in ref:
            check(np.array_equal(g.view(np.uint32), wt.view(np.uint32)), f"{dt} {key}: changed")
            continue
        r64 = ref[key]
        if dt == "fp32":
            e = np.linalg.norm(g - r64) / np.linalg.norm(r64)
            d = np.linalg.norm((g - wt) - (r64 - wt)) / np.linalg.norm(r64 - wt)
            worst_w, worst_d = max(worst_w, e), max(worst_d, d)
            exact += int(np.sum(g == r64.astype(np.float32)))
        else:
            want = stlib.bf16_rne(r64.astype(np.float32).ravel()).astype(np.int32)
            have = (g.ravel().view(np.uint32) >> 16).astype(np.int32)
            exact += int(np.sum(want == have))
            off_one += int(np.sum(np.abs(want - have) == 1))
            check(np.all(np.abs(want - have) <= 1), f"bf16 {key}: more than one bf16 step from the reference")
        total += g.size
    if dt == "fp32":
        print(f"fp32 merge: {len(ref)} tensors changed, rel L2 of weights <= {worst_w:.3g}, "
              f"of the changes <= {worst_d:.3g}, {exact} of {total} values equal to the "
              "float64 reference rounded to float32")
        check(worst_w <= 1e-6, f"fp32 merged weights differ from the reference: {worst_w:.3g}")
        check(worst_d <= 1e-5, f"fp32 merged changes differ from the reference: {worst_d:.3g}")
        fp32_bit_identical = exact == total
    else:
        print(f"bf16 merge: {exact} of {total} values equal the reference rounded to bf16, "
              f"{off_one} one bf16 step away")
        check(exact >= 0.999 * total, f"bf16 merge: only {exact} of {total} values equal the reference")

# ---- 2. a run with the LoRAs against a model merged by the reference ---------

base = loralib.read_model(w("tiny-fp32.h5"))
ref = loralib.reference_merge(base, loras, strengths)
entries = []
for g, b, n, shape in stlib.table(c):
    v = ref.get((g, b, n), base[(g, b, n)]).astype(np.float32)
    entries.append((stlib.key("official", g, b, n), "F32", shape, v.astype("<f4").tobytes()))
stlib.write_st(w("refmerged.safetensors"), entries)
sh([BIN, "convert", w("refmerged.safetensors"), "--dtype", "fp32", "-o", w("refmerged.h5")])
with h5py.File(w("cond.h5"), "w") as f:
    f["context"] = rng.standard_normal((20, 4096)).astype(np.float32)
    f["context_null"] = rng.standard_normal((7, 4096)).astype(np.float32)
common = ["run", "--cond", w("cond.h5"), "--frames", "5", "--size", "32x48", "--seed", str(SEED),
          "--device", "cpu", "--no-preview", "-q"]
configs = {
    "distilled: 4-step euler, timesteps 1000,750,500,250, cfg 1":
        ["--sampler", "euler", "--timesteps", "1000,750,500,250", "--cfg", "1"],
    "unipc 3 steps, cfg 5": ["--sampler", "unipc", "--steps", "3", "--cfg", "5"],
}
lora_args = sum([["--lora", s] for s in specs], [])


def latents(path):
    """The latents and the file's attributes (strings decoded)."""
    with h5py.File(path, "r") as f:
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        return f["latents"][...], attrs


for name, extra in configs.items():
    tag = str(abs(hash(name)) % 10000)
    sh([BIN] + common + ["--model", w("tiny-fp32.h5"), "-o", w(f"a{tag}.h5")] + extra + lora_args)
    sh([BIN] + common + ["--model", w("refmerged.h5"), "-o", w(f"b{tag}.h5")] + extra)
    sh([BIN] + common + ["--model", w("tiny-fp32.h5"), "-o", w(f"c{tag}.h5")] + extra)
    a, attrs = latents(w(f"a{tag}.h5"))
    b, _ = latents(w(f"b{tag}.h5"))
    c0, _ = latents(w(f"c{tag}.h5"))
    e = float(np.linalg.norm(a - b) / np.linalg.norm(b))
    moved = float(np.linalg.norm(a - c0) / np.linalg.norm(c0))
    same = np.array_equal(a.view(np.uint32), b.view(np.uint32))
    print(f"run ({name}): with --lora vs the reference-merged model: rel L2 {e:.3g}"
          f"{' (bit-identical)' if same else ''}; the LoRAs move the latents by {moved:.3g}")
    check(np.all(np.isfinite(a)), f"{name}: non-finite latents")
    check(e <= 1e-5, f"{name}: run with --lora differs from the reference-merged model: {e:.3g}")
    check(moved > 1e-3, f"{name}: the LoRAs hardly change the latents ({moved:.3g})")
    if fp32_bit_identical:
        check(same, f"{name}: merged weights are bit-identical but the latents are not")
    check(attrs.get("lora0") == specs[0], f"{name}: lora0 attribute {attrs.get('lora0')}")
    if "--timesteps" in extra:
        check(attrs.get("timesteps") == "1000,750,500,250", f"{name}: timesteps attribute")
    check(attrs.get("lora_mode") == "merged", f"{name}: lora_mode attribute")

# ---- 3. bad input ---------------------------------------------------------------

D = c["dim"]


def bad_lora(path, entries_):
    stlib.write_st(path, entries_)
    return path


def f32(shape, v=None):
    x = rng.standard_normal(shape).astype(np.float32) * 0.1 if v is None else v
    return x.astype("<f4").tobytes()


q = "diffusion_model.blocks.0.self_attn.q"
ok_pair = [(q + ".lora_down.weight", "F32", (4, D), f32((4, D))),
           (q + ".lora_up.weight", "F32", (D, 4), f32((D, 4)))]
nan_a = rng.standard_normal((4, D)).astype(np.float32)
nan_a[2, 7] = np.nan
cases = [
    ("unmatched", ok_pair + [("diffusion_model.blocks.0.self_attn.k_img.lora_down.weight", "F32", (4, D), f32((4, D))),
                             ("diffusion_model.img_emb.proj.1.lora_up.weight", "F32", (D, 4), f32((D, 4)))],
     ["2 of 4 keys match no weight", "k_img"]),
    ("nothing matches", [("text_encoder.layer.0.lora_down.weight", "F32", (4, 8), f32((4, 8)))],
     ["1 of 1 keys match no weight", "another model, or not a LoRA"]),
    ("shape", [(q + ".lora_down.weight", "F32", (4, D), f32((4, D))),
               (q + ".lora_up.weight", "F32", (D + 3, 4), f32((D + 3, 4)))],
     ["do not fit blocks.0.self_attn.q.weight"]),
    ("rank", [(q + ".lora_down.weight", "F32", (4, D), f32((4, D))),
              (q + ".lora_up.weight", "F32", (D, 5), f32((D, 5)))],
     ["rank mismatch", "rank 4", "rank 5"]),
    ("partner", [(q + ".lora_down.weight", "F32", (4, D), f32((4, D)))], ["no up partner"]),
    ("nan", [(q + ".lora_down.weight", "F32", (4, D), nan_a.astype("<f4").tobytes()),
             (q + ".lora_up.weight", "F32", (D, 4), f32((D, 4)))], ["NaN", "lora_down"]),
    ("inf diff", [("diffusion_model.blocks.1.norm3.diff", "F32", (D,),
                   np.full(D, np.inf, np.float32).astype("<f4").tobytes())], ["infinite"]),
    ("1.3b on tiny", [(q + ".lora_down.weight", "F32", (2, 1536), f32((2, 1536))),
                      (q + ".lora_up.weight", "F32", (1536, 2), f32((1536, 2)))],
     ["made for another architecture", "1536", "wan2.1-1.3b", "wan2.1-tiny"]),
    ("block beyond", [("diffusion_model.blocks.9.self_attn.q.diff", "F32", (D, D), f32((D, D)))],
     ["names block 9", "4 blocks", "another"]),
    ("dtype", [("diffusion_model.blocks.1.norm3.diff", "I64", (D,), np.zeros(D, "<i8").tobytes())],
     ["dtype I64"]),
]
for name, ents, want in cases:
    path = bad_lora(w(f"bad-{name.replace(' ', '_')}.safetensors"), ents)
    out = w("bad-out.h5")
    p = subprocess.run([BIN] + common + ["--model", w("tiny-fp32.h5"), "-o", out, "--lora", path],
                       capture_output=True, text=True)
    errs = [ln for ln in p.stderr.splitlines() if "error" in ln]
    ok = p.returncode == 2 and not os.path.exists(out) and all(s in p.stderr for s in want)
    print(f"bad LoRA ({name}): exit {p.returncode}: {errs[0] if errs else p.stderr.strip()[:200]}")
    check(ok, f"bad LoRA ({name}): exit {p.returncode}, wanted 2 with {want}, no output")
    check(len(errs) >= 1 and all(s in errs[0] for s in want[:1]), f"bad LoRA ({name}): the first error line is not the cause")

with open(w("hostile.safetensors"), "wb") as f:
    f.write((10 ** 12).to_bytes(8, "little") + b"{")
good = specs[0]
flag_cases = [
    ("hostile file", ["--lora", w("hostile.safetensors")], ["hostile.safetensors"]),
    ("missing file", ["--lora", w("none.safetensors")], ["none.safetensors"]),
    ("expert tag", ["--lora", good + "@high"], ["one expert", "two-expert model"]),
    ("bypass with diffs", ["--lora", good, "--lora-mode", "bypass"],
     ["cannot be bypassed", "--lora-mode merged"]),
    ("lora mode", ["--lora-mode", "fused"], ["--lora-mode 'fused'"]),
    ("strength", ["--lora", w("lora0.safetensors") + ":nan"], ["strength"]),
    ("timesteps increasing", ["--timesteps", "250,500,750,1000"], ["--timesteps", "strictly decreasing"]),
    ("timesteps range", ["--timesteps", "1200,500"], ["--timesteps", "out of range"]),
    ("timesteps fraction", ["--timesteps", "999.5,500"], ["--timesteps", "out of range"]),
    ("timesteps syntax", ["--timesteps", "1000;500"], ["--timesteps", "comma-separated"]),
    ("sigmas range", ["--sigmas", "1.2,0.5"], ["--sigmas", "out of range"]),
    ("sigmas and timesteps", ["--sigmas", "0.9,0.5", "--timesteps", "900,500"], ["exclude each other"]),
    ("steps disagree", ["--steps", "8", "--timesteps", "1000,750,500,250"], ["--steps", "disagrees", "4 values"]),
]
for name, args, want in flag_cases:
    out = w("bad-out.h5")
    p = subprocess.run([BIN] + common + ["--model", w("tiny-fp32.h5"), "-o", out] + args,
                       capture_output=True, text=True)
    errs = [ln for ln in p.stderr.splitlines() if "error" in ln]
    print(f"bad flags ({name}): exit {p.returncode}: {errs[0] if errs else p.stderr.strip()[:200]}")
    check(p.returncode == 2 and not os.path.exists(out) and all(s in p.stderr for s in want),
          f"bad flags ({name}): exit {p.returncode}, wanted 2 with {want}")

# ---- 4. explicit schedules --------------------------------------------------------

T = 1000
smax = float(np.float32(0.999))
N, shift = 4, 5.0
u = np.linspace(smax, 0, N + 1)[:-1]
default_sigmas = [shift * x / (1 + (shift - 1) * x) for x in u]
base_args = common + ["--model", w("tiny-fp32.h5"), "--cfg", "5"]
for sampler in ("euler", "unipc"):
    sh([BIN] + base_args + ["--sampler", sampler, "--steps", str(N), "--shift", str(shift), "-o", w("s-default.h5")])
    sh([BIN] + base_args + ["--sampler", sampler, "--sigmas", ",".join(repr(float(s)) for s in default_sigmas) + ",0",
                            "-o", w("s-sigmas.h5")])
    a, _ = latents(w("s-default.h5"))
    b, attrs = latents(w("s-sigmas.h5"))
    check(np.array_equal(a.view(np.uint32), b.view(np.uint32)),
          f"{sampler}: --sigmas with the default schedule's values changes the latents")
    check("sigmas" in attrs, f"{sampler}: the output lacks the sigmas attribute")
    ts = [1000, 750, 500, 250]
    sig = [shift * (t / T) / (1 + (shift - 1) * (t / T)) for t in ts]
    sh([BIN] + base_args + ["--sampler", sampler, "--timesteps", ",".join(map(str, ts)), "--shift", str(shift),
                            "-o", w("s-ts.h5")])
    sh([BIN] + base_args + ["--sampler", sampler, "--sigmas", ",".join(repr(s) for s in sig), "-o", w("s-sg.h5")])
    a, _ = latents(w("s-ts.h5"))
    b, _ = latents(w("s-sg.h5"))
    check(np.array_equal(a.view(np.uint32), b.view(np.uint32)) and np.all(np.isfinite(a)),
          f"{sampler}: --timesteps and the --sigmas they shift to differ")
    print(f"{sampler}: --sigmas = default schedule and --timesteps = its shifted --sigmas: bit-identical")

# Per-job schedules in a --jobs file, with the command line's LoRAs: each
# job equals its own run; a line whose steps disagree with its list fails
# alone.
with open(w("jobs.txt"), "w") as f:
    f.write(f"cond={w('cond.h5')} out={w('j1.h5')} timesteps=1000,750,500,250 sampler=euler cfg=1\n")
    f.write(f"cond={w('cond.h5')} out={w('j2.h5')} sigmas=0.9,0.6,0.3,0 sampler=unipc\n")
    f.write(f"cond={w('cond.h5')} out={w('j3.h5')} steps=5 timesteps=1000,500\n")
    f.write(f"cond={w('cond.h5')} out={w('j4.h5')} steps=3\n")
jobs_common = [a for a in common if a not in ("--cond", w("cond.h5"))]
p = subprocess.run([BIN] + jobs_common + ["--model", w("tiny-fp32.h5"), "--jobs", w("jobs.txt")] + lora_args,
                   capture_output=True, text=True)
check(p.returncode == 2 and "jobs.txt:3: steps=5 disagrees with the 2 values of timesteps" in p.stderr
      and not os.path.exists(w("j3.h5")), f"--jobs: line 3 not refused alone: exit {p.returncode}")
for jn, extra in (("j1", ["--timesteps", "1000,750,500,250", "--sampler", "euler", "--cfg", "1"]),
                  ("j2", ["--sigmas", "0.9,0.6,0.3", "--sampler", "unipc"]), ("j4", ["--steps", "3"])):
    sh([BIN] + common + ["--model", w("tiny-fp32.h5"), "-o", w(f"{jn}-alone.h5")] + extra + lora_args)
    a, _ = latents(w(f"{jn}.h5"))
    b, _ = latents(w(f"{jn}-alone.h5"))
    check(np.array_equal(a.view(np.uint32), b.view(np.uint32)), f"--jobs: {jn} differs from its own run")
print("--jobs: per-job timesteps/sigmas equal their own runs; a line with disagreeing steps fails alone")

# --cfg 1: the conditional branch alone (no context_null needed), one
# micro-batch per step in the plan.
with h5py.File(w("cond1.h5"), "w") as f:
    f["context"] = rng.standard_normal((20, 4096)).astype(np.float32)
p = subprocess.run([BIN, "run", "--cond", w("cond1.h5"), "--frames", "5", "--size", "32x48", "--device", "cpu",
                    "--no-preview", "--model", w("tiny-fp32.h5"), "--cfg", "1", "--timesteps",
                    "1000,750,500,250", "--sampler", "euler", "-o", w("cfg1.h5")] + lora_args,
                   capture_output=True, text=True)
check(p.returncode == 0 and "1 micro-batch per step" in p.stderr,
      f"--cfg 1 does not run one micro-batch per step: {p.stderr[-500:]}")

if failures:
    raise SystemExit(f"{len(failures)} check(s) failed")
print("lora_check: all checks passed")
