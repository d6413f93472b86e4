"""float64 reference of Wan 2.2 image-to-video: the I2V-A14B conditioning
and two-expert loop, and TI2V-5B's image frame with per-token timesteps.

Written from the published code (Wan-Video/Wan2.2: wan/image2video.py
WanI2V.generate; wan/textimage2video.py WanTI2V.t2v and .i2v;
wan/utils/utils.py masks_like; wan/modules/model.py WanModel.forward,
WanAttentionBlock, Head; wan/configs/wan_i2v_A14B.py, wan_ti2v_5B.py), not
from any C code. I2V.md describes the same steps in words.

The DiT is wan_ref.py's, whose forward already takes any in_dim and
out_dim; what this file adds is the timestep per token (Wan 2.2's DiT takes
t of shape [B, L]: every token its own time embedding and modulation), the
image conditioning of each pipeline and the two sampling loops. The VAEs
are wan_vae_enc_ref.py (Wan 2.1, I2V-A14B) and wan_vae22_ref.py (Wan 2.2,
TI2V-5B); the image preparation is image_ref.py.

Public entry points:
    I2V_A14B, TI2V_5B                       the published defaults
    dit_config(...), random_dit(cfg, rng), state_dict(model)
    forward_tokens(model, latent, t_tok, ctx)   per-token timesteps
    i2v_mask(frame_num, lat_h, lat_w)       (4, F, lat_h, lat_w)
    i2v_condition(vae_cfg, vae_sd, u8, max_area, frame_num)
    sample_i2v(high, low, noise, y, context, context_null, steps, ...)
    ti2v_token_timesteps(t, grid, image)
    ti2v_image_latent(vae_cfg, vae_sd, u8, max_area)
    sample_ti2v(model, noise, z, context, context_null, steps, ...)
"""

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import image_ref as I  # noqa: E402
import wan22_ref as A  # noqa: E402
import wan_ref as W  # noqa: E402
import wan_vae22_ref as V  # noqa: E402
import wan_vae_enc_ref as E  # noqa: E402

RefError = W.RefError

# The published configurations (wan/configs/wan_i2v_A14B.py, wan_ti2v_5B.py,
# shared_config.py; in_dim/out_dim/model_type from each checkpoint's
# config.json, as the shapes of patch_embedding and head.head also give;
# max_area from generate.py's --size, whose default 1280*720 I2V-A14B
# accepts and TI2V-5B refuses, so TI2V runs with 1280*704).
I2V_A14B = dict(dim=5120, ffn_dim=13824, heads=40, layers=40, in_dim=36, out_dim=16,
                freq_dim=256, text_len=512, text_dim=4096, eps=1e-6, patch=(1, 2, 2),
                vae="wan2.1", vae_stride=(4, 8, 8), boundary=0.900, shift=5.0, steps=40,
                guide_scale=(3.5, 3.5),   # (low-noise, high-noise) as published
                frame_num=81, fps=16, max_area=720 * 1280, sampler="unipc")
TI2V_5B = dict(dim=3072, ffn_dim=14336, heads=24, layers=30, in_dim=48, out_dim=48,
               freq_dim=256, text_len=512, text_dim=4096, eps=1e-6, patch=(1, 2, 2),
               vae="wan2.2", vae_stride=(4, 16, 16), shift=5.0, steps=50, guide_scale=5.0,
               frame_num=121, fps=24, max_area=704 * 1280, size=(1280, 704),
               sampler="unipc")


# ---------------------------------------------------------------- the DiT

def dit_config(dim, ffn_dim, heads, layers, in_dim, out_dim, text_len=512, text_dim=4096,
               freq_dim=256, eps=1e-6):
    return dict(dim=dim, ffn_dim=ffn_dim, heads=heads, layers=layers, in_dim=in_dim,
                out_dim=out_dim, patch=(1, 2, 2), text_len=text_len, text_dim=text_dim,
                freq_dim=freq_dim, eps=eps)


def random_dit(cfg, rng):
    """A wan_ref Model with random weights of plausible scale: linear and
    conv weights N(0, 1/fan_in), biases N(0, 0.1^2), norm gains 1 + N(0,
    0.1^2), modulation tables N(0, 1/dim) as the published init draws them."""
    sh = W.expected_shapes(cfg)

    def draw(key):
        shape = sh[key]
        if key.endswith("modulation"):
            return rng.standard_normal(shape) / math.sqrt(cfg["dim"])
        if "norm" in key:
            return 1.0 + 0.1 * rng.standard_normal(shape)
        if key.endswith(".bias"):
            return 0.1 * rng.standard_normal(shape)
        return rng.standard_normal(shape) / math.sqrt(np.prod(shape[1:]))

    embed = {k: draw(k) for k in W._EMBED_KEYS}
    blocks = [{k: draw(k) for k in W._BLOCK_KEYS} for _ in range(cfg["layers"])]
    head = {k: draw(k) for k in W._HEAD_KEYS}
    return W.Model(cfg, embed, blocks, head)


def state_dict(model):
    """{official checkpoint key: array} of a wan_ref Model."""
    sd = dict(model.embed)
    for n, blk in enumerate(model.blocks):
        sd.update({"blocks.%d.%s" % (n, k): v for k, v in blk.items()})
    sd.update(model.head)
    return sd


def embed_time_tokens(model, t_tok):
    """Per token: the sinusoid of its timestep (float64, rounded to fp32),
    time_embedding -> e [L, D], time_projection -> e0 [L, 6, D]."""
    em, d = model.embed, model.cfg["dim"]
    s = np.stack([W.time_sinusoid(float(t), model.cfg["freq_dim"]) for t in t_tok])
    e = W.linear(W.silu(W.linear(s, em["time_embedding.0.weight"], em["time_embedding.0.bias"])),
                 em["time_embedding.2.weight"], em["time_embedding.2.bias"])
    e0 = W.linear(W.silu(e), em["time_projection.1.weight"], em["time_projection.1.bias"])
    return e, e0.reshape(-1, 6, d)


def block_tokens(blk, x, e0, ctx, ang, cfg):
    """WanAttentionBlock with a modulation row per token: m = modulation +
    e0 [L, 6, D]; chunk j of every token is m[:, j]."""
    eps, heads = cfg["eps"], cfg["heads"]
    m = blk["modulation"] + e0                                  # [1,6,D] + [L,6,D]
    sh1, sc1, g1, sh2, sc2, g2 = (m[:, j] for j in range(6))   # each [L, D]
    h = W.layer_norm(x, eps) * (1.0 + sc1) + sh1
    q = W.rms_norm(W.linear(h, blk["self_attn.q.weight"], blk["self_attn.q.bias"]),
                   blk["self_attn.norm_q.weight"], eps)
    k = W.rms_norm(W.linear(h, blk["self_attn.k.weight"], blk["self_attn.k.bias"]),
                   blk["self_attn.norm_k.weight"], eps)
    v = W.linear(h, blk["self_attn.v.weight"], blk["self_attn.v.bias"])
    a = W.attention(W.rope_apply(q, ang, heads), W.rope_apply(k, ang, heads), v, heads)
    x = x + W.linear(a, blk["self_attn.o.weight"], blk["self_attn.o.bias"]) * g1
    y = W.layer_norm(x, eps, blk["norm3.weight"], blk["norm3.bias"])
    q = W.rms_norm(W.linear(y, blk["cross_attn.q.weight"], blk["cross_attn.q.bias"]),
                   blk["cross_attn.norm_q.weight"], eps)
    k = W.rms_norm(W.linear(ctx, blk["cross_attn.k.weight"], blk["cross_attn.k.bias"]),
                   blk["cross_attn.norm_k.weight"], eps)
    v = W.linear(ctx, blk["cross_attn.v.weight"], blk["cross_attn.v.bias"])
    x = x + W.linear(W.attention(q, k, v, heads), blk["cross_attn.o.weight"],
                     blk["cross_attn.o.bias"])
    h = W.layer_norm(x, eps) * (1.0 + sc2) + sh2
    f = W.linear(W.gelu_tanh(W.linear(h, blk["ffn.0.weight"], blk["ffn.0.bias"])),
                 blk["ffn.2.weight"], blk["ffn.2.bias"])
    return x + f * g2


def forward_tokens(model, latent, t_tok, ctx):
    """The Wan 2.2 DiT with one timestep per token. latent [in_dim, F, H, W]
    (for I2V the 16 noisy channels followed by the 20 of y), t_tok [L] in
    token order (f, h, w), ctx the embedded text [text_len, D]. Returns the
    velocity [out_dim, F, H, W]."""
    cfg = model.cfg
    latent = W.check_latent(model, latent)
    tok, grid = W.patchify(latent, cfg["patch"])
    t_tok = np.asarray(t_tok, dtype=np.float64).reshape(-1)
    if t_tok.shape[0] != tok.shape[0]:
        raise RefError("%d timesteps for %d tokens" % (t_tok.shape[0], tok.shape[0]))
    em = model.embed
    x = tok @ em["patch_embedding.weight"].reshape(cfg["dim"], -1).T + em["patch_embedding.bias"]
    e, e0 = embed_time_tokens(model, t_tok)
    ang = W.rope_angles(grid, cfg["dim"] // cfg["heads"])
    for blk in model.blocks:
        x = block_tokens(blk, x, e0, ctx, ang, cfg)
    hd = model.head
    m = hd["head.modulation"] + e[:, None, :]                   # [L, 2, D]
    y = W.layer_norm(x, cfg["eps"]) * (1.0 + m[:, 1]) + m[:, 0]
    out = W.linear(y, hd["head.head.weight"], hd["head.head.bias"])
    return W.unpatchify(out, grid, cfg["patch"], cfg["out_dim"])


def token_grid(latent_shape, patch=(1, 2, 2)):
    _, f, h, w = latent_shape
    return (f // patch[0], h // patch[1], w // patch[2])


# ---------------------------------------------------------------- I2V-A14B

def i2v_mask(frame_num, lat_h, lat_w):
    """The mask channels of y: 4 x (1 + (frame_num - 1) / 4) x lat_h x lat_w.
    Published: a per-frame mask (frame 0 one, the rest zero), frame 0
    repeated 4 times, the frame_num + 3 rows regrouped 4 per latent frame
    and moved to the channel axis; channel c of latent frame f is row 4f + c,
    so it is 1 exactly in latent frame 0 (all 4 channels) and 0 elsewhere."""
    if frame_num < 1 or (frame_num - 1) % 4:
        raise RefError("frame_num %d is not 4k + 1" % frame_num)
    fl = (frame_num - 1) // 4 + 1
    m = np.zeros((4, fl, lat_h, lat_w))
    m[:, 0] = 1.0
    return m


def i2v_condition(vae_cfg, vae_sd, u8, max_area, frame_num, pixel_dtype=np.float32):
    """WanI2V.generate's y [20, F, lat_h, lat_w] for an (H, W, 3) uint8 image:
    the image to [-1, 1]; the latent grid from max_area and h / w; bicubic
    resize to (8 lat_h, 8 lat_w); frame_num - 1 zero frames after it; the
    Wan 2.1 VAE encoding; the 4 mask channels in front.
    Returns (y, resized image (3, h, w))."""
    img = I.to_unit(u8, pixel_dtype)
    lat_h, lat_w = I.i2v_grid(img.shape[1], img.shape[2], max_area)
    h, w = 8 * lat_h, 8 * lat_w
    first = I.bicubic_resize(img, h, w)
    video = np.concatenate([first[:, None], np.zeros((3, frame_num - 1, h, w))], axis=1)
    lat = E.encode(vae_cfg, vae_sd, video)
    y = np.concatenate([i2v_mask(frame_num, lat_h, lat_w), lat], axis=0)
    return y, first


def sample_i2v(high, low, noise, y, context, context_null, steps,
               guide_scale=I2V_A14B["guide_scale"], shift=I2V_A14B["shift"],
               boundary_ratio=I2V_A14B["boundary"], sampler="unipc", num_train_timesteps=1000):
    """WanI2V.generate's loop: the two-expert loop of wan22_ref.sample_a14b
    with each model seeing [x; y] (36 channels). Returns (latents, expert
    per step)."""
    return A.sample_a14b(high, low, noise, context, context_null, steps, guide_scale, shift,
                         boundary_ratio, sampler, num_train_timesteps, y=y)


# ---------------------------------------------------------------- TI2V-5B

def ti2v_token_timesteps(t, grid, image):
    """The timestep of every token, in token order: masks_like's mask2 is 1
    everywhere, except 0 in latent frame 0 when an image is given; its
    channel 0 sampled at every second row and column (the patch grid) times
    t. So with an image, tokens of latent frame 0 get 0 and all others t."""
    f, h, w = grid
    ts = np.full((f, h, w), float(t))
    if image:
        ts[0] = 0.0
    return ts.reshape(-1)


def ti2v_image_latent(vae_cfg, vae_sd, u8, max_area=TI2V_5B["max_area"], pixel_dtype=np.float32):
    """WanTI2V.i2v's z: the image resized and cropped (image_ref.ti2v_image),
    to [-1, 1], encoded alone (T = 1) by the Wan 2.2 VAE: (48, 1, oh/16, ow/16).
    Returns (z, (oh, ow))."""
    img = I.ti2v_image(u8, max_area)
    x = I.to_unit(img, pixel_dtype)
    return V.encode(vae_cfg, vae_sd, x[:, None]), img.shape[:2]


def sample_ti2v(model, noise, z, context, context_null, steps, guide_scale=TI2V_5B["guide_scale"],
                shift=TI2V_5B["shift"], sampler="unipc"):
    """WanTI2V's loop. Text-to-video when z is None; image-to-video
    otherwise: latent frame 0 is set to z before the first step and again
    after every scheduler step (the published (1 - mask2) z + mask2 x, which
    for a 0/1 mask is that copy), and the tokens of frame 0 get timestep 0.
    Returns the final latents."""
    sigmas, timesteps = W.schedule(steps, shift)
    s = W.make_sampler(sampler, sigmas)
    ctx_c, ctx_u = W.embed_text(model, context), W.embed_text(model, context_null)
    x = np.array(noise, dtype=np.float64)
    if z is not None:
        x[:, :1] = z
    grid = token_grid(x.shape, model.cfg["patch"])
    for i in range(steps):
        t = int(timesteps[i])
        t_tok = ti2v_token_timesteps(t, grid, z is not None)
        vc = forward_tokens(model, x, t_tok, ctx_c)
        vu = forward_tokens(model, x, t_tok, ctx_u)
        x = s.step(vu + guide_scale * (vc - vu), x)
        if z is not None:
            x[:, :1] = z
    return x
