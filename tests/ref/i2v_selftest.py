"""Self-tests of the image-to-video references (image_ref.py, i2v_ref.py).

The image steps against direct formulas written differently (the literal
published expressions evaluated with numpy, per-pixel kernel sums), sizes
worked out by hand, the mask against the published construction, the
per-token DiT against the scalar-timestep one (wan_ref.py) when every token
has the same timestep, the I2V loop against the text-to-video two-expert
loop (wan22_ref.py) when y's patch-embedding weights are zero, and the
TI2V loop without an image against wan_ref.sample. Fresh random inputs
every run; the seed is printed and SP_SEED replays it. The comparison with
the published PyTorch code is tests/ref/i2v_published_parity.py.
"""

import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import i2v_ref as R  # noqa: E402
import image_ref as I  # noqa: E402
import wan22_ref as W22  # noqa: E402
import wan_ref as W  # noqa: E402
import wan_vae22_ref as V  # noqa: E402
import wan_vae_enc_ref as E  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import check, finish, rel_l2, seed as take_seed  # noqa: E402


# ---------------------------------------------------------------- sizes

def published_grid(h, w, max_area):
    """The expressions of WanI2V.generate, evaluated as Python and numpy do."""
    aspect_ratio = h / w
    lat_h = round(np.sqrt(max_area * aspect_ratio) // 8 // 2 * 2)
    lat_w = round(np.sqrt(max_area / aspect_ratio) // 8 // 2 * 2)
    return lat_h, lat_w


def test_grid(rng):
    # 480x832 at 480*832 gives 58 rows, not 60: 399360 * (480/832) rounds to
    # 230399.99999999997, whose square root is just below 480.
    for (h, w, area, want) in ((720, 1280, 720 * 1280, (90, 160)),
                               (1080, 1920, 720 * 1280, (90, 160)),
                               (480, 832, 480 * 832, (58, 104)),
                               (832, 480, 480 * 832, (104, 60)),
                               (1280, 720, 720 * 1280, (160, 90)),
                               (1024, 1024, 720 * 1280, (120, 120))):
        got = I.i2v_grid(h, w, area)
        check(got == want, "I2V grid of a %dx%d image, max_area %d: %s (worked by hand: %s)"
              % (h, w, area, got, want))
    bad, n = [], 0
    areas = [720 * 1280, 480 * 832, 704 * 1280, 1024 * 704, 512 * 512, 640 * 640, 2000, 333333]
    sides = list(range(16, 4097, 37)) + [720, 1280, 480, 832, 1080, 1920, 3000, 4000]
    for area in areas:
        for h in sides:
            for w in sides[::3]:
                try:
                    got = I.i2v_grid(h, w, area)
                except I.RefError:
                    continue
                n += 1
                if got != published_grid(h, w, area):
                    bad.append((h, w, area))
    for _ in range(2000):
        h, w = (int(v) for v in rng.integers(1, 8000, 2))
        area = int(rng.integers(256, 4000 * 4000))
        try:
            got = I.i2v_grid(h, w, area)
        except I.RefError:
            continue
        n += 1
        if got != published_grid(h, w, area):
            bad.append((h, w, area))
    check(not bad, "I2V grid 2 floor(sqrt(A h/w) / 16) == the published expression for %d "
          "aspect ratios and areas (differ: %s)" % (n, bad[:4]))


def test_best_output_size(rng):
    for (w, h, area, want) in ((1280, 704, 704 * 1280, (1280, 704)),
                               (1920, 1080, 704 * 1280, (1248, 704)),
                               (704, 1280, 704 * 1280, (704, 1280))):
        got = I.best_output_size(w, h, 32, 32, area)
        check(got == want, "TI2V size of a %dx%d image, area %d: %s (by hand: %s)"
              % (w, h, area, got, want))
    ok = True
    for _ in range(500):
        w, h = (int(v) for v in rng.integers(32, 5000, 2))
        area = int(rng.choice([704 * 1280, 480 * 832, 512 * 512]))
        try:
            ow, oh = I.best_output_size(w, h, 32, 32, area)
        except I.RefError:
            continue
        ok = ok and ow % 32 == 0 and oh % 32 == 0 and ow * oh <= area and ow >= 32 and oh >= 32
    check(ok, "TI2V sizes: multiples of 32 within the area (500 random images)")


# ---------------------------------------------------------------- pixels

def test_to_unit():
    u8 = np.arange(256, dtype=np.uint8).reshape(16, 16, 1).repeat(3, axis=2)
    x = I.to_unit(u8)
    lv = x[0].reshape(-1)
    check(x.shape == (3, 16, 16) and lv[0] == -1.0 and lv[255] == 1.0 and np.all(np.diff(lv) > 0)
          and np.max(np.abs(lv - (np.arange(256) / 127.5 - 1))) < 2e-7,
          "to_unit: level 0 -> -1, 255 -> 1, increasing, within 2e-7 of 2 u / 255 - 1")


def keys(d):
    d = abs(d)
    a = I.CUBIC_A
    if d <= 1:
        return (a + 2) * d ** 3 - (a + 3) * d ** 2 + 1
    if d < 2:
        return a * d ** 3 - 5 * a * d ** 2 + 8 * a * d - 4 * a
    return 0.0


def test_bicubic(rng):
    for (h, w, oh, ow) in ((5, 7, 9, 4), (6, 3, 2, 8), (4, 4, 4, 4), (1, 5, 3, 5)):
        img = rng.uniform(-1, 1, (2, h, w))
        got = I.bicubic_resize(img, oh, ow)
        ref = np.zeros((2, oh, ow))
        for y in range(oh):
            sy = (y + 0.5) * h / oh - 0.5
            for x in range(ow):
                sx = (x + 0.5) * w / ow - 0.5
                for i in range(math.floor(sy) - 1, math.floor(sy) + 3):
                    for j in range(math.floor(sx) - 1, math.floor(sx) + 3):
                        ref[:, y, x] += (keys(sy - i) * keys(sx - j) *
                                         img[:, min(max(i, 0), h - 1), min(max(j, 0), w - 1)])
        check(rel_l2(got, ref) < 1e-14, "bicubic %dx%d -> %dx%d vs per-pixel Keys sums: rel %.1e"
              % (h, w, oh, ow, rel_l2(got, ref)))
    img = rng.uniform(-1, 1, (3, 11, 13))
    check(np.array_equal(I.bicubic_resize(img, 11, 13), img), "bicubic to the same size: identity")
    c = I.bicubic_resize(np.full((3, 17, 9), 0.3), 40, 5)
    check(np.max(np.abs(c - 0.3)) < 1e-15, "bicubic keeps a constant image")


def test_lanczos(rng):
    u8 = rng.integers(0, 256, (9, 7, 3), dtype=np.uint8)
    check(np.array_equal(I.pil_resize_lanczos(u8, 7, 9), u8), "LANCZOS to the same size: a copy")
    ok = True
    for _ in range(20):
        h, w, oh, ow = (int(v) for v in rng.integers(1, 60, 4))
        v = int(rng.integers(0, 256))
        ok = ok and np.all(I.pil_resize_lanczos(np.full((h, w, 3), v, np.uint8), ow, oh) == v)
    check(ok, "LANCZOS keeps a constant image (20 random sizes)")

    def lanczos_float(x, n_out, axis):
        x = np.moveaxis(x, axis, 0)
        n_in = x.shape[0]
        scale = n_in / n_out
        fs = max(scale, 1.0)
        out = np.zeros((n_out,) + x.shape[1:])
        for o in range(n_out):
            c = (o + 0.5) * scale
            ws = {i: I._lanczos((i + 0.5 - c) / fs) for i in range(n_in)
                  if abs(i + 0.5 - c) < 3 * fs + 1}
            tot = sum(ws.values())
            for i, wgt in ws.items():
                out[o] += wgt / tot * x[i]
        return np.clip(np.moveaxis(out, 0, axis), 0, 255)

    worst = 0.0
    for _ in range(10):
        h, w, oh, ow = (int(v) for v in rng.integers(2, 40, 4))
        u8 = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        got = I.pil_resize_lanczos(u8, ow, oh).astype(np.float64)
        ref = lanczos_float(lanczos_float(u8.astype(np.float64), ow, 1), oh, 0)
        worst = max(worst, np.max(np.abs(got - ref)))
    check(worst <= 2.0, "LANCZOS 8-bit passes within 2 levels of the unrounded filter (worst %.2f)"
          % worst)


def test_pillow(rng):
    """With Pillow below 13 importable (not in CI), the LANCZOS reference is
    compared with Image.resize itself; Pillow 13 changed the pass order."""
    try:
        import PIL
        from PIL import Image
    except ImportError:
        print("skipped  LANCZOS vs Pillow: PIL is not importable")
        return
    major = PIL.__version__.split(".")[0]
    if not major.isdigit() or int(major) >= 13:
        print("skipped  LANCZOS vs Pillow: Pillow %s orders its passes differently"
              % PIL.__version__)
        return
    bad = 0
    for _ in range(30):
        h, w, oh, ow = (int(v) for v in rng.integers(1, 120, 4))
        u8 = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        pil = np.asarray(Image.fromarray(u8, "RGB").resize((ow, oh), Image.LANCZOS))
        bad += not np.array_equal(I.pil_resize_lanczos(u8, ow, oh), pil)
    check(bad == 0, "LANCZOS == Pillow %s Image.resize bit for bit (30 sizes, %d differ)"
          % (PIL.__version__, bad))


def test_ti2v_image(rng):
    u8 = rng.integers(0, 256, (45, 70, 3), dtype=np.uint8)
    out = I.ti2v_image(u8, 64 * 96)
    # best size 96x64; scale max(96/70, 64/45) = 64/45; 70 * 64/45 = 99.56 -> 100
    check(out.shape == (64, 96, 3), "TI2V image 70x45 at area 64*96: resized to 100x64, "
          "centre 96x64 (got %s)" % (out.shape,))
    r = I.pil_resize_lanczos(u8, 100, 64)
    check(np.array_equal(out, r[:, 2:98]), "TI2V crop starts at ((100 - 96) // 2, 0)")


# ---------------------------------------------------------------- mask

def published_mask(F, h, w):
    msk = np.ones((1, F, h, w))
    msk[:, 1:] = 0
    msk = np.concatenate([np.repeat(msk[:, 0:1], 4, axis=1), msk[:, 1:]], axis=1)
    return msk.reshape(1, msk.shape[1] // 4, 4, h, w).transpose(0, 2, 1, 3, 4)[0]


def test_mask():
    for F, h, w in ((81, 60, 104), (5, 2, 4), (1, 4, 6), (121, 3, 2)):
        m = R.i2v_mask(F, h, w)
        ref = published_mask(F, h, w)
        check(m.shape == ref.shape == (4, (F - 1) // 4 + 1, h, w) and np.array_equal(m, ref),
              "I2V mask F=%d: %s == the published repeat/reshape/transpose, ones only in "
              "latent frame 0" % (F, m.shape))


def test_token_timesteps(rng):
    for grid, t in (((3, 2, 4), 937), ((1, 3, 3), 999), ((5, 1, 2), 250)):
        f, h, w = grid
        mask2 = np.ones((48, f, 2 * h, 2 * w), np.float32)
        mask2[:, 0] = 0
        ref = (mask2[0][:, ::2, ::2] * np.float32(t)).reshape(-1).astype(np.float64)
        got = R.ti2v_token_timesteps(t, grid, True)
        check(np.array_equal(got, ref), "TI2V token timesteps %s t=%d == the published mask "
              "expression: %d zeros, then t" % (grid, t, h * w))
        check(np.all(R.ti2v_token_timesteps(t, grid, False) == t), "TI2V t2v: all tokens at t")
    x, z = rng.standard_normal((48, 3, 2, 2)), rng.standard_normal((48, 1, 2, 2))
    m = np.ones_like(x)
    m[:, 0] = 0
    blend = (1.0 - m) * z + m * x
    copy = x.copy()
    copy[:, :1] = z
    check(np.array_equal(blend, copy), "(1 - mask2) z + mask2 x is the copy of z into frame 0")


# ---------------------------------------------------------------- DiT

def small_dit(in_dim, out_dim, layers=2):
    return R.dit_config(dim=64, ffn_dim=96, heads=2, layers=layers, in_dim=in_dim,
                        out_dim=out_dim, text_len=16, text_dim=24)


def test_tokens(rng):
    m = R.random_dit(small_dit(48, 48), rng)
    x = rng.standard_normal((48, 2, 4, 6))
    ctx = rng.standard_normal((5, 24))
    ce = W.embed_text(m, ctx)
    grid = R.token_grid(x.shape)
    a = R.forward_tokens(m, x, np.full(int(np.prod(grid)), 937.0), ce)
    b = W.forward(m, x, 937, ctx)
    check(rel_l2(a, b) < 1e-13, "per-token DiT with every token at t == the scalar-t DiT: "
          "rel %.1e" % rel_l2(a, b))
    t_tok = R.ti2v_token_timesteps(937, grid, True)
    e, e0 = R.embed_time_tokens(m, t_tok)
    e_t, e0_t = W.embed_time(m, 937)
    e_0, e0_0 = W.embed_time(m, 0)
    n0 = grid[1] * grid[2]
    check(np.array_equal(e[:n0], np.broadcast_to(e_0, e[:n0].shape)) and
          np.array_equal(e0[n0:], np.broadcast_to(e0_t, e0[n0:].shape)) and
          np.array_equal(e0[:n0], np.broadcast_to(e0_0, e0[:n0].shape)),
          "per-token e, e0: frame-0 tokens carry t = 0's, the others t's")
    c = R.forward_tokens(m, x, t_tok, ce)
    check(rel_l2(c, a) > 1e-3, "timestep 0 on frame 0 changes the prediction (rel %.1e)"
          % rel_l2(c, a))


# ---------------------------------------------------------------- loops

def test_i2v_loop(rng):
    _, ts = W.schedule(4, R.I2V_A14B["shift"])
    check(list(ts) == [999, 937, 833, 624] and R.I2V_A14B["boundary"] * 1000 == 900.0,
          "4 steps at shift 5: timesteps 999 937 833 624; boundary 0.9 x 1000 = 900.0 exactly")
    cfg = small_dit(36, 16)
    high, low = R.random_dit(cfg, rng), R.random_dit(cfg, rng)
    for m in (high, low):
        m.embed["patch_embedding.weight"][:, 16:] = 0.0
    cfg16 = dict(cfg, in_dim=16)
    h16, l16 = (W.Model(cfg16, dict(m.embed, **{"patch_embedding.weight":
                                                 m.embed["patch_embedding.weight"][:, :16]}),
                        m.blocks, m.head) for m in (high, low))
    noise = rng.standard_normal((16, 2, 4, 6))
    y = rng.standard_normal((20, 2, 4, 6))
    ctx, ctxn = rng.standard_normal((6, 24)), rng.standard_normal((3, 24))
    t0 = time.time()
    a, used = R.sample_i2v(high, low, noise, y, ctx, ctxn, 4)
    b, used_t2v = W22.sample_a14b(h16, l16, noise, ctx, ctxn, 4, (3.5, 3.5), 5.0, 0.9)
    check(used == used_t2v == ["high", "high", "low", "low"],
          "I2V experts across the switch: %s" % used)
    check(rel_l2(a, b) < 1e-13, "I2V loop with y's patch weights zero == the T2V two-expert loop "
          "on channels 0-15 (so x comes first, y after): rel %.1e (%.1fs)"
          % (rel_l2(a, b), time.time() - t0))
    high2 = R.random_dit(cfg, rng)
    a1, _ = R.sample_i2v(high2, low, noise, y, ctx, ctxn, 2)
    a2, _ = R.sample_i2v(high2, low, noise, y + 1.0, ctx, ctxn, 2)
    check(rel_l2(a1, a2) > 1e-3, "y enters the prediction (changing y changes the latents)")


def test_i2v_condition(rng):
    vcfg = E.Config(4, 16, (1, 2, 4, 4), 1, (False, True, True))
    vsd = E.random_weights(vcfg, rng)
    u8 = rng.integers(0, 256, (40, 90, 3), dtype=np.uint8)
    t0 = time.time()
    y, first = R.i2v_condition(vcfg, vsd, u8, 48 * 64, 9)
    check(y.shape == (20, 3, 4, 10) and first.shape == (3, 32, 80),
          "I2V y for a 90x40 image at area 48*64, 9 frames: %s, image resized to %s"
          % (y.shape, first.shape[1:]))
    check(np.array_equal(y[:4], R.i2v_mask(9, 4, 10)), "y channels 0-3: the mask")
    check(np.array_equal(first, I.bicubic_resize(I.to_unit(u8), 32, 80)),
          "the first frame is the bicubic resize of the [-1, 1] image")
    alone = E.encode(vcfg, vsd, first[:, None])
    check(np.array_equal(y[4:, :1], alone), "y's latent frame 0 is the encoding of the image "
          "alone, bit for bit (%.1fs)" % (time.time() - t0))


def test_ti2v_loop(rng):
    m = R.random_dit(small_dit(48, 48), rng)
    noise = rng.standard_normal((48, 2, 2, 4))
    ctx, ctxn = rng.standard_normal((6, 24)), rng.standard_normal((3, 24))
    t0 = time.time()
    a = R.sample_ti2v(m, noise, None, ctx, ctxn, 3)
    b = W.sample(m, noise, ctx, ctxn, 3, 5.0, 5.0, "unipc")
    check(rel_l2(a, b) < 1e-13, "TI2V text-to-video (per-token t, all equal) == wan_ref.sample: "
          "rel %.1e (%.1fs)" % (rel_l2(a, b), time.time() - t0))
    z = rng.standard_normal((48, 1, 2, 4))
    c = R.sample_ti2v(m, noise, z, ctx, ctxn, 3)
    check(np.array_equal(c[:, :1], z) and rel_l2(c[:, 1:], a[:, 1:]) > 1e-3,
          "TI2V image-to-video: frame 0 stays the image latent, the others follow it")
    vcfg = V.Config(8, 8, 48, (1, 2, 4, 4), 1, (False, True, True))
    vsd = V.random_weights(vcfg, rng, "encoder")
    u8 = rng.integers(0, 256, (90, 41, 3), dtype=np.uint8)
    zz, (oh, ow) = R.ti2v_image_latent(vcfg, vsd, u8, 96 * 64)
    check((oh, ow) == (96, 64) and zz.shape == (48, 1, 6, 4),
          "TI2V image latent of a 41x90 image at area 96*64: %dx%d -> %s" % (ow, oh, zz.shape))


def main():
    rng = np.random.default_rng(take_seed("i2v_selftest"))
    test_grid(rng)
    test_best_output_size(rng)
    test_to_unit()
    test_bicubic(rng)
    test_lanczos(rng)
    test_pillow(rng)
    test_ti2v_image(rng)
    test_mask()
    test_token_timesteps(rng)
    test_tokens(rng)
    test_i2v_loop(rng)
    test_i2v_condition(rng)
    test_ti2v_loop(rng)
    return finish("i2v_selftest")


if __name__ == "__main__":
    sys.exit(main())
