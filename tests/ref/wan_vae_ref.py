"""Independent float64 numpy reference of the Wan 2.1 video VAE decoder.

Written from the published decoder (Wan-Video/Wan2.1, wan/modules/vae.py:
WanVAE, WanVAE_.decode, Decoder3d, ResidualBlock, AttentionBlock, Resample,
CausalConv3d, RMS_norm), not from the C decoder, so that the C code can be
checked against something that shares none of its code. ranks/nets/wan_vae/VAE.md
describes the same network in words.

Tensors are unbatched and channel-first: (C, T, H, W). Weights are a dict
keyed by the official state-dict keys (`decoder.*` and `conv2.*`), loaded
strictly: a missing, extra or misshapen tensor is an error.

The decode is a transliteration of the published chunked loop (one latent
frame per decoder call, a feature cache per causal convolution, the "Rep"
marker of the temporal upsampler). `decode_whole` is a second formulation
of the same function on the whole frame sequence at once, without caches;
the self-test (wan_vae_selftest.py) requires the two to agree.

Public entry points:
    Config(...), published_config()
    tensor_shapes(cfg)                 -> {key: shape}, in module order
    random_weights(cfg, rng)           -> {key: float64 array}
    decode(cfg, sd, z)                 -> video (3, 1 + 4 (F - 1), 8 H, 8 W)
    decode_whole(cfg, sd, z)           -> the same, computed another way
"""

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wan_vae_stats as _stats  # noqa: E402

# Frames each causal convolution keeps from the previous chunk.
CACHE_T = 2

# Per-channel latent statistics of WanVAE (z_dim 16), from wan_vae_stats.json;
# the decoder input is z / (1 / std) + mean.
LATENT_MEAN, LATENT_STD = _stats.stats("wan2.1")

# F.normalize's default eps: the norm is clamped below by it.
NORMALIZE_EPS = 1e-12


class RefError(Exception):
    """Weights that do not match the config."""


class Config:
    """The decoder's hyper-parameters. temporal_upsample has one flag per
    resample of the decoder (len(dim_mult) - 1), in decoder order: the
    published WanVAE_ passes temperal_downsample reversed."""

    def __init__(self, dim=96, z_dim=16, dim_mult=(1, 2, 4, 4), num_res_blocks=2,
                 temporal_upsample=(True, True, False)):
        self.dim = int(dim)
        self.z_dim = int(z_dim)
        self.dim_mult = tuple(int(m) for m in dim_mult)
        self.num_res_blocks = int(num_res_blocks)
        self.temporal_upsample = tuple(bool(f) for f in temporal_upsample)
        if len(self.temporal_upsample) != len(self.dim_mult) - 1:
            raise RefError("temporal_upsample needs %d flags" % (len(self.dim_mult) - 1))
        if not 1 <= len(self.dim_mult) <= 4:
            # Decoder3d halves the input width of levels 1, 2 and 3 only.
            raise RefError("dim_mult needs 1 to 4 entries")

    def __repr__(self):
        return ("Config(dim=%d, z_dim=%d, dim_mult=%s, num_res_blocks=%d, "
                "temporal_upsample=%s)" % (self.dim, self.z_dim, list(self.dim_mult),
                                           self.num_res_blocks,
                                           [int(f) for f in self.temporal_upsample]))


def published_config():
    """_video_vae's config: dim 96, z_dim 16, temperal_downsample
    [False, True, True], so the decoder upsamples in time at its first two
    resamples."""
    return Config(96, 16, (1, 2, 4, 4), 2, (False, True, True)[::-1])


# ---------------------------------------------------------------- params

class _Params:
    """Hands tensors to the modules by key. With a state dict it checks each
    shape and records what was used; without one it records the shapes and
    hands out zeros (tensor_shapes)."""

    def __init__(self, sd=None):
        self.sd = sd
        self.shapes = {}

    def get(self, key, shape):
        shape = tuple(int(s) for s in shape)
        if key in self.shapes:
            raise RefError("key %s requested twice" % key)
        self.shapes[key] = shape
        if self.sd is None:
            return np.zeros(shape)
        if key not in self.sd:
            raise RefError("missing tensor %s %s" % (key, shape))
        a = np.asarray(self.sd[key], dtype=np.float64)
        if a.shape != shape:
            raise RefError("tensor %s has shape %s, expected %s" % (key, a.shape, shape))
        return a

    def finish(self):
        if self.sd is not None:
            extra = sorted(set(self.sd) - set(self.shapes))
            if extra:
                raise RefError("unexpected tensors: %s" % ", ".join(extra[:8]))


# ---------------------------------------------------------------- ops

def conv3d_valid(x, w, b):
    """Cross-correlation without padding, stride 1: x (Ci, T, H, W),
    w (Co, Ci, kt, kh, kw), b (Co) -> (Co, T-kt+1, H-kh+1, W-kw+1)."""
    co, ci, kt, kh, kw = w.shape
    T, H, W = x.shape[1] - kt + 1, x.shape[2] - kh + 1, x.shape[3] - kw + 1
    y = np.zeros((co, T, H, W))
    for a in range(kt):
        for c in range(kh):
            for d in range(kw):
                y += np.tensordot(w[:, :, a, c, d], x[:, a:a + T, c:c + H, d:d + W], axes=(1, 0))
    return y + b[:, None, None, None]


def silu(x):
    return x / (1.0 + np.exp(-x))


def upsample_nearest_exact(x, factor=2):
    """nn.Upsample(scale_factor=2, mode='nearest-exact') on the last two
    axes: output index o reads input index min(floor((o + 0.5) * in/out),
    in - 1)."""
    def index(n_in):
        n_out = n_in * factor
        src = np.floor((np.arange(n_out) + 0.5) * (n_in / n_out)).astype(np.int64)
        return np.minimum(src, n_in - 1)

    return x[..., index(x.shape[-2]), :][..., index(x.shape[-1])]


class CausalConv3d:
    """nn.Conv3d whose time padding is 2 * padding[0] frames before and
    none after; with a cache, the cached frames stand in for that many of
    the zero frames."""

    def __init__(self, p, key, ci, co, kernel, padding):
        kernel = (kernel,) * 3 if isinstance(kernel, int) else tuple(kernel)
        padding = (padding,) * 3 if isinstance(padding, int) else tuple(padding)
        self.w = p.get(key + ".weight", (co, ci) + kernel)
        self.b = p.get(key + ".bias", (co,))
        self.pad = padding

    def __call__(self, x, cache_x=None):
        pt, ph, pw = self.pad
        front = 2 * pt
        if cache_x is not None and front > 0:
            x = np.concatenate([cache_x, x], axis=1)
            front -= cache_x.shape[1]
        x = np.pad(x, ((0, 0), (front, 0), (ph, ph), (pw, pw)))
        return conv3d_valid(x, self.w, self.b)


class Conv2d:
    """nn.Conv2d applied to every frame of (C, T, H, W)."""

    def __init__(self, p, key, ci, co, k, padding):
        self.w = p.get(key + ".weight", (co, ci, k, k))
        self.b = p.get(key + ".bias", (co,))
        self.pad = padding

    def __call__(self, x):
        q = self.pad
        x = np.pad(x, ((0, 0), (0, 0), (q, q), (q, q)))
        return conv3d_valid(x, self.w[:, :, None], self.b)


class RMSNorm:
    """RMS_norm: F.normalize over channels * sqrt(dim) * gamma (no bias).
    images=True stores gamma as (dim, 1, 1), images=False as (dim, 1, 1, 1)."""

    def __init__(self, p, key, dim, images):
        shape = (dim, 1, 1) if images else (dim, 1, 1, 1)
        self.gamma = p.get(key + ".gamma", shape).reshape(dim)
        self.scale = math.sqrt(dim)

    def __call__(self, x):
        norm = np.sqrt(np.sum(x * x, axis=0, keepdims=True))
        return x / np.maximum(norm, NORMALIZE_EPS) * self.scale * self.gamma[:, None, None, None]


def _cached_call(conv, x, feat_cache, feat_idx):
    """The published pattern around every cached CausalConv3d: remember the
    last CACHE_T input frames (with the previous chunk's last frame in front
    when this chunk has fewer), run the conv with the old cache, store."""
    idx = feat_idx[0]
    cache_x = x[:, -CACHE_T:].copy()
    if cache_x.shape[1] < 2 and feat_cache[idx] is not None:
        cache_x = np.concatenate([feat_cache[idx][:, -1:], cache_x], axis=1)
    x = conv(x, feat_cache[idx])
    feat_cache[idx] = cache_x
    feat_idx[0] += 1
    return x


class ResidualBlock:
    def __init__(self, p, key, in_dim, out_dim):
        self.norm1 = RMSNorm(p, key + ".residual.0", in_dim, images=False)
        self.conv1 = CausalConv3d(p, key + ".residual.2", in_dim, out_dim, 3, 1)
        self.norm2 = RMSNorm(p, key + ".residual.3", out_dim, images=False)
        # residual.5 is Dropout(0): the identity at inference.
        self.conv2 = CausalConv3d(p, key + ".residual.6", out_dim, out_dim, 3, 1)
        self.shortcut = (CausalConv3d(p, key + ".shortcut", in_dim, out_dim, 1, 0)
                         if in_dim != out_dim else None)

    def __call__(self, x, feat_cache=None, feat_idx=None):
        h = self.shortcut(x) if self.shortcut is not None else x
        for layer in (self.norm1, silu, self.conv1, self.norm2, silu, self.conv2):
            if isinstance(layer, CausalConv3d) and feat_cache is not None:
                x = _cached_call(layer, x, feat_cache, feat_idx)
            else:
                x = layer(x)
        return x + h


def attention(q, k, v):
    """Single-head softmax attention, scale 1/sqrt(d): q (Lq, d), k, v (Lk, d)."""
    s = q @ k.T / math.sqrt(q.shape[1])
    s = np.exp(s - s.max(axis=1, keepdims=True))
    return (s / s.sum(axis=1, keepdims=True)) @ v


class AttentionBlock:
    """Per frame: tokens are the H*W positions, one head of width dim."""

    def __init__(self, p, key, dim):
        self.dim = dim
        self.norm = RMSNorm(p, key + ".norm", dim, images=True)
        self.to_qkv = Conv2d(p, key + ".to_qkv", dim, 3 * dim, 1, 0)
        self.proj = Conv2d(p, key + ".proj", dim, dim, 1, 0)

    def __call__(self, x):
        c, t, h, w = x.shape
        qkv = self.to_qkv(self.norm(x)).reshape(3 * c, t, h * w)
        out = np.empty((c, t, h * w))
        for f in range(t):
            tok = qkv[:, f].T  # (hw, 3c): q, k, v are its three column blocks
            out[:, f] = attention(tok[:, :c], tok[:, c:2 * c], tok[:, 2 * c:]).T
        return self.proj(out.reshape(c, t, h, w)) + x


class Resample:
    """upsample2d: nearest-exact 2x in H and W, then Conv2d(dim, dim/2, 3).
    upsample3d: first a (3, 1, 1) causal conv to 2*dim channels whose two
    halves become two consecutive frames, except in the first chunk."""

    def __init__(self, p, key, dim, mode):
        assert mode in ("upsample2d", "upsample3d")
        self.mode = mode
        self.dim = dim
        self.conv = Conv2d(p, key + ".resample.1", dim, dim // 2, 3, 1)
        self.time_conv = (CausalConv3d(p, key + ".time_conv", dim, 2 * dim, (3, 1, 1), (1, 0, 0))
                          if mode == "upsample3d" else None)

    @staticmethod
    def unfold_time(x):
        """(2c, t, h, w) -> (c, 2t, h, w): frame 2j+k is half k of frame j."""
        c2, t, h, w = x.shape
        c = c2 // 2
        return np.stack((x[:c], x[c:]), axis=2).reshape(c, 2 * t, h, w)

    def spatial(self, x):
        return self.conv(upsample_nearest_exact(x))

    def __call__(self, x, feat_cache=None, feat_idx=None):
        if self.mode == "upsample3d" and feat_cache is not None:
            idx = feat_idx[0]
            if feat_cache[idx] is None:
                feat_cache[idx] = "Rep"
                feat_idx[0] += 1
            else:
                rep = isinstance(feat_cache[idx], str)
                cache_x = x[:, -CACHE_T:].copy()
                if cache_x.shape[1] < 2 and not rep:
                    cache_x = np.concatenate([feat_cache[idx][:, -1:], cache_x], axis=1)
                if cache_x.shape[1] < 2 and rep:
                    cache_x = np.concatenate([np.zeros_like(cache_x), cache_x], axis=1)
                x = self.time_conv(x) if rep else self.time_conv(x, feat_cache[idx])
                feat_cache[idx] = cache_x
                feat_idx[0] += 1
                x = self.unfold_time(x)
        return self.spatial(x)


class Decoder3d:
    def __init__(self, p, cfg):
        dim, mult = cfg.dim, cfg.dim_mult
        dims = [dim * u for u in (mult[-1],) + mult[::-1]]
        self.conv1 = CausalConv3d(p, "decoder.conv1", cfg.z_dim, dims[0], 3, 1)
        self.middle = [ResidualBlock(p, "decoder.middle.0", dims[0], dims[0]),
                       AttentionBlock(p, "decoder.middle.1", dims[0]),
                       ResidualBlock(p, "decoder.middle.2", dims[0], dims[0])]
        # attn_scales is [] in the published config: no attention here.
        self.upsamples = []
        for i, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
            if i in (1, 2, 3):
                in_dim = in_dim // 2
            for _ in range(cfg.num_res_blocks + 1):
                key = "decoder.upsamples.%d" % len(self.upsamples)
                self.upsamples.append(ResidualBlock(p, key, in_dim, out_dim))
                in_dim = out_dim
            if i != len(mult) - 1:
                mode = "upsample3d" if cfg.temporal_upsample[i] else "upsample2d"
                key = "decoder.upsamples.%d" % len(self.upsamples)
                self.upsamples.append(Resample(p, key, out_dim, mode))
        self.head_norm = RMSNorm(p, "decoder.head.0", out_dim, images=False)
        self.head_conv = CausalConv3d(p, "decoder.head.2", out_dim, 3, 3, 1)

    def n_causal_convs(self):
        """count_conv3d: every CausalConv3d module, shortcuts included."""
        n = 1 + 1  # conv1, head
        for m in self.middle + self.upsamples:
            if isinstance(m, ResidualBlock):
                n += 2 + (m.shortcut is not None)
            elif isinstance(m, Resample):
                n += m.time_conv is not None
        return n

    def __call__(self, x, feat_cache, feat_idx):
        x = _cached_call(self.conv1, x, feat_cache, feat_idx)
        for m in self.middle:
            x = m(x, feat_cache, feat_idx) if isinstance(m, ResidualBlock) else m(x)
        for m in self.upsamples:
            x = m(x, feat_cache, feat_idx)
        x = silu(self.head_norm(x))
        return _cached_call(self.head_conv, x, feat_cache, feat_idx)

    def whole(self, x):
        """The decoder on the whole frame sequence, no caches: every causal
        conv sees two zero frames before the first; an upsample3d passes the
        first frame through and time-convolves the others as a sequence of
        their own (the first frame never enters its time conv)."""
        x = self.conv1(x)
        for m in self.middle + self.upsamples:
            if isinstance(m, Resample) and m.mode == "upsample3d":
                rest = m.unfold_time(m.time_conv(x[:, 1:]))
                x = m.spatial(np.concatenate([x[:, :1], rest], axis=1))
            else:
                x = m(x)
        return self.head_conv(silu(self.head_norm(x)))


def _build(cfg, sd):
    p = _Params(sd)
    conv2 = CausalConv3d(p, "conv2", cfg.z_dim, cfg.z_dim, 1, 0)
    dec = Decoder3d(p, cfg)
    p.finish()
    return conv2, dec, p.shapes


def tensor_shapes(cfg):
    """{official key: shape} of every decoder tensor (decoder.* and conv2.*),
    in module order (conv2 first)."""
    return _build(cfg, None)[2]


def random_weights_of(shapes, rng):
    """Random weights of plausible scale for {key: shape}, in its order, as
    every Wan VAE reference draws them (wan_vae_enc_ref.py, wan_vae22_ref.py):
    conv weights ~ U(-1, 1)/sqrt(fan_in), biases ~ U(-0.2, 0.2), norm gammas
    ~ U(0.5, 1.5)."""
    sd = {}
    for key, shape in shapes.items():
        if key.endswith(".gamma"):
            sd[key] = rng.uniform(0.5, 1.5, shape)
        elif key.endswith(".bias"):
            sd[key] = rng.uniform(-0.2, 0.2, shape)
        else:
            fan_in = int(np.prod(shape[1:]))
            sd[key] = rng.uniform(-1.0, 1.0, shape) / math.sqrt(fan_in)
    return sd


def random_weights(cfg, rng):
    """Random weights of every decoder tensor (random_weights_of)."""
    return random_weights_of(tensor_shapes(cfg), rng)


def unnormalize(z):
    """WanVAE.decode's scale: z / (1 / std) + mean, per channel."""
    if z.shape[0] != len(LATENT_MEAN):
        raise RefError("the published latent statistics have 16 channels, z has %d" % z.shape[0])
    inv_std = 1.0 / np.asarray(LATENT_STD)
    return z / inv_std[:, None, None, None] + np.asarray(LATENT_MEAN)[:, None, None, None]


def decode(cfg, sd, z):
    """Normalised latents z (z_dim, F, H, W) -> video (3, T, 8H, 8W) in
    [-1, 1], T = 1 + 4 (F - 1) for the published config: WanVAE.decode."""
    conv2, dec, _ = _build(cfg, sd)
    x = conv2(unnormalize(np.asarray(z, dtype=np.float64)))
    feat_cache = [None] * dec.n_causal_convs()
    out = []
    for i in range(x.shape[1]):
        feat_idx = [0]
        out.append(dec(x[:, i:i + 1], feat_cache, feat_idx))
    return np.clip(np.concatenate(out, axis=1), -1.0, 1.0)


def decode_whole(cfg, sd, z):
    """decode() without chunks or caches (Decoder3d.whole)."""
    conv2, dec, _ = _build(cfg, sd)
    x = conv2(unnormalize(np.asarray(z, dtype=np.float64)))
    return np.clip(dec.whole(x), -1.0, 1.0)


def out_frames(cfg, F):
    """Video frames from F latent frames: 1 + 2^(temporal upsamples) (F - 1)."""
    return 1 + (2 ** sum(cfg.temporal_upsample)) * (F - 1)
