"""Self-tests of the float64 VAE decoder reference (tests/ref/wan_vae_ref.py).

Each piece is compared with a direct formula written differently (loops
over the index formulas), the chunked decode with the whole-sequence one,
and the tensor table with shapes read off the published module structure.
Fresh random inputs every run; the seed is printed and SP_SEED replays it.

With torch importable and SP_WAN_VAE_PY pointing at a copy of the published
wan/modules/vae.py (needs einops too), the reference is also compared with
WanVAE_.decode run in float64 on the same weights. Neither is available in
CI; without them that check says "skipped".
"""

import importlib.util
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import check, finish, rel_l2, seed as take_seed  # noqa: E402
import wan_vae_ref as R  # noqa: E402


def small_config():
    return R.Config(dim=4, z_dim=16, dim_mult=(1, 2, 4, 4), num_res_blocks=2,
                    temporal_upsample=(True, True, False))


# ---------------------------------------------------------------- pieces

def test_causal_conv(rng):
    """y[o,t,h,w] = b[o] + sum w[o,i,a,c,d] * X[i, t+a-(kt-1), h+c-kh//2, w+d-kw//2]
    where X is the input preceded by the cache frames and then zeros."""
    for kt, kh, kw, ncache in ((3, 3, 3, 0), (3, 3, 3, 1), (3, 3, 3, 2), (3, 1, 1, 2),
                               (1, 1, 1, 0), (3, 1, 1, 1)):
        ci, co, T, H, W = 3, 4, 3, 4, 5
        p = R._Params({"c.weight": rng.standard_normal((co, ci, kt, kh, kw)),
                       "c.bias": rng.standard_normal(co)})
        conv = R.CausalConv3d(p, "c", ci, co, (kt, kh, kw), ((kt - 1) // 2, kh // 2, kw // 2))
        x = rng.standard_normal((ci, T, H, W))
        cache = rng.standard_normal((ci, ncache, H, W)) if ncache else None
        y = conv(x, cache)
        w, b = conv.w, conv.b

        def frame(i, f, hh, ww):
            if hh < 0 or hh >= H or ww < 0 or ww >= W:
                return 0.0
            if f >= 0:
                return x[i, f, hh, ww]
            if kt > 1 and f >= -ncache:
                return cache[i, ncache + f, hh, ww]
            return 0.0

        ref = np.zeros_like(y)
        for o in range(co):
            for t in range(T):
                for hh in range(H):
                    for ww in range(W):
                        s = b[o]
                        for i in range(ci):
                            for a in range(kt):
                                for c in range(kh):
                                    for d in range(kw):
                                        s += w[o, i, a, c, d] * frame(
                                            i, t + a - (kt - 1), hh + c - kh // 2, ww + d - kw // 2)
                        ref[o, t, hh, ww] = s
        check(y.shape == ref.shape and rel_l2(y, ref) < 1e-13,
              "causal conv k=(%d,%d,%d) cache %d frames: rel %.1e"
              % (kt, kh, kw, ncache, rel_l2(y, ref)))


def test_rms_norm(rng):
    C = 7
    p = R._Params({"n.gamma": rng.uniform(0.5, 1.5, (C, 1, 1, 1))})
    norm = R.RMSNorm(p, "n", C, images=False)
    x = rng.standard_normal((C, 2, 3, 4)) * 3.0
    x[:, 1, 2, 3] = 0.0  # a zero position: the clamp at eps gives 0, not NaN
    y = norm(x)
    ref = np.zeros_like(x)
    for t in range(2):
        for h in range(3):
            for w in range(4):
                ss = sum(x[c, t, h, w] ** 2 for c in range(C))
                den = max(math.sqrt(ss), 1e-12)
                for c in range(C):
                    ref[c, t, h, w] = x[c, t, h, w] / den * math.sqrt(C) * norm.gamma[c]
    check(rel_l2(y, ref) < 1e-14 and np.all(y[:, 1, 2, 3] == 0.0),
          "rms norm (F.normalize * sqrt(C) * gamma): rel %.1e" % rel_l2(y, ref))


def test_upsample(rng):
    x = rng.standard_normal((2, 3, 5, 7))
    y = R.upsample_nearest_exact(x)
    ref = np.repeat(np.repeat(x, 2, axis=2), 2, axis=3)
    check(y.shape == (2, 3, 10, 14) and np.array_equal(y, ref),
          "nearest-exact 2x is pixel repetition (odd sizes)")


def test_attention_block(rng):
    c, t, h, w = 5, 2, 3, 4
    sd = {"a.norm.gamma": rng.uniform(0.5, 1.5, (c, 1, 1)),
          "a.to_qkv.weight": rng.standard_normal((3 * c, c, 1, 1)) * 0.5,
          "a.to_qkv.bias": rng.standard_normal(3 * c) * 0.1,
          "a.proj.weight": rng.standard_normal((c, c, 1, 1)),
          "a.proj.bias": rng.standard_normal(c)}
    blk = R.AttentionBlock(R._Params(sd), "a", c)
    x = rng.standard_normal((c, t, h, w))
    y = blk(x)
    ref = np.zeros_like(x)
    wq = sd["a.to_qkv.weight"][:, :, 0, 0]
    wp = sd["a.proj.weight"][:, :, 0, 0]
    g = sd["a.norm.gamma"].reshape(c)
    for f in range(t):
        toks = []
        for n in range(h * w):
            v = x[:, f, n // w, n % w]
            nv = v / max(np.sqrt(np.sum(v * v)), 1e-12) * math.sqrt(c) * g
            toks.append(wq @ nv + sd["a.to_qkv.bias"])
        for n in range(h * w):
            q = toks[n][:c]
            scores = [float(q @ toks[m][c:2 * c]) / math.sqrt(c) for m in range(h * w)]
            mx = max(scores)
            e = [math.exp(s - mx) for s in scores]
            o = sum(e[m] * toks[m][2 * c:] for m in range(h * w)) / sum(e)
            ref[:, f, n // w, n % w] = wp @ o + sd["a.proj.bias"] + x[:, f, n // w, n % w]
    check(rel_l2(y, ref) < 1e-13, "attention block per frame: rel %.1e" % rel_l2(y, ref))


def test_unfold_time(rng):
    c, t = 3, 4
    x = rng.standard_normal((2 * c, t, 2, 2))
    y = R.Resample.unfold_time(x)
    ok = y.shape == (c, 2 * t, 2, 2)
    for ch in range(c):
        for j in range(t):
            for k in range(2):
                ok = ok and np.array_equal(y[ch, 2 * j + k], x[k * c + ch, j])
    check(ok, "time_conv halves become frames 2j and 2j+1")


def test_unnormalize(rng):
    z = rng.standard_normal((16, 2, 2, 3))
    y = R.unnormalize(z)
    ref = np.empty_like(z)
    for c in range(16):
        ref[c] = z[c] * R.LATENT_STD[c] + R.LATENT_MEAN[c]
    check(rel_l2(y, ref) < 1e-15, "un-normalisation z * std + mean")


# ---------------------------------------------------------------- structure

def test_table():
    s = R.tensor_shapes(R.published_config())
    expect = {
        "conv2.weight": (16, 16, 1, 1, 1),
        "decoder.conv1.weight": (384, 16, 3, 3, 3),
        "decoder.middle.0.residual.0.gamma": (384, 1, 1, 1),
        "decoder.middle.1.norm.gamma": (384, 1, 1),
        "decoder.middle.1.to_qkv.weight": (1152, 384, 1, 1),
        "decoder.middle.1.proj.weight": (384, 384, 1, 1),
        "decoder.upsamples.3.time_conv.weight": (768, 384, 3, 1, 1),
        "decoder.upsamples.3.resample.1.weight": (192, 384, 3, 3),
        "decoder.upsamples.4.residual.2.weight": (384, 192, 3, 3, 3),
        "decoder.upsamples.4.shortcut.weight": (384, 192, 1, 1, 1),
        "decoder.upsamples.7.time_conv.bias": (768,),
        "decoder.upsamples.8.residual.0.gamma": (192, 1, 1, 1),
        "decoder.upsamples.11.resample.1.weight": (96, 192, 3, 3),
        "decoder.upsamples.12.residual.2.weight": (96, 96, 3, 3, 3),
        "decoder.upsamples.14.residual.6.bias": (96,),
        "decoder.head.0.gamma": (96, 1, 1, 1),
        "decoder.head.2.weight": (3, 96, 3, 3, 3),
    }
    bad = [k for k, v in expect.items() if s.get(k) != v]
    check(not bad, "published config: shapes of %d sample keys (wrong: %s)" % (len(expect), bad))
    absent = ["decoder.upsamples.11.time_conv.weight", "decoder.upsamples.0.shortcut.weight",
              "decoder.upsamples.8.shortcut.weight", "decoder.upsamples.15.residual.0.gamma",
              "decoder.head.0.bias"]
    check(not any(k in s for k in absent), "published config: no %s" % ", ".join(absent))
    check(len(s) == 108, "published config: 108 decoder tensors (got %d)" % len(s))
    n = sum(int(np.prod(v)) for v in s.values())
    print("      published decoder + conv2: %d tensors, %d parameters" % (len(s), n))


def test_strict(rng):
    cfg = small_config()
    sd = R.random_weights(cfg, rng)
    z = rng.standard_normal((16, 1, 1, 1))
    cases = []
    d = dict(sd)
    d.pop("decoder.upsamples.4.shortcut.bias")
    cases.append(("missing", d))
    d = dict(sd)
    d["decoder.extra.weight"] = np.zeros(1)
    cases.append(("extra", d))
    d = dict(sd)
    d["decoder.head.2.bias"] = np.zeros(4)
    cases.append(("misshapen", d))
    for what, d in cases:
        try:
            R.decode(cfg, d, z)
            check(False, "%s tensor refused" % what)
        except R.RefError as e:
            check(True, "%s tensor refused (%s)" % (what, e))


# ---------------------------------------------------------------- decode

def test_decode(rng):
    cfg = small_config()
    sd = R.random_weights(cfg, rng)
    for F, H, W in ((1, 3, 5), (2, 3, 2), (3, 1, 1), (5, 2, 3)):
        z = rng.standard_normal((16, F, H, W))
        t0 = time.time()
        a = R.decode(cfg, sd, z)
        b = R.decode_whole(cfg, sd, z)
        shape = (3, 1 + 4 * (F - 1), 8 * H, 8 * W)
        check(a.shape == shape and b.shape == shape and R.out_frames(cfg, F) == shape[1],
              "decode F=%d %dx%d -> %s" % (F, H, W, a.shape))
        inside = np.abs(a) < 1.0
        check(inside.mean() > 0.2 and np.abs(a).max() <= 1.0,
              "decode F=%d: clamped, %.0f%% of values inside (-1, 1)" % (F, 100 * inside.mean()))
        e = rel_l2(a, b)
        check(e < 1e-12, "chunked decode (feature cache, Rep) == whole-sequence decode, "
              "F=%d: rel %.1e (%.1fs)" % (F, e, time.time() - t0))
    # Other shapes of config: no temporal upsample, fewer levels, 1 res block.
    for cfg2 in (R.Config(4, 16, (1, 2, 2), 1, (False, True)),
                 R.Config(2, 16, (1, 2, 4, 4), 2, (False, False, False))):
        sd2 = R.random_weights(cfg2, rng)
        z = rng.standard_normal((16, 3, 2, 3))
        a = R.decode(cfg2, sd2, z)
        b = R.decode_whole(cfg2, sd2, z)
        check(a.shape[1] == R.out_frames(cfg2, 3) and rel_l2(a, b) < 1e-12,
              "%r: %s, chunked == whole" % (cfg2, a.shape))


# ---------------------------------------------------------------- torch

def test_published(rng):
    path = os.environ.get("SP_WAN_VAE_PY")
    try:
        import torch
    except ImportError:
        print("skipped  published WanVAE_.decode: torch is not importable")
        return
    if not path or not os.path.isfile(path):
        print("skipped  published WanVAE_.decode: SP_WAN_VAE_PY is not a copy of "
              "wan/modules/vae.py")
        return
    spec = importlib.util.spec_from_file_location("published_wan_vae", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # The published Upsample casts its input to float32 (a bfloat16 fix) and
    # back: in a float64 run that one rounding would dominate the difference,
    # so here it upsamples in the input's dtype.
    mod.Upsample.forward = lambda self, x: torch.nn.Upsample.forward(self, x)
    torch.set_default_dtype(torch.float64)
    for cfg in (small_config(), R.Config(4, 16, (1, 2, 4, 4), 1, (False, True, True))):
        sd = R.random_weights(cfg, rng)
        model = mod.WanVAE_(dim=cfg.dim, z_dim=cfg.z_dim, dim_mult=list(cfg.dim_mult),
                            num_res_blocks=cfg.num_res_blocks, attn_scales=[],
                            temperal_downsample=list(cfg.temporal_upsample[::-1]),
                            dropout=0.0).double().eval()
        res = model.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()},
                                    strict=False)
        others = [k for k in res.missing_keys if not k.startswith(("encoder.", "conv1."))]
        check(not others and not res.unexpected_keys,
              "published WanVAE_ takes exactly the reference's decoder keys "
              "(missing %s, unexpected %s)" % (others[:4], res.unexpected_keys[:4]))
        mean = torch.tensor(R.LATENT_MEAN, dtype=torch.float64)
        std = torch.tensor(R.LATENT_STD, dtype=torch.float64)
        for F, H, W in ((1, 3, 5), (2, 2, 3), (5, 3, 3)):
            z = rng.standard_normal((16, F, H, W))
            with torch.no_grad():
                ref = model.decode(torch.from_numpy(z)[None], [mean, 1.0 / std])
            ref = ref.clamp(-1, 1)[0].numpy()
            got = R.decode(cfg, sd, z)
            e = rel_l2(got, ref) if got.shape == ref.shape else float("inf")
            check(e < 1e-12, "%r F=%d %dx%d: reference vs published WanVAE_.decode "
                  "float64: rel %.1e" % (cfg, F, H, W, e))


def main():
    seed = take_seed("wan_vae_selftest")
    rng = np.random.default_rng(seed)
    test_causal_conv(rng)
    test_rms_norm(rng)
    test_upsample(rng)
    test_attention_block(rng)
    test_unfold_time(rng)
    test_unnormalize(rng)
    test_table()
    test_strict(rng)
    test_decode(rng)
    test_published(rng)
    return finish("wan_vae_selftest")


if __name__ == "__main__":
    sys.exit(main())
