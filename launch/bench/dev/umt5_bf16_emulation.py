#!/usr/bin/env python3
"""CPU emulation of the CUDA text encoder's bf16 arithmetic (UMT5.md "On a
GPU"; ranks/nets/umt5/cuda/umt5_gpu.c): the relative L2 error it leaves
against the float64 reference encoder (tests/ref/umt5_ref.py), the bound
tests/gpu/test_t5_gpu.c holds the GPU to (1e-2) in the making.

    /usr/bin/python3 launch/bench/dev/umt5_bf16_emulation.py BIN [SEED...]

BIN is a staticpipe binary: `init --arch umt5-tiny --seed S --dtype fp32`
writes synth:umt5-tiny:S's weights to a temporary file, read back with
h5py. Per seed, random ids at 1, 23 and 200 tokens (numpy's default_rng
of the seed). What is emulated: weights rounded to bf16; the residual
stream fp32 from the fp32 embedding rows; each norm's output, q, k, v, the
attention output and gelu(gate) x fc1 rounded to bf16; the unnormalised
softmax probabilities rounded to bf16 for P v, the sum kept in full; the
GEMM outputs that feed the residual or the gated GELU kept in full (fp32
accumulation); the final norm's output in full. Measured with the
umt5-tiny preset of width 4096 on seeds 1-5, 11, 99: 4.8e-3 to 7.6e-3
(at width 64, feed-forward 160 and the published vocabulary: 4.3e-3 to
1.0e-2 with these ids)."""
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "tests", "ref"))
import umt5_ref  # noqa: E402


def bf16(a):
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def norm(x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w


def gelu(y):
    return 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y ** 3)))


def emulate(W, ids):
    n = len(ids)
    x = W["token_embedding.weight"][ids]                          # (n, dim) fp32
    rel = np.arange(n)[None, :] - np.arange(n)[:, None]
    for b in range(umt5_ref.layer_count(W)):
        p = "blocks.%d." % b
        table = bf16(W[p + "pos_embedding.embedding.weight"])      # (buckets, heads)
        H = table.shape[1]
        bias = table[umt5_ref.rel_bucket(rel, table.shape[0], umt5_ref.MAX_DIST)].transpose(2, 0, 1)
        h = bf16(norm(x, bf16(W[p + "norm1.weight"])))
        q, k, v = (bf16(h @ bf16(W[p + "attn.%s.weight" % t]).T) for t in "qkv")
        hd = q.shape[1] // H
        q, k, v = (t.reshape(n, H, hd).transpose(1, 0, 2) for t in (q, k, v))
        s = q @ k.transpose(0, 2, 1) + bias                         # no 1/sqrt(hd) (T5)
        e = np.exp(s - s.max(-1, keepdims=True))
        a = (bf16(e) @ v) / e.sum(-1, keepdims=True)
        x = x + bf16(a.transpose(1, 0, 2).reshape(n, H * hd)) @ bf16(W[p + "attn.o.weight"]).T
        h = bf16(norm(x, bf16(W[p + "norm2.weight"])))
        g, f = h @ bf16(W[p + "ffn.gate.0.weight"]).T, h @ bf16(W[p + "ffn.fc1.weight"]).T
        x = x + bf16(gelu(g) * f) @ bf16(W[p + "ffn.fc2.weight"]).T
    return norm(x, bf16(W["norm.weight"]))


def main():
    sp_bin, seeds = sys.argv[1], [int(s) for s in sys.argv[2:]] or [1, 2, 3, 4, 5, 11, 99]
    worst = 0.0
    with tempfile.TemporaryDirectory() as d:
        for s in seeds:
            path = os.path.join(d, "t5.h5")
            subprocess.run([sp_bin, "init", "--arch", "umt5-tiny", "--seed", str(s), "--dtype",
                            "fp32", "-q", "-o", path], check=True)
            with h5py.File(path, "r") as f:
                W = {k: f["encoder"][k][...].astype(np.float64) for k in f["encoder"]}
            os.remove(path)
            rng = np.random.default_rng(s)
            for L in (1, 23, 200):
                ids = rng.integers(0, W["token_embedding.weight"].shape[0], L)
                ref = umt5_ref.encode(W, list(ids), text_len=L)
                e = np.linalg.norm(emulate(W, ids) - ref) / np.linalg.norm(ref)
                worst = max(worst, e)
                print("synth:umt5-tiny:%d, %3d tokens: rel L2 %.2e" % (s, L, e))
    print("largest %.2e (the GPU test's bound: 1e-2)" % worst)


if __name__ == "__main__":
    main()
