#!/usr/bin/env python3
"""Check the image-to-video references against the published PyTorch code.

Not part of CI: it needs torch, torchvision, einops, diffusers, imageio,
easydict and Pillow (below 13 for the bit-exact LANCZOS check: Pillow 13
orders the two resampling passes differently for some shapes), and a copy
of the published Wan 2.2 repository, whose files it imports but which
staticpipe does not keep:

    git clone https://github.com/Wan-Video/Wan2.2 /tmp/Wan2.2
    python3 tests/ref/i2v_published_parity.py --wan22 /tmp/Wan2.2 [--seed N]

Everything runs on the CPU at small widths with random weights, in
float64. The published modules are used as they are, except where a
float64 run needs it (each change only alters a dtype cast, none an
operation, and each is applied by exact text match, so a changed published
file stops the script instead of being checked wrongly):

- model.py: every .float() becomes .double() and the dtype asserts accept
  float64, except the time sinusoid's cast to float32, which the published
  model makes and the reference makes too; flash_attention (CUDA-only) is
  replaced by exact softmax attention over the first k_lens keys;
- vae2_1.py / vae2_2.py: Upsample's float32 round trip is skipped;
- the pipelines' float32 noise is generated as published and widened to
  float64 (the same values); the scheduler's steps run with float32 as the
  default dtype, as in a published run (and again with float64 sigmas, see
  below); the VAE wrappers' final .float() is skipped; the text encoder is
  a table of random contexts.

What is compared, each with its relative L2 (STYLE.md 9) or bit equality:
the Wan 2.1 VAE encoder (WanVAE_.encode), the Wan 2.2 VAE encoder and
decoder, the DiT with in_dim 36 and with per-token timesteps
(WanModel.forward), the image steps (torchvision to_tensor, bicubic
F.interpolate, PIL LANCZOS resize, best_output_size), and the two
pipelines end to end (WanI2V.generate, WanTI2V.generate for t2v and i2v):
conditioning tensor, experts per step, per-token timesteps, final latents.
Each pipeline runs twice: with the scheduler as published, whose
coefficients come from its float32 sigmas in float32 (the loops then agree
to ~1e-7), and with those sigmas widened to float64 (same values), so that
every coefficient is computed in double as the reference (and staticpipe,
MODEL.md "Sampler") computes them: then to ~1e-15. Exit 0 when every check
passes.
"""

import argparse
import math
import os
import sys
import time
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import i2v_ref as R  # noqa: E402
import image_ref as I  # noqa: E402
import wan_ref as W  # noqa: E402
import wan_vae22_ref as V  # noqa: E402
import wan_vae_enc_ref as E  # noqa: E402
import wan_vae_stats as S  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import check, finish, rel_l2, seed as take_seed  # noqa: E402

RESULTS = []


def record(name, err, tol):
    RESULTS.append((name, err))
    check(err <= tol, "%s: rel L2 %.2e (tol %.0e)" % (name, err, tol))


# ---------------------------------------------------------------- import shim

def _patch(src, old, new, count=None):
    n = src.count(old)
    if n == 0 or (count is not None and n != count):
        sys.exit("published file changed: %r found %d times" % (old, n))
    return src.replace(old, new)


def load_published(root):
    """Import the needed files of the Wan 2.2 checkout as package `wan`
    without running its __init__ files (they import every pipeline)."""
    import torch
    wan = os.path.join(root, "wan")
    for name, sub in (("wan", ""), ("wan.modules", "modules"), ("wan.utils", "utils"),
                      ("wan.distributed", "distributed"), ("wan.configs", "configs")):
        m = types.ModuleType(name)
        m.__path__ = [os.path.join(wan, sub)]
        sys.modules[name] = m
    t5 = types.ModuleType("wan.modules.t5")     # needs transformers; never called
    t5.T5EncoderModel = None
    sys.modules["wan.modules.t5"] = t5

    path = os.path.join(wan, "modules", "model.py")
    src = open(path).read()
    src = _patch(src, ".float()", ".double()")
    src = _patch(src, ".unflatten(0, (bt, seq_len)).double())",
                 ".unflatten(0, (bt, seq_len)).float().double())", 1)
    src = _patch(src, "== torch.float32", "== torch.float64")
    mod = types.ModuleType("wan.modules.model")
    mod.__file__, mod.__package__ = path, "wan.modules"
    sys.modules["wan.modules.model"] = mod
    exec(compile(src, path, "exec"), mod.__dict__)

    def exact_attention(q, k, v, q_lens=None, k_lens=None, window_size=(-1, -1), **kw):
        out = torch.empty_like(q)
        for b in range(q.shape[0]):
            n = k.shape[1] if k_lens is None else int(k_lens[b])
            s = torch.einsum("qhd,khd->hqk", q[b], k[b, :n]) / math.sqrt(q.shape[-1])
            out[b] = torch.einsum("hqk,khd->qhd", torch.softmax(s, dim=-1), v[b, :n])
        return out
    mod.flash_attention = exact_attention

    import importlib
    pub = types.SimpleNamespace(model=mod)
    for name in ("modules.vae2_1", "modules.vae2_2", "image2video", "textimage2video",
                 "utils.utils", "configs.wan_i2v_A14B", "configs.wan_ti2v_5B"):
        setattr(pub, name.split(".")[-1], importlib.import_module("wan." + name))
    for vae in (pub.vae2_1, pub.vae2_2):
        vae.Upsample.forward = lambda self, x: torch.nn.Upsample.forward(self, x)
    return pub


def t64(a):
    import torch
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64))


def scale_tensors(family):
    mean, inv = S.scale_f32(family)
    return [t64(mean), t64(inv)]


# ---------------------------------------------------------------- the VAEs

def check_vae21(pub, rng):
    import torch
    for cfg in (E.Config(4, 16, (1, 2, 4, 4), 2, (False, True, True)),
                E.Config(4, 16, (1, 2, 4, 4), 1, (False, True, True))):
        sd = E.random_weights(cfg, rng)
        model = pub.vae2_1.WanVAE_(dim=cfg.dim, z_dim=cfg.z_dim, dim_mult=list(cfg.dim_mult),
                                   num_res_blocks=cfg.num_res_blocks, attn_scales=[],
                                   temperal_downsample=list(cfg.temporal_downsample),
                                   dropout=0.0).double().eval()
        res = model.load_state_dict({k: t64(v) for k, v in sd.items()}, strict=False)
        others = [k for k in res.missing_keys if not k.startswith(("decoder.", "conv2."))]
        check(not others and not res.unexpected_keys,
              "Wan 2.1 VAE: the reference's encoder keys are the published ones "
              "(missing %s, unexpected %s)" % (others[:3], res.unexpected_keys[:3]))
        for T, H, Wd in ((1, 9, 13), (5, 8, 11), (9, 17, 10), (5, 16, 24)):
            video = rng.uniform(-1, 1, (3, T, H, Wd))
            with torch.no_grad():
                ref = model.encode(t64(video)[None], scale_tensors("wan2.1"))[0].numpy()
            got = E.encode(cfg, sd, video)
            err = rel_l2(got, ref) if got.shape == ref.shape else float("inf")
            record("Wan 2.1 VAE encoder %r T=%d %dx%d" % (cfg, T, H, Wd), err, 1e-12)


def check_vae22(pub, rng):
    import torch
    cfg = V.Config(8, 8, 48, (1, 2, 4, 4), 2, (False, True, True))
    sd = V.random_weights(cfg, rng, "encoder")
    sd.update(V.random_weights(cfg, rng, "decoder"))
    model = pub.vae2_2.WanVAE_(dim=cfg.dim, dec_dim=cfg.dec_dim, z_dim=cfg.z_dim,
                               dim_mult=list(cfg.dim_mult), num_res_blocks=cfg.num_res_blocks,
                               attn_scales=[], temperal_downsample=list(cfg.temporal_downsample),
                               dropout=0.0).double().eval()
    res = model.load_state_dict({k: t64(v) for k, v in sd.items()}, strict=True)
    check(not res.missing_keys and not res.unexpected_keys,
          "Wan 2.2 VAE: the reference's keys are exactly the published ones")
    enc = {k: v for k, v in sd.items() if k.startswith(("encoder.", "conv1."))}
    dec = {k: v for k, v in sd.items() if k.startswith(("decoder.", "conv2."))}
    for T, H, Wd in ((1, 16, 32), (5, 32, 16), (9, 16, 48)):
        video = rng.uniform(-1, 1, (3, T, H, Wd))
        with torch.no_grad():
            ref = model.encode(t64(video)[None], scale_tensors("wan2.2"))[0].numpy()
        got = V.encode(cfg, enc, video)
        err = rel_l2(got, ref) if got.shape == ref.shape else float("inf")
        record("Wan 2.2 VAE encoder T=%d %dx%d" % (T, H, Wd), err, 1e-12)
    for F, h, w in ((1, 1, 2), (2, 2, 1), (3, 1, 3)):
        z = rng.standard_normal((48, F, h, w))
        with torch.no_grad():
            ref = model.decode(t64(z)[None], scale_tensors("wan2.2")).clamp(-1, 1)[0].numpy()
        got = V.decode(cfg, dec, z)
        err = rel_l2(got, ref) if got.shape == ref.shape else float("inf")
        record("Wan 2.2 VAE decoder F=%d %dx%d" % (F, h, w), err, 1e-12)


# ---------------------------------------------------------------- the DiT

def small_dit(in_dim, out_dim):
    return R.dit_config(dim=64, ffn_dim=96, heads=2, layers=2, in_dim=in_dim, out_dim=out_dim,
                        text_len=16, text_dim=24)


def published_dit(pub, model, model_type):
    cfg = model.cfg
    net = pub.model.WanModel(model_type=model_type, patch_size=cfg["patch"],
                             text_len=cfg["text_len"], in_dim=cfg["in_dim"], dim=cfg["dim"],
                             ffn_dim=cfg["ffn_dim"], freq_dim=cfg["freq_dim"],
                             text_dim=cfg["text_dim"], out_dim=cfg["out_dim"],
                             num_heads=cfg["heads"], num_layers=cfg["layers"],
                             window_size=(-1, -1), qk_norm=True, cross_attn_norm=True,
                             eps=cfg["eps"]).double().eval()
    net.load_state_dict({k: t64(v) for k, v in R.state_dict(model).items()}, strict=True)
    return net


def check_dit(pub, rng):
    import torch
    # I2V: in_dim 36, the 20 channels of y concatenated after the 16 of x.
    m = R.random_dit(small_dit(36, 16), rng)
    net = published_dit(pub, m, "i2v")
    x, y = rng.standard_normal((16, 2, 4, 6)), rng.standard_normal((20, 2, 4, 6))
    ctx = rng.standard_normal((5, 24))
    L = 2 * 2 * 3
    with torch.no_grad():
        ref = net([t64(x)], t=torch.tensor([937]), context=[t64(ctx)], seq_len=L,
                  y=[t64(y)])[0].numpy()
    got = W.forward(m, np.concatenate([x, y]), 937, ctx)
    record("DiT in_dim 36 (x then y) vs WanModel i2v", rel_l2(got, ref), 1e-12)
    # TI2V: per-token timesteps, 0 for the tokens of latent frame 0.
    m = R.random_dit(small_dit(48, 48), rng)
    net = published_dit(pub, m, "ti2v")
    x = rng.standard_normal((48, 3, 4, 2))
    grid = R.token_grid(x.shape)
    t_tok = R.ti2v_token_timesteps(833, grid, True)
    with torch.no_grad():
        ref = net([t64(x)], t=torch.from_numpy(t_tok.astype(np.float32))[None],
                  context=[t64(ctx)], seq_len=t_tok.size)[0].numpy()
    got = R.forward_tokens(m, x, t_tok, W.embed_text(m, ctx))
    record("DiT per-token timesteps (frame 0 at 0) vs WanModel ti2v", rel_l2(got, ref), 1e-12)


# ---------------------------------------------------------------- images

def check_images(pub, rng):
    import PIL
    import torch
    import torchvision.transforms.functional as TF
    from PIL import Image
    u8 = rng.integers(0, 256, (23, 37, 3), dtype=np.uint8)
    torch.set_default_dtype(torch.float32)      # as published runs
    a = TF.to_tensor(Image.fromarray(u8, "RGB")).sub_(0.5).div_(0.5).numpy()
    torch.set_default_dtype(torch.float64)
    check(a.dtype == np.float32 and np.array_equal(a.astype(np.float64), I.to_unit(u8)),
          "to_tensor().sub_(0.5).div_(0.5) in float32 == image_ref.to_unit, bit for bit")
    worst = 0.0
    for _ in range(40):
        h, w = (int(v) for v in rng.integers(2, 70, 2))
        oh, ow = (int(v) for v in rng.integers(1, 90, 2))
        img = rng.uniform(-1, 1, (3, h, w))
        ref = torch.nn.functional.interpolate(t64(img)[None], size=(oh, ow), mode="bicubic")
        worst = max(worst, rel_l2(I.bicubic_resize(img, oh, ow), ref[0].numpy()))
    record("bicubic resize vs F.interpolate (40 random sizes, up and down)", worst, 1e-13)
    exact = PIL.__version__.split(".")[0].isdigit() and int(PIL.__version__.split(".")[0]) < 13
    bad = 0
    for _ in range(60):
        h, w = (int(v) for v in rng.integers(1, 160, 2))
        oh, ow = (int(v) for v in rng.integers(1, 160, 2))
        u8 = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        pil = np.asarray(Image.fromarray(u8, "RGB").resize((ow, oh), Image.LANCZOS))
        bad += not np.array_equal(I.pil_resize_lanczos(u8, ow, oh), pil)
    if exact:
        check(bad == 0, "LANCZOS resize == PIL %s bit for bit (60 random sizes; %d differ)"
              % (PIL.__version__, bad))
    else:
        print("info  LANCZOS: Pillow %s differs in %d of 60 sizes (its pass order changed "
              "in 13; install Pillow < 13 for the bit-exact check)" % (PIL.__version__, bad))
    bad = []
    for _ in range(300):
        w, h = (int(v) for v in rng.integers(16, 4000, 2))
        area = int(rng.choice([704 * 1280, 480 * 832, 720 * 1280, 512 * 512, 64 * 96]))
        try:
            got = I.best_output_size(w, h, 32, 32, area)
        except I.RefError:
            continue
        if got != pub.utils.best_output_size(w, h, 32, 32, area):
            bad.append((w, h, area))
    check(not bad, "best_output_size == the published function (300 sizes; differ: %s)" % bad[:3])


# ---------------------------------------------------------------- pipelines

class Recorder:
    """Stands for a DiT in a pipeline object: calls the published WanModel
    and records what it was given."""

    def __init__(self, net, name, log):
        self.net, self.name, self.log = net, name, log

    def __call__(self, x, t, context, seq_len, y=None):
        self.log.append(dict(name=self.name, t=t.detach().numpy().copy(),
                             y=None if y is None else y[0].detach().numpy().copy()))
        return self.net(x, t=t, context=context, seq_len=seq_len, y=y)


class VaeStub:
    """A VAE wrapper like Wan2_1_VAE / Wan2_2_VAE around a published WanVAE_,
    in float64 (no final .float()); decode hands back the latents."""

    def __init__(self, model, family):
        self.model, self.scale = model, scale_tensors(family)

    def encode(self, videos):
        return [self.model.encode(u.double().unsqueeze(0), self.scale).squeeze(0) for u in videos]

    def decode(self, zs):
        return zs


class TextStub:
    def __init__(self, table):
        self.table = table

    def __call__(self, prompts, device):
        return [t64(self.table[p]) for p in prompts]


def widen_randn():
    """Within the pipelines torch.randn(..., dtype=float32) gives float32
    noise; this returns the same values in float64."""
    import torch
    orig = torch.randn

    def randn(*a, **kw):
        out = orig(*a, **kw)
        return out.double() if out.dtype == torch.float32 else out
    return orig, randn


def run_pipeline(pub, fn, log):
    """Runs a pipeline call twice in float64 with the float32 noise widened:
    first with the scheduler as published (its steps under float32 as the
    default dtype, so its coefficients come from the float32 sigmas in
    float32), then with the scheduler's sigmas widened to float64 (the same
    values; every coefficient in double, as the reference computes them).
    Returns both final latents; log keeps the first run's model calls."""
    import torch
    cls = pub.image2video.FlowUniPCMultistepScheduler
    orig_randn, wide = widen_randn()
    orig_step = cls.step

    def step32(self, *a, **kw):
        torch.set_default_dtype(torch.float32)
        try:
            return orig_step(self, *a, **kw)
        finally:
            torch.set_default_dtype(torch.float64)

    def step64(self, *a, **kw):
        self.sigmas = self.sigmas.double()
        return orig_step(self, *a, **kw)
    outs = []
    try:
        for step in (step32, step64):
            torch.randn, cls.step = wide, step
            with torch.no_grad():
                outs.append(fn().numpy())
            if len(outs) == 1:
                n = len(log)
    finally:
        torch.randn, cls.step = orig_randn, orig_step
    del log[n:]
    return outs


def noise_of(seed, shape):
    """The pipelines' noise: torch.Generator('cpu').manual_seed(seed) and one
    float32 torch.randn of the latent shape."""
    import torch
    g = torch.Generator(device="cpu")
    g.manual_seed(seed)
    return torch.randn(*shape, dtype=torch.float32, generator=g).numpy().astype(np.float64)


def check_i2v(pub, rng):
    import torch
    from PIL import Image
    vcfg = E.Config(4, 16, (1, 2, 4, 4), 1, (False, True, True))
    vsd = E.random_weights(vcfg, rng)
    vae = pub.vae2_1.WanVAE_(dim=4, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=1,
                             attn_scales=[], temperal_downsample=[False, True, True],
                             dropout=0.0).double().eval()
    vae.load_state_dict({k: t64(v) for k, v in vsd.items()}, strict=False)
    high, low = R.random_dit(small_dit(36, 16), rng), R.random_dit(small_dit(36, 16), rng)
    ctx = {"cond": rng.standard_normal((7, 24)), "neg": rng.standard_normal((3, 24))}
    # The third case is the published rounding at work: a 480x832 image at
    # max_area 480*832 gets 58 latent rows (464 pixels), not 60.
    for (ih, iw, max_area, frames, steps) in ((40, 90, 48 * 64, 5, 4), (61, 47, 40 * 40, 9, 3),
                                              (480, 832, 480 * 832, 1, 1)):
        u8 = rng.integers(0, 256, (ih, iw, 3), dtype=np.uint8)
        seed = int(rng.integers(0, 2 ** 31))
        log = []
        obj = pub.image2video.WanI2V.__new__(pub.image2video.WanI2V)
        obj.__dict__.update(
            device=torch.device("cpu"), rank=0, t5_cpu=True, init_on_cpu=False, sp_size=1,
            num_train_timesteps=1000, boundary=R.I2V_A14B["boundary"],
            param_dtype=torch.bfloat16, vae_stride=(4, 8, 8), patch_size=(1, 2, 2),
            sample_neg_prompt="neg", text_encoder=TextStub(ctx), vae=VaeStub(vae, "wan2.1"),
            high_noise_model=Recorder(published_dit(pub, high, "i2v"), "high", log),
            low_noise_model=Recorder(published_dit(pub, low, "i2v"), "low", log))
        t0 = time.time()
        out32, out = run_pipeline(pub, lambda: obj.generate(
            "cond", Image.fromarray(u8, "RGB"), max_area=max_area, frame_num=frames,
            shift=R.I2V_A14B["shift"], sample_solver="unipc", sampling_steps=steps,
            guide_scale=R.I2V_A14B["guide_scale"], n_prompt="neg", seed=seed,
            offload_model=False), log)
        y, _ = R.i2v_condition(vcfg, vsd, u8, max_area, frames, pixel_dtype=np.float64)
        ypub = log[0]["y"]
        same_shape = y.shape == ypub.shape
        check(same_shape, "I2V %dx%d max_area %d: y %s, published %s"
              % (ih, iw, max_area, y.shape, ypub.shape))
        check(same_shape and np.array_equal(y[:4], ypub[:4]),
              "I2V %dx%d max_area %d: mask channels %s bit for bit"
              % (ih, iw, max_area, y[:4].shape))
        record("I2V %dx%d max_area %d F=%d: image latents of y" % (ih, iw, max_area, frames),
               rel_l2(y[4:], ypub[4:]) if same_shape else float("inf"), 1e-12)
        noise = noise_of(seed, (16,) + y.shape[1:])
        got, used = R.sample_i2v(high, low, noise, y, ctx["cond"], ctx["neg"], steps)
        pub_used = [e["name"] for e in log[::2]]
        check(used == pub_used, "I2V experts per step %s == published %s" % (used, pub_used))
        what = "I2V-A14B loop %dx%d, %d steps, %s" % (ih, iw, steps, "/".join(used))
        record(what + ", published scheduler (float32 coefficients)", rel_l2(got, out32), 1e-5)
        record(what + ", scheduler in float64 (%.0fs)" % (time.time() - t0), rel_l2(got, out), 1e-12)


def check_ti2v(pub, rng):
    import torch
    from PIL import Image
    vcfg = V.Config(8, 8, 48, (1, 2, 4, 4), 1, (False, True, True))
    vsd = V.random_weights(vcfg, rng, "encoder")
    vae = pub.vae2_2.WanVAE_(dim=8, dec_dim=8, z_dim=48, dim_mult=[1, 2, 4, 4], num_res_blocks=1,
                             attn_scales=[], temperal_downsample=[False, True, True],
                             dropout=0.0).double().eval()
    vae.load_state_dict({k: t64(v) for k, v in vsd.items()}, strict=False)
    m = R.random_dit(small_dit(48, 48), rng)
    ctx = {"cond": rng.standard_normal((6, 24)), "neg": rng.standard_normal((4, 24))}
    for mode, (ih, iw, max_area, frames, steps) in (("i2v", (45, 70, 64 * 96, 5, 3)),
                                                    ("i2v", (90, 41, 96 * 64, 9, 2)),
                                                    ("t2v", (32, 64, 0, 5, 3))):
        seed = int(rng.integers(0, 2 ** 31))
        log = []
        obj = pub.textimage2video.WanTI2V.__new__(pub.textimage2video.WanTI2V)
        obj.__dict__.update(
            device=torch.device("cpu"), rank=0, t5_cpu=True, init_on_cpu=False, sp_size=1,
            num_train_timesteps=1000, param_dtype=torch.bfloat16, vae_stride=(4, 16, 16),
            patch_size=(1, 2, 2), sample_neg_prompt="neg", text_encoder=TextStub(ctx),
            vae=VaeStub(vae, "wan2.2"), model=Recorder(published_dit(pub, m, "ti2v"), "ti2v", log))
        u8 = rng.integers(0, 256, (ih, iw, 3), dtype=np.uint8)
        t0 = time.time()
        if mode == "i2v":
            out32, out = run_pipeline(pub, lambda: obj.generate(
                "cond", img=Image.fromarray(u8, "RGB"), max_area=max_area, frame_num=frames,
                shift=5.0, sample_solver="unipc", sampling_steps=steps, guide_scale=5.0,
                n_prompt="neg", seed=seed, offload_model=False), log)
            z, (oh, ow) = R.ti2v_image_latent(vcfg, vsd, u8, max_area, pixel_dtype=np.float64)
            shape = (48, (frames - 1) // 4 + 1, oh // 16, ow // 16)
        else:
            out32, out = run_pipeline(pub, lambda: obj.generate(
                "cond", img=None, size=(iw, ih), frame_num=frames, shift=5.0,
                sample_solver="unipc", sampling_steps=steps, guide_scale=5.0, n_prompt="neg",
                seed=seed, offload_model=False), log)
            z, shape = None, (48, (frames - 1) // 4 + 1, ih // 16, iw // 16)
        noise = noise_of(seed, shape)
        grid = R.token_grid(shape)
        ts = [R.ti2v_token_timesteps(int(t), grid, z is not None)
              for t in W.schedule(steps, 5.0)[1]]
        pub_ts = [e["t"].reshape(-1).astype(np.float64) for e in log[::2]]
        check(len(ts) == len(pub_ts) and all(np.array_equal(a, b) for a, b in zip(ts, pub_ts)),
              "TI2V %s: per-token timesteps of every step == published, bit for bit" % mode)
        got = R.sample_ti2v(m, noise, z, ctx["cond"], ctx["neg"], steps)
        if z is not None:
            check(np.array_equal(got[:, :1], z), "TI2V i2v: the final latent frame 0 is the "
                  "encoded image itself")
            record("TI2V i2v %dx%d: the published final latent frame 0 vs the reference's "
                   "encoded image" % (ih, iw), rel_l2(z, out[:, :1]), 1e-12)
        what = "TI2V-5B %s loop %dx%d max_area %d F=%d, %d steps" % (mode, ih, iw, max_area,
                                                                   frames, steps)
        record(what + ", published scheduler (float32 coefficients)", rel_l2(got, out32), 1e-5)
        record(what + ", scheduler in float64 (%.0fs)" % (time.time() - t0), rel_l2(got, out), 1e-12)


def check_configs(pub):
    i2v, ti2v = pub.wan_i2v_A14B.i2v_A14B, pub.wan_ti2v_5B.ti2v_5B
    want = [(i2v.dim, 5120), (i2v.ffn_dim, 13824), (i2v.num_heads, 40), (i2v.num_layers, 40),
            (i2v.boundary, R.I2V_A14B["boundary"]), (i2v.sample_shift, R.I2V_A14B["shift"]),
            (i2v.sample_steps, R.I2V_A14B["steps"]),
            (tuple(i2v.sample_guide_scale), R.I2V_A14B["guide_scale"]),
            (tuple(i2v.vae_stride), R.I2V_A14B["vae_stride"]), (i2v.frame_num, 81),
            (ti2v.dim, R.TI2V_5B["dim"]), (ti2v.ffn_dim, R.TI2V_5B["ffn_dim"]),
            (ti2v.num_heads, R.TI2V_5B["heads"]), (ti2v.num_layers, R.TI2V_5B["layers"]),
            (ti2v.sample_shift, R.TI2V_5B["shift"]), (ti2v.sample_steps, R.TI2V_5B["steps"]),
            (ti2v.sample_guide_scale, R.TI2V_5B["guide_scale"]),
            (ti2v.frame_num, R.TI2V_5B["frame_num"]), (ti2v.sample_fps, R.TI2V_5B["fps"]),
            (tuple(ti2v.vae_stride), R.TI2V_5B["vae_stride"])]
    bad = [(a, b) for a, b in want if a != b]
    check(not bad, "i2v_ref's I2V_A14B and TI2V_5B defaults == the published configs (%s)" % bad)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wan22", required=True, help="a checkout of Wan-Video/Wan2.2")
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args(argv)
    import torch
    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(take_seed("i2v_published_parity", a.seed))
    pub = load_published(os.path.abspath(a.wan22))
    check_configs(pub)
    check_vae21(pub, rng)
    check_vae22(pub, rng)
    check_dit(pub, rng)
    check_images(pub, rng)
    check_i2v(pub, rng)
    check_ti2v(pub, rng)
    print("\nrelative L2 per check:")
    for name, err in RESULTS:
        print("  %.2e  %s" % (err, name))
    return finish("i2v_published_parity")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
