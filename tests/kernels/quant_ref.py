"""Inputs and gguf-py's dequantisation for tests/kernels/test_quant_gguf.sh.

For every ggml type staticpipe reads (kern_quant.h) this writes tensors of
odd row counts and 1, 2, 3 and 5 blocks per row: block bytes drawn at random
(every bit pattern of the codes and sub-scales), the f16 scale fields
replaced by random finite f16 values (exponent below 31), and, for the types
gguf-py can quantise, a tensor quantised from normal values too. The
reference is gguf.quants.dequantize (llama.cpp's gguf-py, numpy) for fp32,
and gguf-py's bf16 quantiser (ggml's fp32 -> bf16 rule, nearest even, NaN
kept quiet) applied to that for bf16. quant_check (tests/kernels/
quant_check.c) dequantises the same bytes and compares bit for bit.

    quant_ref.py OUT_DIR SEED

writes OUT_DIR/manifest (one line per case: name ggml_code block type_size
rows cols) and per case NAME.q (the bytes), NAME.f32, NAME.bf16."""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES

# The f16 fields of each block: (byte offset) pairs holding d / dmin / m.
F16_FIELDS = {
    T.Q8_0: (0,), T.Q4_0: (0,), T.Q4_1: (0, 2), T.Q5_0: (0,), T.Q5_1: (0, 2),
    T.Q2_K: (80, 82), T.Q3_K: (108,), T.Q4_K: (0, 2), T.Q5_K: (0, 2), T.Q6_K: (208,),
}
TYPES = [T.F32, T.F16, T.BF16, T.Q8_0, T.Q6_K, T.Q5_K, T.Q5_0, T.Q5_1, T.Q4_K, T.Q4_0,
         T.Q4_1, T.Q3_K, T.Q2_K]
QUANTISABLE = {T.F16, T.BF16, T.Q8_0, T.Q5_0, T.Q5_1, T.Q4_0, T.Q4_1}


def finite_f16(rng, n):
    """n random f16 bit patterns with an exponent below 31 (finite), both signs,
    subnormals included."""
    bits = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    exp = (bits >> 10) & 0x1F
    bits = np.where(exp == 31, bits & ~np.uint16(0x4000), bits)  # exponent 31 -> 15
    return bits.astype(np.uint16)


def random_blocks(rng, t, rows, cols):
    block, size = GGML_QUANT_SIZES[t]
    nb = rows * (cols // block)
    raw = rng.integers(0, 256, size=(nb, size), dtype=np.uint8)
    if t == T.F16:
        raw = finite_f16(rng, nb).view(np.uint8).reshape(nb, size)
    for off in F16_FIELDS.get(t, ()):
        raw[:, off:off + 2] = finite_f16(rng, nb).view(np.uint8).reshape(nb, 2)
    return raw.reshape(rows, -1)


def bf16_of(f32):
    return quants.quantize(f32, T.BF16).view(np.uint16)


def main():
    out, seed = sys.argv[1], int(sys.argv[2])
    rng = np.random.default_rng(seed)
    lines = []
    for t in TYPES:
        block, size = GGML_QUANT_SIZES[t]
        per_row = 8 if block == 1 else 0  # the element types: any width; 8 is the decoder's group
        cases = []
        for rows, nb in ((1, 1), (3, 2), (7, 3), (13, 5)):
            cols = nb * block if block > 1 else nb * per_row + 3  # element types: odd widths
            cases.append(("rand", rows, cols))
        if t in QUANTISABLE:
            cases.append(("quant", 5, 3 * max(block, 8)))
        for i, (kind, rows, cols) in enumerate(cases):
            if kind == "rand":
                q = random_blocks(rng, t, rows, cols)
            else:
                x = (rng.standard_normal((rows, cols)) * np.exp(rng.uniform(-6, 3, (rows, 1))))
                q = quants.quantize(x.astype(np.float32), t)
                q = q.view(np.uint8).reshape(rows, -1)
            q = np.ascontiguousarray(q)
            ref = quants.dequantize(q if block > 1 or t == T.BF16 else q.view(
                np.float32 if t == T.F32 else np.float16), t).reshape(rows, cols)
            ref = np.ascontiguousarray(ref.astype(np.float32))
            name = f"{t.name.lower()}_{kind}{i}"
            q.tofile(os.path.join(out, name + ".q"))
            ref.tofile(os.path.join(out, name + ".f32"))
            bf16_of(ref).tofile(os.path.join(out, name + ".bf16"))
            lines.append(f"{name} {int(t)} {block} {size} {rows} {cols}")
    with open(os.path.join(out, "manifest"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"quant_ref: {len(lines)} cases written to {out} (seed {seed})")


if __name__ == "__main__":
    main()
