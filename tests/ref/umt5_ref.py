#!/usr/bin/env python3
"""An independent float64 numpy reference of Wan's UMT5 text encoder.

Written from the published code (Wan-Video/Wan2.1 wan/modules/t5.py:
T5Encoder with shared_pos=False as umt5_xxl builds it, T5SelfAttention,
T5Attention, T5FeedForward, T5LayerNorm, T5RelativeEmbedding, GELU) and
ranks/nets/umt5/UMT5.md, not from the C code. It computes what the published
T5EncoderModel.__call__ does: the ids padded to text_len with a mask, the
whole padded sequence through the encoder, then the rows of the real tokens.

    weights: dict of Wan's keys (token_embedding.weight, blocks.N.*,
             norm.weight) -> arrays (any float dtype; used as float64)
    encode(weights, ids, text_len=512) -> float64 (len(ids), dim)
"""
import math

import numpy as np

EPS = 1e-6
MAX_DIST = 128


def rel_bucket(rel, num_buckets, max_dist=MAX_DIST):
    """T5RelativeEmbedding._relative_position_bucket, bidirectional, with its
    arithmetic in float32 as the published code does it (rel_pos.float())."""
    rel = np.asarray(rel, np.int64)
    nb = num_buckets // 2
    out = (rel > 0).astype(np.int64) * nb
    rel = np.abs(rel)
    max_exact = nb // 2
    # Distances below max_exact take the other branch of the where below.
    f = np.log(np.maximum(rel, 1).astype(np.float32) / np.float32(max_exact))
    large = max_exact + (f / np.float32(math.log(max_dist / max_exact))
                         * np.float32(nb - max_exact)).astype(np.int64)
    large = np.minimum(large, nb - 1)
    return out + np.where(rel < max_exact, rel, large)


def norm(x, w):
    """T5LayerNorm: no mean, no bias."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * w


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def layer_count(weights):
    return 1 + max(int(k.split(".")[1]) for k in weights if k.startswith("blocks."))


def encode(weights, ids, text_len=512, max_dist=MAX_DIST):
    W = {k: np.asarray(v, np.float64) for k, v in weights.items()}
    n = len(ids)
    assert 1 <= n <= text_len
    L = text_len
    pad = np.zeros(L, np.int64)
    pad[:n] = ids
    mask = np.zeros(L, bool)
    mask[:n] = True
    x = W["token_embedding.weight"][pad]                                    # (L, D)
    pos = np.arange(L)
    rel = pos[None, :] - pos[:, None]                                       # k - q
    for b in range(layer_count(W)):
        p = "blocks.%d." % b
        table = W[p + "pos_embedding.embedding.weight"]                     # (buckets, heads)
        heads = table.shape[1]
        bias = table[rel_bucket(rel, table.shape[0], max_dist)].transpose(2, 0, 1)  # (H, L, L)
        bias = np.where(mask[None, None, :], bias, np.finfo(np.float64).min)
        h = norm(x, W[p + "norm1.weight"])
        q, k, v = (h @ W[p + "attn.%s.weight" % t].T for t in "qkv")        # (L, A)
        hd = q.shape[1] // heads
        q, k, v = (t.reshape(L, heads, hd).transpose(1, 0, 2) for t in (q, k, v))
        s = q @ k.transpose(0, 2, 1) + bias                                 # no 1/sqrt(hd)
        s = s - s.max(axis=-1, keepdims=True)
        e = np.exp(s)
        a = (e / e.sum(axis=-1, keepdims=True)) @ v                         # (H, L, hd)
        x = x + a.transpose(1, 0, 2).reshape(L, heads * hd) @ W[p + "attn.o.weight"].T
        h = norm(x, W[p + "norm2.weight"])
        g = gelu_tanh(h @ W[p + "ffn.gate.0.weight"].T)
        x = x + ((h @ W[p + "ffn.fc1.weight"].T) * g) @ W[p + "ffn.fc2.weight"].T
    x = norm(x, W["norm.weight"])
    return x[:n]


def selftest():
    """The bucket table against values worked out by hand from the formula
    (16 buckets per sign, 8 exact, log-spaced to 128), and the padding's
    irrelevance for the real tokens' rows (a shorter text_len gives the
    same rows)."""
    want = {0: 0, 1: 17, -1: 1, 7: 23, -7: 7, 8: 24, 11: 24, 12: 25, 15: 25, 16: 26, 22: 26,
            23: 27, 31: 27, 32: 28, 45: 28, 46: 29, 63: 29, 64: 30, 90: 30, 91: 31, 127: 31,
            128: 31, 511: 31, -8: 8, -16: 10, -64: 14, -91: 15, -511: 15}
    got = {r: int(rel_bucket(r, 32)) for r in want}
    assert got == want, (got, want)
    rng = np.random.default_rng(5)
    D, A, F, H, V = 16, 16, 24, 2, 50
    w = {"token_embedding.weight": rng.standard_normal((V, D)), "norm.weight": 1 + 0.1 * rng.standard_normal(D)}
    for b in range(2):
        p = "blocks.%d." % b
        w[p + "norm1.weight"] = 1 + 0.1 * rng.standard_normal(D)
        w[p + "norm2.weight"] = 1 + 0.1 * rng.standard_normal(D)
        for t in "qkv":
            w[p + "attn.%s.weight" % t] = rng.standard_normal((A, D)) / 4
        w[p + "attn.o.weight"] = rng.standard_normal((D, A)) / 4
        w[p + "ffn.gate.0.weight"] = rng.standard_normal((F, D)) / 4
        w[p + "ffn.fc1.weight"] = rng.standard_normal((F, D)) / 4
        w[p + "ffn.fc2.weight"] = rng.standard_normal((D, F)) / 5
        w[p + "pos_embedding.embedding.weight"] = rng.standard_normal((32, H))
    ids = rng.integers(0, V, 37)
    a, b = encode(w, ids, 512), encode(w, ids, 37)
    assert np.max(np.abs(a - b)) < 1e-12 * np.max(np.abs(a)), np.max(np.abs(a - b))
    print("umt5_ref selftest: buckets and padding ok")


if __name__ == "__main__":
    selftest()
