#!/usr/bin/env python3
"""Writes fa3_wgmma.cuh: the wgmma.mma_async wrappers the sm_90a attention
kernel uses (fa3_kernel.cuh). One wrapper per instruction shape, because an
inline-asm statement names every accumulator register as its own operand
and C++ cannot build that list from a template parameter.

    python3 kernels/cuda/sm90a/fa3_wgmma_gen.py > kernels/cuda/sm90a/fa3_wgmma.cuh

The instruction forms follow the PTX ISA, "Asynchronous Warpgroup Level
Matrix Multiply-Accumulate" (wgmma.mma_async):
  bf16 ss: d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b
  bf16 rs: d, {a0..a3}, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b
  s8 ss:   d, a-desc, b-desc, scale-d   (.s32 accumulators; 8-bit operands
           are always K-major, so there is no transpose)
  e4m3 rs: d, {a0..a3}, b-desc, scale-d, imm-scale-a, imm-scale-b   (.f32
           accumulators; K-major B, no transpose immediate)
scale-d is a predicate: 0 writes d = A B, 1 adds to d."""

import sys

# (kind, dtype, N, trans_b): the shapes fa3_kernel.cuh instantiates.
#   S = Q K^T : ss, N = keys per tile; K-major A and B (no transpose)
#   O += P V  : rs, N = head dim; V is MN-major in shared memory (trans-b 1);
#               e4m3 (fa3-fp8): V^T in shared memory, K-major, N = head dim,
#               or head dim + 8 (the row sums as 8 more columns, fa3_cfg::PVT)
SHAPES = [
    ("ss", "bf16", 64, 0), ("ss", "bf16", 128, 0), ("ss", "bf16", 176, 0),
    ("ss", "bf16", 192, 0),
    ("rs", "bf16", 64, 1), ("rs", "bf16", 128, 1),
    ("ss", "s8", 64, None), ("ss", "s8", 128, None), ("ss", "s8", 176, None),
    ("ss", "s8", 192, None),
    ("rs", "e4m3", 64, None), ("rs", "e4m3", 72, None), ("rs", "e4m3", 128, None),
    ("rs", "e4m3", 136, None),
]

K_OF = {"bf16": 16, "s8": 32, "e4m3": 32}
# accumulator: C type, inline-asm constraint, PTX type
ACC = {"bf16": ("float", "f", "f32"), "s8": ("int", "r", "s32"),
       "e4m3": ("float", "f", "f32")}


def rows(items, per_line):
    """items in lines of per_line, each line's items joined by ', '."""
    return [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]


def wrapper(kind, dtype, n, trans_b):
    """(function name, text) of one wrapper."""
    nd = n // 2  # fp32 accumulators per thread: 64 x n over 128 threads
    k = K_OF[dtype]
    if kind == "ss":
        a_ops, a_asm, nxt = ['"l"(da)'], "%%%d" % nd, nd + 1
        args = "uint64_t da"
    else:
        a_ops = ['"r"(a[%d])' % i for i in range(4)]
        a_asm = "{" + ", ".join("%%%d" % (nd + i) for i in range(4)) + "}"
        nxt = nd + 4
        args = "const uint32_t (&a)[4]"
    b_asm, sc = "%%%d" % nxt, nxt + 1
    ctype, con, ptype = ACC[dtype]
    if dtype == "bf16":
        imm = ", 1, 1, 0, %d" % trans_b if kind == "ss" else ", 1, 1, %d" % trans_b
    elif dtype == "e4m3":
        imm = ", 1, 1"  # scale immediates only: 8-bit operands are K-major
    else:
        imm = ""  # integer wgmma has no scale or transpose immediates
    instr = "wgmma.mma_async.sync.aligned.m64n%dk%d.%s.%s.%s" % (n, k, ptype, dtype, dtype)
    name = "fa3_wgmma_%s_%s_n%d" % (kind, dtype, n)
    regs = rows(["%%%d" % i for i in range(nd)], 16)
    outs = rows(['"+%s"(d[%d])' % (con, i) for i in range(nd)], 6)
    lines = ["__device__ __forceinline__ void %s(%s (&d)[%d], %s," % (name, ctype, nd, args),
             "    uint64_t db, int scale_d) {",
             "  asm volatile(",
             '      "{\\n.reg .pred p;\\nsetp.ne.b32 p, %%%d, 0;\\n"' % sc,
             '      "%s {"' % instr]
    for i, r in enumerate(regs):
        lines.append('      "%s%s"' % (r, ", " if i + 1 < len(regs) else ""))
    lines.append('      "}, %s, %s, p%s;\\n}\\n"' % (a_asm, b_asm, imm))
    for i, r in enumerate(outs):
        lines.append("      %s %s%s" % (":" if i == 0 else " ", r, "," if i + 1 < len(outs) else ""))
    lines.append("      : %s);" % ", ".join(a_ops + ['"l"(db)', '"r"(scale_d)']))
    lines += ["}", ""]
    return name, "\n".join(lines)


def main():
    out = [
        "/* wgmma.mma_async wrappers for the sm_90a attention kernel (fa3_kernel.cuh).",
        " * Written by fa3_wgmma_gen.py (which says why it is generated): edit the",
        " * script, not this file. d: this thread's 64 x N accumulator fragment (fp32; s32",
        " * for the s8 forms),",
        " * N / 2 registers (PTX ISA, wgmma D fragment: warp w of the warpgroup holds",
        " * rows 16w..16w+15; register 4i + 2h + e is row 16w + lane / 4 + 8h, column",
        " * 8i + 2 (lane % 4) + e). a (rs forms): the A fragment of a 64 x K tile in",
        " * the same row/column pattern, two elements per register (e4m3: four, in the",
        " * 8-bit A layout, kern_attn_backend.h KERN_ATTN_FP8_P_SRC). da, db: shared",
        " * memory matrix descriptors (fa3_ptx.cuh, fa3_desc). scale_d 0: d = A B;",
        " * otherwise d += A B. Each call only issues: fence before and commit / wait",
        " * after are the caller's (fa3_ptx.cuh). */",
        "#ifndef KERN_FA3_WGMMA_CUH",
        "#define KERN_FA3_WGMMA_CUH",
        "",
        "#include <stdint.h>",
        "",
    ]
    for kind, dtype, n, tb in SHAPES:
        _, text = wrapper(kind, dtype, n, tb)
        out.append(text)
    # dispatch templates: the kernel names a shape by its parameters
    out += [
        "/* Dispatch by shape: fa3_mma_ss<dtype tag, N>::run, fa3_mma_rs<dtype tag, N>::run. */",
        "struct fa3_bf16_tag {};",
        "struct fa3_s8_tag {};",
        "struct fa3_e4m3_tag {};",
        "template <class T, int N> struct fa3_mma_ss;",
        "template <class T, int N> struct fa3_mma_rs;",
    ]
    for kind, dtype, n, tb in SHAPES:
        name, _ = wrapper(kind, dtype, n, tb)
        a = "uint64_t da" if kind == "ss" else "const uint32_t (&a)[4]"
        av = "da" if kind == "ss" else "a"
        out += [
            "template <> struct fa3_mma_%s<fa3_%s_tag, %d> {" % (kind, dtype, n),
            "  static __device__ __forceinline__ void run(%s (&d)[%d], %s, uint64_t db,"
            % (ACC[dtype][0], n // 2, a),
            "                                             int scale_d) {",
            "    %s(d, %s, db, scale_d);" % (name, av),
            "  }",
            "};",
        ]
    out += ["", "#endif", ""]
    sys.stdout.write("\n".join(out))


if __name__ == "__main__":
    main()
