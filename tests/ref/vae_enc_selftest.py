"""Self-tests of the VAE encoder references (wan_vae_enc_ref.py, Wan 2.1)
and of the Wan 2.2 VAE reference (wan_vae22_ref.py, encoder and decoder).

Each piece against a direct formula written differently (loops over the
index formulas of I2V.md), the chunked computations against the
whole-sequence ones, causality (a latent frame does not depend on later
video frames, a decoded frame not on later latent frames), the
normalisation against its formula, and the tensor tables of the published
configurations against shapes counted from the module structure. Fresh
random inputs every run; the seed is printed and SP_SEED replays it.
The comparison with the published PyTorch code is
tests/ref/i2v_published_parity.py (not in CI: it needs torch).
"""

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wan_vae22_ref as V  # noqa: E402
import wan_vae_enc_ref as E  # noqa: E402
import wan_vae_stats as S  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import check, finish, rel_l2, seed as take_seed  # noqa: E402


# ---------------------------------------------------------------- pieces

def test_strided_conv(rng):
    """y[o,t,i,j] = b[o] + sum w[o,c,a,d] X[c,t,2i+a,2j+d], X zero past the
    last row and column."""
    for H, W in ((5, 7), (4, 6), (2, 3), (9, 2)):
        ci, co, T = 3, 2, 2
        x = rng.standard_normal((ci, T, H, W))
        w = rng.standard_normal((co, ci, 3, 3))
        b = rng.standard_normal(co)
        y = E.strided_conv2d(x, w, b)

        def px(c, t, i, j):
            return x[c, t, i, j] if i < H and j < W else 0.0
        ref = np.zeros((co, T, H // 2, W // 2))
        for o in range(co):
            for t in range(T):
                for i in range(H // 2):
                    for j in range(W // 2):
                        ref[o, t, i, j] = b[o] + sum(w[o, c, a, d] * px(c, t, 2 * i + a, 2 * j + d)
                                                     for c in range(ci) for a in range(3)
                                                     for d in range(3))
        check(y.shape == ref.shape and rel_l2(y, ref) < 1e-13,
              "stride-2 conv after ZeroPad2d((0,1,0,1)), %dx%d -> %s: rel %.1e"
              % (H, W, y.shape[2:], rel_l2(y, ref) if y.shape == ref.shape else -1))


def test_time_conv(rng):
    x = rng.standard_normal((3, 7, 2, 2))
    w = rng.standard_normal((4, 3, 3, 1, 1))
    b = rng.standard_normal(4)
    y = E.time_conv_stride2(x, w, b)
    ref = np.zeros((4, 3, 2, 2))
    for j in range(3):
        for o in range(4):
            ref[o, j] = b[o] + sum(w[o, c, a, 0, 0] * x[c, 2 * j + a] for c in range(3)
                                   for a in range(3))
    check(rel_l2(y, ref) < 1e-14, "time conv (3,1,1) stride 2: 7 frames -> 3 read 2j..2j+2")


def test_patchify(rng):
    x = rng.standard_normal((3, 2, 6, 4))
    p = V.patchify(x)
    ok = p.shape == (12, 2, 3, 2)
    for c in range(3):
        for q in range(2):
            for r in range(2):
                ok = ok and np.array_equal(p[c * 4 + r * 2 + q], x[c, :, q::2, r::2])
    check(ok, "patchify: channel c*4 + r*2 + q holds x[c, t, 2h+q, 2w+r] (column offset first)")
    check(np.array_equal(V.unpatchify(p), x), "unpatchify inverts patchify")


def test_avg_down(rng):
    for c, out, ft, fs, T in ((4, 8, 2, 2, 3), (4, 8, 2, 2, 4), (6, 6, 1, 2, 2), (5, 5, 1, 1, 3),
                              (4, 2, 2, 1, 1)):
        x = rng.standard_normal((c, T, 4, 6))
        y = V.avg_down(x, out, ft, fs)
        pad = (ft - T % ft) % ft
        xp = np.concatenate([np.zeros((c, pad, 4, 6)), x], axis=1)
        g = c * ft * fs * fs // out
        ref = np.zeros(((out, (T + pad) // ft, 4 // fs, 6 // fs)))
        for o in range(out):
            for t in range(ref.shape[1]):
                for i in range(ref.shape[2]):
                    for j in range(ref.shape[3]):
                        vals = []
                        for k in range(o * g, (o + 1) * g):   # flat (c, a, q, r) index
                            ch, rest = divmod(k, ft * fs * fs)
                            a, rest = divmod(rest, fs * fs)
                            q, r = divmod(rest, fs)
                            vals.append(xp[ch, t * ft + a, i * fs + q, j * fs + r])
                        ref[o, t, i, j] = sum(vals) / g
        check(y.shape == ref.shape and rel_l2(y, ref) < 1e-14,
              "AvgDown3D %d->%d ft %d fs %d, T=%d (%d zero frame(s) in front)"
              % (c, out, ft, fs, T, pad))


def test_dup_up(rng):
    for c, out, ft, fs, first in ((8, 8, 2, 2, False), (8, 8, 2, 2, True), (8, 4, 1, 2, False),
                                  (6, 6, 1, 1, True)):
        x = rng.standard_normal((c, 2, 3, 2))
        y = V.dup_up(x, out, ft, fs, first)
        rep = out * ft * fs * fs // c
        full = np.zeros((out, 2 * ft, 3 * fs, 2 * fs))
        for o in range(out):
            for t in range(2 * ft):
                for i in range(3 * fs):
                    for j in range(2 * fs):
                        k = ((o * ft + t % ft) * fs + i % fs) * fs + j % fs
                        full[o, t, i, j] = x[k // rep, t // ft, i // fs, j // fs]
        ref = full[:, ft - 1:] if first else full
        check(np.array_equal(y, ref), "DupUp3D %d->%d ft %d fs %d first_chunk %s: copy of "
              "channel ((o ft + a) fs + q) fs + r over %d" % (c, out, ft, fs, first, rep))


def test_stats():
    for fam, n in (("wan2.1", 16), ("wan2.2", 48)):
        mean, std = S.stats(fam)
        m32, inv32 = S.scale_f32(fam)
        ok = len(mean) == len(std) == n and all(s > 0 for s in std)
        ok = ok and np.all(m32 == np.float32(mean)) and np.all(
            inv32 == (np.float32(1) / np.float32(std)).astype(np.float64))
        check(ok, "%s statistics: %d means and stds; float32 mean and 1/std" % (fam, n))
    m, s = S.stats("wan2.1")
    check(m[0] == -0.7571 and s[-1] == 1.9160, "wan2.1: mean[0] -0.7571, std[15] 1.9160")
    m, s = S.stats("wan2.2")
    check(m[0] == -0.2289 and m[47] == -0.0667 and s[0] == 0.4765 and s[47] == 0.7744,
          "wan2.2: mean[0] -0.2289, mean[47] -0.0667, std[0] 0.4765, std[47] 0.7744")


# ---------------------------------------------------------------- tables

def n_params(shapes):
    return sum(int(np.prod(v)) for v in shapes.values())


def test_tables():
    s = E.tensor_shapes(E.published_config())
    expect = {"encoder.conv1.weight": (96, 3, 3, 3, 3),
              "encoder.downsamples.2.resample.1.weight": (96, 96, 3, 3),
              "encoder.downsamples.3.shortcut.weight": (192, 96, 1, 1, 1),
              "encoder.downsamples.5.time_conv.weight": (192, 192, 3, 1, 1),
              "encoder.downsamples.8.time_conv.bias": (384,),
              "encoder.downsamples.10.residual.6.weight": (384, 384, 3, 3, 3),
              "encoder.middle.1.to_qkv.weight": (1152, 384, 1, 1),
              "encoder.head.2.weight": (32, 384, 3, 3, 3),
              "conv1.weight": (32, 32, 1, 1, 1)}
    bad = [k for k, v in expect.items() if s.get(k) != v]
    absent = [k for k in ("encoder.downsamples.2.time_conv.weight",
                          "encoder.downsamples.11.residual.0.gamma",
                          "encoder.downsamples.0.shortcut.weight") if k in s]
    # conv1 + 10 downsample modules (8 residual, 2 with a shortcut; 3
    # resamples, 2 with a time conv) + middle + head + the 1x1 conv1:
    n = 2 + (8 * 6 + 2 * 2 + 3 * 2 + 2 * 2) + (6 + 5 + 6) + 3 + 2
    check(not bad and not absent and len(s) == n == 86,
          "Wan 2.1 encoder table: %d tensors (want %d), sample shapes (wrong %s, extra %s)"
          % (len(s), n, bad, absent))
    print("      published Wan 2.1 encoder + conv1: %d tensors, %d parameters" % (len(s), n_params(s)))
    pc = V.published_config()
    se, sd = V.tensor_shapes(pc, "encoder"), V.tensor_shapes(pc, "decoder")
    expect = {"encoder.conv1.weight": (160, 12, 3, 3, 3),
              "encoder.downsamples.0.downsamples.2.resample.1.weight": (160, 160, 3, 3),
              "encoder.downsamples.1.downsamples.0.shortcut.weight": (320, 160, 1, 1, 1),
              "encoder.downsamples.1.downsamples.2.time_conv.weight": (320, 320, 3, 1, 1),
              "encoder.downsamples.3.downsamples.1.residual.6.weight": (640, 640, 3, 3, 3),
              "encoder.head.2.weight": (96, 640, 3, 3, 3),
              "conv1.weight": (96, 96, 1, 1, 1)}
    bad = [k for k, v in expect.items() if se.get(k) != v]
    absent = [k for k in ("encoder.downsamples.3.downsamples.2.resample.1.weight",
                          "encoder.downsamples.0.downsamples.2.time_conv.weight") if k in se]
    check(not bad and not absent, "Wan 2.2 encoder table: sample shapes (wrong %s, extra %s)"
          % (bad, absent))
    expect = {"conv2.weight": (48, 48, 1, 1, 1),
              "decoder.conv1.weight": (1024, 48, 3, 3, 3),
              "decoder.middle.1.to_qkv.weight": (3072, 1024, 1, 1),
              "decoder.upsamples.0.upsamples.3.time_conv.weight": (2048, 1024, 3, 1, 1),
              "decoder.upsamples.0.upsamples.3.resample.1.weight": (1024, 1024, 3, 3),
              "decoder.upsamples.2.upsamples.0.shortcut.weight": (512, 1024, 1, 1, 1),
              "decoder.upsamples.2.upsamples.3.resample.1.weight": (512, 512, 3, 3),
              "decoder.upsamples.3.upsamples.2.residual.6.weight": (256, 256, 3, 3, 3),
              "decoder.head.2.weight": (12, 256, 3, 3, 3)}
    bad = [k for k, v in expect.items() if sd.get(k) != v]
    absent = [k for k in ("decoder.upsamples.2.upsamples.3.time_conv.weight",
                          "decoder.upsamples.3.upsamples.3.resample.1.weight") if k in sd]
    check(not bad and not absent, "Wan 2.2 decoder table: sample shapes (wrong %s, extra %s)"
          % (bad, absent))
    print("      published Wan 2.2 encoder + conv1: %d tensors, %d parameters; decoder + conv2: "
          "%d tensors, %d parameters" % (len(se), n_params(se), len(sd), n_params(sd)))


# ---------------------------------------------------------------- Wan 2.1 encoder

def small21(n_res=2):
    return E.Config(4, 16, (1, 2, 4, 4), n_res, (False, True, True))


def test_encoder21(rng):
    cfg = small21()
    sd = E.random_weights(cfg, rng)
    for T, H, W in ((1, 25, 19), (5, 17, 26), (9, 23, 10), (13, 16, 8)):
        v = rng.uniform(-1, 1, (3, T, H, W))
        t0 = time.time()
        a = E.encode(cfg, sd, v)
        b = E.encode_whole(cfg, sd, v)
        check(a.shape == E.latent_shape(cfg, T, H, W) == (16, 1 + (T - 1) // 4, H // 8, W // 8),
              "Wan 2.1 encode T=%d %dx%d -> %s" % (T, H, W, a.shape))
        check(rel_l2(a, b) < 1e-12, "Wan 2.1 chunked encode (caches, first frame alone) == "
              "whole-sequence encode, T=%d: rel %.1e (%.1fs)" % (T, rel_l2(a, b), time.time() - t0))
    cfg1 = small21(1)
    sd1 = E.random_weights(cfg1, rng)
    v = rng.uniform(-1, 1, (3, 9, 16, 16))
    check(rel_l2(E.encode(cfg1, sd1, v), E.encode_whole(cfg1, sd1, v)) < 1e-12,
          "Wan 2.1 chunked == whole with 1 residual block per level")
    for bad in (2, 4, 6):
        try:
            E.encode(cfg, sd, np.zeros((3, bad, 8, 8)))
            check(False, "T=%d refused" % bad)
        except E.RefError as e:
            check(True, "T=%d refused (%s)" % (bad, e))


def test_causal21(rng):
    cfg = small21()
    sd = E.random_weights(cfg, rng)
    v = rng.uniform(-1, 1, (3, 13, 8, 16))
    base = E.encode(cfg, sd, v)
    for j in range(3):
        w = v.copy()
        w[:, 4 * j + 1:] = rng.uniform(-1, 1, w[:, 4 * j + 1:].shape)
        got = E.encode(cfg, sd, w)
        check(np.array_equal(got[:, :j + 1], base[:, :j + 1]) and
              not np.allclose(got[:, j + 1:], base[:, j + 1:]),
              "Wan 2.1 causality: new frames after %d change latents %d.. only" % (4 * j, j + 1))
    one = E.encode(cfg, sd, v[:, :1])
    check(np.array_equal(one[:, 0], base[:, 0]),
          "Wan 2.1: the first frame alone encodes to latent frame 0 of the video, bit for bit")


def test_normalize21(rng):
    """Zero weights and biases everywhere but conv1's bias b: mu = b[:16]
    exactly, so the latents are (b - mean) * (1 / std) per channel."""
    cfg = small21(1)
    sd = {k: np.zeros_like(v) for k, v in E.random_weights(cfg, rng).items()}
    for k in sd:
        if k.endswith(".gamma"):
            sd[k] = np.ones_like(sd[k])
    b = rng.standard_normal(32)
    sd["conv1.bias"] = b
    z = E.encode(cfg, sd, rng.uniform(-1, 1, (3, 5, 8, 8)))
    mean, std = S.stats("wan2.1")
    ref = np.empty_like(z)
    for c in range(16):
        ref[c] = (b[c] - np.float32(mean[c])) * (np.float32(1) / np.float32(std[c]))
    check(rel_l2(z, ref) < 1e-15, "Wan 2.1 normalisation: (mu - mean) * (1 / std), mu the "
          "first 16 of conv1's 32 channels")


# ---------------------------------------------------------------- Wan 2.2

def small22(n_res=2):
    return V.Config(8, 8, 48, (1, 2, 4, 4), n_res, (False, True, True))


def test_vae22(rng):
    cfg = small22()
    sde = V.random_weights(cfg, rng, "encoder")
    sdd = V.random_weights(cfg, rng, "decoder")
    for T, H, W in ((1, 16, 32), (5, 32, 16), (9, 16, 16)):
        v = rng.uniform(-1, 1, (3, T, H, W))
        t0 = time.time()
        a, b = V.encode(cfg, sde, v), V.encode_whole(cfg, sde, v)
        check(a.shape == (48, 1 + (T - 1) // 4, H // 16, W // 16) and rel_l2(a, b) < 1e-12,
              "Wan 2.2 encode T=%d %dx%d -> %s, chunked == whole: rel %.1e (%.1fs)"
              % (T, H, W, a.shape, rel_l2(a, b), time.time() - t0))
    for F, h, w in ((1, 1, 2), (2, 2, 1), (3, 1, 1)):
        z = rng.standard_normal((48, F, h, w))
        t0 = time.time()
        a, b = V.decode(cfg, sdd, z), V.decode_whole(cfg, sdd, z)
        inside = float((np.abs(a) < 1).mean())
        check(a.shape == (3, 1 + 4 * (F - 1), 16 * h, 16 * w) and rel_l2(a, b) < 1e-12
              and inside > 0.2,
              "Wan 2.2 decode F=%d %dx%d -> %s, chunked (first_chunk) == whole: rel %.1e, "
              "%.0f%% inside (-1, 1) (%.1fs)" % (F, h, w, a.shape, rel_l2(a, b), 100 * inside,
                                                 time.time() - t0))
    v = rng.uniform(-1, 1, (3, 9, 16, 16))
    base = V.encode(cfg, sde, v)
    w = v.copy()
    w[:, 5:] = rng.uniform(-1, 1, w[:, 5:].shape)
    got = V.encode(cfg, sde, w)
    check(np.array_equal(got[:, :2], base[:, :2]) and not np.allclose(got[:, 2], base[:, 2]),
          "Wan 2.2 encoder causality: frames after 4 change latent 2 only")
    z = rng.standard_normal((48, 3, 1, 1))
    base = V.decode(cfg, sdd, z)
    z2 = z.copy()
    z2[:, 2] = rng.standard_normal((48, 1, 1))
    got = V.decode(cfg, sdd, z2)
    check(np.array_equal(got[:, :5], base[:, :5]) and not np.allclose(got[:, 5:], base[:, 5:]),
          "Wan 2.2 decoder causality: latent frame 2 changes video frames 5.. only")
    for bad in ((3, 4, 16, 16), (3, 5, 24, 16)):
        try:
            V.encode(cfg, sde, np.zeros(bad))
            check(False, "Wan 2.2 encode of %s refused" % (bad,))
        except V.RefError as e:
            check(True, "Wan 2.2 encode of %s refused (%s)" % (bad, e))


def test_normalize22(rng):
    cfg = small22(1)
    sdd = {k: np.zeros_like(v) for k, v in V.random_weights(cfg, rng, "decoder").items()}
    sdd["conv2.weight"] = np.eye(48).reshape(48, 48, 1, 1, 1)
    z = rng.standard_normal((48, 1, 1, 1))
    dec, conv2, _ = V._build(cfg, sdd, "decoder")
    x = conv2(V.unnormalize(cfg, z))
    mean, std = S.stats("wan2.2")
    ref = np.array([z[c, 0, 0, 0] / (np.float32(1) / np.float32(std[c])) + np.float32(mean[c])
                    for c in range(48)])
    check(rel_l2(x.reshape(48), ref) < 1e-15, "Wan 2.2 un-normalisation z / (1/std) + mean "
          "before conv2")


def main():
    rng = np.random.default_rng(take_seed("vae_enc_selftest"))
    test_strided_conv(rng)
    test_time_conv(rng)
    test_patchify(rng)
    test_avg_down(rng)
    test_dup_up(rng)
    test_stats()
    test_tables()
    test_encoder21(rng)
    test_causal21(rng)
    test_normalize21(rng)
    test_vae22(rng)
    test_normalize22(rng)
    return finish("vae_enc_selftest")


if __name__ == "__main__":
    sys.exit(main())
