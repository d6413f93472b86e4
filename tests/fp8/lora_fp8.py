"""LoRAs with fp8 weights on the CPU backend (MODEL.md "fp8 weights",
LoRAs), against model files built here with numpy: the merge of loralib
(float64) and the e4m3 quantiser of fp8ref.py. The LoRA's values are
multiples of 1/64 and its scale is 1, so every float64 sum of the merge is
exact and the reference's merged weights are bit-exact whatever the order.

  1. A bf16 file with --precision fp8 and a merged LoRA = the fp8 file whose
     linear weights are fp8ref's quantisation of (bf16(w + delta)), bit
     for bit (latents).
  2. An fp8 file with a merged LoRA = the fp8 file holding fp8ref's
     quantisation of float32(dequantise(q) + delta), bit for bit.
  3. 1 and 2 against each other: bit-identical exactly when their
     reference weights are (requantising a dequantised weight plus delta
     is not quantise(w + delta) in general); which one held is printed.
  4. Bypass against merged in fp8 (same model, same LoRA): latents'
     relative L2 within BYPASS_BOUND, printed.
  5. 2 and 3 pipeline ranks: bit-identical to one process, merged and
     bypass.
  6. Two experts (wan2.2-tiny fp8 file) with a LoRA @high: merged and
     bypass within BYPASS_BOUND, the LoRA moves the latents, 2 ranks
     bit-identical to one.
usage: lora_fp8.py STATICPIPE WORKDIR"""
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import sptest  # noqa: E402
from sptest import FAILS as failures, check, run as sh  # noqa: E402
import fp8ref  # noqa: E402
import loralib  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
SEED = sptest.seed("fp8 + LoRA")
rng = np.random.default_rng(SEED)
# Bypass applies the pair in fp32 to the quantised input, merged quantises
# W + BA: they differ by the quantisation of the merged weight only.
BYPASS_BOUND = 0.05


def w(name):
    return os.path.join(WORK, name)


def write_fp8(template, path, c, weights):
    """A copy of fp8 file template whose linear weights are fp8ref's
    quantisation of weights {(block, name): float32 (out, in)}."""
    loralib.write_scaled(template, path, c, weights, fp8ref.quantise_rows)


def same(a, b):  # of two files' latents
    return sptest.same(sptest.read(a), sptest.read(b))


def rel(a, b):  # of two files' latents
    return sptest.rel_l2(sptest.read(a), sptest.read(b))


s = str(SEED % 100000)
sh([BIN, "init", "--arch", "wan2.1-tiny", "--seed", s, "-q", "-o", w("b.h5")])
sh([BIN, "init", "--arch", "wan2.1-tiny", "--seed", s, "--dtype", "fp8", "-q", "-o", w("f.h5")])
c, _ = loralib.model_config(w("b.h5"))
lora = loralib.exact_lora(rng, c)
lora.write(w("l.safetensors"))
with h5py.File(w("c.h5"), "w") as f:
    f["context"] = rng.standard_normal((int(rng.integers(1, 40)), 4096)).astype(np.float32)
    f["context_null"] = rng.standard_normal((int(rng.integers(1, 40)), 4096)).astype(np.float32)
RUN = ["run", "--cond", w("c.h5"), "--frames", "5", "--size", "32x48", "--steps", "3",
       "--cfg", "4", "--seed", s, "--device", "cpu", "-q", "--no-preview"]
L = ["--lora", w("l.safetensors")]

# 1. bf16 file, --precision fp8, merged.
delta = loralib.exact_deltas(lora)
ref1 = loralib.bf16_merged(loralib.read_model(w("b.h5")), delta)
write_fp8(w("f.h5"), w("ref1.h5"), c, ref1)
sh([BIN] + RUN + ["--model", w("b.h5"), "--precision", "fp8", "--lora-mode", "merged", "-o",
                  w("m1.h5")] + L)
sh([BIN] + RUN + ["--model", w("ref1.h5"), "-o", w("r1.h5")])
check(same(w("m1.h5"), w("r1.h5")),
      "bf16 file --precision fp8 + merged LoRA = fp8 file of quantise(bf16(w + BA)), bit for bit")

# 2. fp8 file, merged.
q8 = loralib.scaled_linears(w("f.h5"), c)
ref2 = {k: (fp8ref.decode_rows(*q8[k]).astype(np.float64) + d).astype(np.float32)
        for k, d in delta.items()}
write_fp8(w("f.h5"), w("ref2.h5"), c, ref2)
sh([BIN] + RUN + ["--model", w("f.h5"), "--lora-mode", "merged", "-o", w("m2.h5")] + L)
sh([BIN] + RUN + ["--model", w("ref2.h5"), "-o", w("r2.h5")])
check(same(w("m2.h5"), w("r2.h5")),
      "fp8 file + merged LoRA = fp8 file of quantise(dequantise(q) + BA), bit for bit")
sh([BIN] + RUN + ["--model", w("f.h5"), "-o", w("n2.h5")])
check(not same(w("m2.h5"), w("n2.h5")), f"the LoRA moves the fp8 latents by {rel(w('m2.h5'), w('n2.h5')):.3g}")

# 3. the fp8 file against the bf16 file with --precision fp8, both merged.
nq = sum(int(np.sum(fp8ref.quantise_rows(ref1[k])[0] != fp8ref.quantise_rows(ref2[k])[0]))
         for k in delta)
ident = all(fp8ref.quantise_rows(ref1[k])[0].tobytes() == fp8ref.quantise_rows(ref2[k])[0].tobytes()
            and np.array_equal(fp8ref.quantise_rows(ref1[k])[1], fp8ref.quantise_rows(ref2[k])[1])
            for k in delta)
check(same(w("m1.h5"), w("m2.h5")) == ident,
      f"fp8 file + LoRA vs bf16 file --precision fp8 + LoRA: {nq} e4m3 codes differ in the "
      f"references, latents {'bit-identical' if ident else 'differ'} by {rel(w('m2.h5'), w('m1.h5')):.3g}"
      " as the references say")

# 4. bypass against merged in fp8.
sh([BIN] + RUN + ["--model", w("f.h5"), "--lora-mode", "bypass", "-o", w("y2.h5")] + L)
e = rel(w("y2.h5"), w("m2.h5"))
check(e <= BYPASS_BOUND, f"fp8 bypass vs merged: latents' relative L2 {e:.3g} (bound {BYPASS_BOUND})")

# 5. ranks.
for n in (2, 3):
    for mode, ref in (("merged", "m2.h5"), ("bypass", "y2.h5")):
        sh([BIN] + RUN + ["--model", w("f.h5"), "--lora-mode", mode, "-o", w(f"p{n}{mode}.h5")] + L,
           ranks=n)
        check(same(w(f"p{n}{mode}.h5"), w(ref)), f"{n} ranks, {mode}: bit-identical to one process")

# 6. two experts, @high.
sh([BIN, "init", "--arch", "wan2.2-tiny", "--seed", s, "--dtype", "fp8", "-q", "-o", w("f22.h5")])
H = ["--lora", w("l.safetensors") + "@high"]
R22 = RUN[:RUN.index("--steps")] + ["--steps", "4"] + RUN[RUN.index("--steps") + 2:]
sh([BIN] + R22 + ["--model", w("f22.h5"), "-o", w("e0.h5")])
sh([BIN] + R22 + ["--model", w("f22.h5"), "--lora-mode", "merged", "-o", w("em.h5")] + H)
sh([BIN] + R22 + ["--model", w("f22.h5"), "--lora-mode", "bypass", "-o", w("eb.h5")] + H)
sh([BIN] + R22 + ["--model", w("f22.h5"), "--lora-mode", "merged", "-o", w("em2.h5")] + H, ranks=2)
check(not same(w("em.h5"), w("e0.h5")),
      f"two experts, @high merged in fp8: the LoRA moves the latents by {rel(w('em.h5'), w('e0.h5')):.3g}")
e = rel(w("eb.h5"), w("em.h5"))
check(e <= BYPASS_BOUND, f"two experts, @high: bypass vs merged relative L2 {e:.3g} (bound {BYPASS_BOUND})")
check(same(w("em2.h5"), w("em.h5")), "two experts, @high merged: 2 ranks bit-identical to one")
sys.exit(1 if failures else 0)
