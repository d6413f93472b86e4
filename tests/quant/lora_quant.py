"""LoRAs on quantized weights on the CPU backend (MODEL.md "LoRA", "int8
weights", "GGUF weights"), against model files built here with numpy (the
merge in float64 of loralib's exact pairs, the int8 rule written out in
cpu_runs.py's int8_rows):

  1. An int8 file with a merged LoRA = the int8 file holding the int8 rule's
     quantisation of float32(dequantise(q) + delta), bit for bit (latents).
  2. A bf16 file with --precision int8 and a merged LoRA = the int8 file of
     the int8 rule's quantisation of bf16(w + delta), bit for bit.
  3. int8 bypass (the pairs on the quantised input) within 5e-2 of merged.
  4. A GGUF-converted file: --lora-mode merged refused with one line that
     names bypass; auto runs it bypassed; bypass on the quant-fp32 file =
     bypass on the fp32 file of gguf-py's dequantised weights, bit for bit;
     2 ranks bit-identical to one.
  5. An fp8 file run in bf16 (its weights dequantised): merged refused,
     auto bypassed.

    lora_quant.py STATICPIPE_BIN WORK_DIR"""
import os
import sys

import numpy as np

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import sptest  # noqa: E402
from sptest import check, finish, run  # noqa: E402
import gguflib  # noqa: E402
import loralib  # noqa: E402
sys.path.insert(0, HERE)
from quantref import int8_rows  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
SEED = sptest.seed("quantized weights + LoRA")
rng = np.random.default_rng(SEED)
BYPASS_BOUND = 0.05


def w(name):
    return os.path.join(WORK, name)


def same(a, b):
    return sptest.same(sptest.read(a), sptest.read(b))


def rel(a, b):
    return sptest.rel_l2(sptest.read(a), sptest.read(b))


def write_int8(template, path, c, weights):
    loralib.write_scaled(template, path, c, weights,
                         lambda x: (lambda q, s: (q.view(np.uint8), s))(*int8_rows(x)))


def int8_linears(path, c):
    """{(block, name): float32 (out, in)} of an int8 file's linear weights,
    dequantised (codes times their row's scale)."""
    return {k: (q.view(np.int8).astype(np.float32) * s[:, None]).astype(np.float32)
            for k, (q, s) in loralib.scaled_linears(path, c).items()}


def main():
    os.makedirs(WORK, exist_ok=True)
    s = str(SEED % 100000)
    run([BIN, "init", "--arch", "wan2.1-tiny", "--seed", s, "-q", "-o", w("b.h5")])
    run([BIN, "init", "--arch", "wan2.1-tiny", "--seed", s, "--dtype", "int8", "-q", "-o", w("i.h5")])
    run([BIN, "init", "--arch", "wan2.1-tiny", "--seed", s, "--dtype", "fp8", "-q", "-o", w("f.h5")])
    c, _ = loralib.model_config(w("b.h5"))
    lora = loralib.exact_lora(rng, c)
    lora.write(w("l.safetensors"))
    import h5py
    with h5py.File(w("c.h5"), "w") as f:
        f["context"] = rng.standard_normal((int(rng.integers(1, 40)), 4096)).astype(np.float32)
        f["context_null"] = rng.standard_normal((int(rng.integers(1, 40)), 4096)).astype(np.float32)
    LOUD = [BIN, "run", "--cond", w("c.h5"), "--frames", "5", "--size", "32x48", "--steps", "3",
            "--cfg", "4", "--seed", s, "--device", "cpu", "--no-preview"]
    RUN = LOUD + ["-q"]
    L = ["--lora", w("l.safetensors")]
    delta = loralib.exact_deltas(lora)
    # 1. the int8 file, merged
    deq = int8_linears(w("i.h5"), c)
    write_int8(w("i.h5"), w("ref1.h5"), c,
               {k: (deq[k].astype(np.float64) + d).astype(np.float32) for k, d in delta.items()})
    run(RUN + ["--model", w("i.h5"), "--lora-mode", "merged", "-o", w("m1.h5")] + L)
    run(RUN + ["--model", w("ref1.h5"), "-o", w("r1.h5")])
    check(same(w("m1.h5"), w("r1.h5")),
          "int8 file + merged LoRA = int8 file of int8(dequantise(q) + BA), bit for bit")
    # 2. the bf16 file in int8, merged
    ref2 = loralib.bf16_merged(loralib.read_model(w("b.h5")), delta)
    write_int8(w("i.h5"), w("ref2.h5"), c, ref2)
    run(RUN + ["--model", w("b.h5"), "--precision", "int8", "--lora-mode", "merged", "-o",
               w("m2.h5")] + L)
    run(RUN + ["--model", w("ref2.h5"), "-o", w("r2.h5")])
    check(same(w("m2.h5"), w("r2.h5")),
          "bf16 file --precision int8 + merged LoRA = int8 file of int8(bf16(w + BA)), bit for bit")
    # 3. int8 bypass against merged
    run(RUN + ["--model", w("i.h5"), "--lora-mode", "bypass", "-o", w("y1.h5")] + L)
    e = rel(w("y1.h5"), w("m1.h5"))
    check(e <= BYPASS_BOUND, f"int8 bypass vs merged: relative L2 {e:.3g} (bound {BYPASS_BOUND})")
    # 4. a GGUF-converted file
    m = gguflib.Model(rng, gguflib.BLOCK_TYPES, dict(gguflib.CFG, layers=4, text_dim=4096))
    gguflib.write_gguf(w("g.gguf"), m)
    run([BIN, "convert", w("g.gguf"), "-o", w("g.h5"), "--dtype", "fp32", "-q"])
    gguflib.write_twin(BIN, m, w("gt.h5"))
    gc, _ = loralib.model_config(w("g.h5"))
    glora = loralib.exact_lora(rng, gc)
    glora.write(w("gl.safetensors"))
    GL = ["--lora", w("gl.safetensors")]
    r = run(RUN + ["--model", w("g.h5"), "--lora-mode", "merged", "-o", w("no.h5")] + GL,
            expect=2)
    check("--lora-mode bypass" in r.stderr and not os.path.exists(w("no.h5")),
          "GGUF-converted file: --lora-mode merged refused, naming bypass")
    r = run(LOUD + ["--model", w("g.h5"), "-o", w("ga.h5")] + GL)
    check("lora (bypass)" in r.stderr, "GGUF-converted file: auto takes bypass")
    run(RUN + ["--model", w("gt.h5"), "--lora-mode", "bypass", "-o", w("gtb.h5")] + GL)
    check(same(w("ga.h5"), w("gtb.h5")), "GGUF-converted file bypassed = its fp32 twin bypassed, "
          "bit for bit")
    run(RUN + ["--model", w("g.h5"), "--lora-mode", "bypass", "-o", w("g2.h5")] + GL, ranks=2)
    check(same(w("g2.h5"), w("ga.h5")), "GGUF-converted file bypassed: 2 ranks bit-identical")
    # 5. an fp8 file run in bf16
    r = run(RUN + ["--model", w("f.h5"), "--precision", "bf16", "--lora-mode", "merged", "-o",
                   w("no.h5")] + L, expect=2)
    check("--lora-mode bypass" in r.stderr, "fp8 file in bf16: --lora-mode merged refused")
    r = run(LOUD + ["--model", w("f.h5"), "--precision", "bf16", "-o", w("fb.h5")] + L)
    check("lora (bypass)" in r.stderr, "fp8 file in bf16: auto takes bypass")
    return finish("quantized weights + LoRA")


if __name__ == "__main__":
    sys.exit(main())
