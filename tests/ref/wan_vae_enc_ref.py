"""Independent float64 numpy reference of the Wan 2.1 video VAE encoder.

Written from the published encoder (Wan-Video/Wan2.2 wan/modules/vae2_1.py,
the same file as Wan-Video/Wan2.1 wan/modules/vae.py: Encoder3d, Resample in
its downsample2d and downsample3d modes, WanVAE_.encode, Wan2_1_VAE.encode),
not from any C code. I2V.md ("The Wan 2.1 VAE encoder") describes the same
network in words. The pieces the encoder shares with the decoder (causal
convolution, RMS norm, residual and attention blocks, the cache pattern) are
wan_vae_ref.py's.

Tensors are unbatched and channel-first, (C, T, H, W). Weights are a dict
keyed by the official state-dict keys (`encoder.*` and `conv1.*`), loaded
strictly.

`encode` follows the published chunk loop: the first frame alone, then
chunks of 4 frames, one feature cache per causal convolution, the
downsample3d time convolution fed by the last frame of the previous chunk.
`encode_whole` computes the same function on the whole frame sequence at
once without caches; the self-test (wan_vae_enc_selftest.py) requires the
two to agree, and tests/ref/i2v_published_parity.py compares `encode` with
the published WanVAE_.encode.

Public entry points:
    Config(...), published_config()
    tensor_shapes(cfg)              -> {key: shape}, in module order
    random_weights(cfg, rng)        -> {key: float64 array}
    encode(cfg, sd, video)          -> normalised latents (z_dim, 1 + (T-1)/4, H/8, W/8)
    encode_whole(cfg, sd, video)    -> the same, computed another way
    latent_shape(cfg, T, H, W)
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wan_vae_ref as D  # noqa: E402
import wan_vae_stats as S  # noqa: E402

RefError = D.RefError

# Frames per encoder call after the first (which takes frame 0 alone).
CHUNK = 4


class Config:
    """The encoder's hyper-parameters. temporal_downsample has one flag per
    resample of the encoder (len(dim_mult) - 1), in encoder order; the
    published _video_vae passes (False, True, True)."""

    def __init__(self, dim=96, z_dim=16, dim_mult=(1, 2, 4, 4), num_res_blocks=2,
                 temporal_downsample=(False, True, True), family="wan2.1"):
        self.dim = int(dim)
        self.z_dim = int(z_dim)
        self.dim_mult = tuple(int(m) for m in dim_mult)
        self.num_res_blocks = int(num_res_blocks)
        self.temporal_downsample = tuple(bool(f) for f in temporal_downsample)
        self.family = family
        if len(self.temporal_downsample) != len(self.dim_mult) - 1:
            raise RefError("temporal_downsample needs %d flags" % (len(self.dim_mult) - 1))
        if sum(self.temporal_downsample) > 2:
            # The published loop feeds chunks of 4 frames: a third halving
            # would leave single-frame chunks that a stride-2 conv cannot take.
            raise RefError("at most 2 temporal downsamples (chunks are 4 frames)")

    def __repr__(self):
        return ("Config(dim=%d, z_dim=%d, dim_mult=%s, num_res_blocks=%d, "
                "temporal_downsample=%s)" % (self.dim, self.z_dim, list(self.dim_mult),
                                             self.num_res_blocks,
                                             [int(f) for f in self.temporal_downsample]))

    def time_factor(self):
        return 2 ** sum(self.temporal_downsample)

    def space_factor(self):
        return 2 ** (len(self.dim_mult) - 1)


def published_config():
    """Wan2_1_VAE: dim 96, z_dim 16, dim_mult (1, 2, 4, 4), 2 residual blocks
    per level, temporal downsampling at the second and third resample."""
    return Config(96, 16, (1, 2, 4, 4), 2, (False, True, True))


# ---------------------------------------------------------------- pieces

def strided_conv2d(x, w, b):
    """The downsample resamples' spatial step on every frame of (C, T, H, W):
    ZeroPad2d((0, 1, 0, 1)) (one zero column on the right, one zero row at
    the bottom), then a 3x3 convolution with stride 2 and no padding. Output
    size floor((H + 1 - 3) / 2) + 1 = floor(H / 2) for H >= 2."""
    xp = np.pad(x, ((0, 0), (0, 0), (0, 1), (0, 1)))
    co = w.shape[0]
    ho = (xp.shape[2] - 3) // 2 + 1
    wo = (xp.shape[3] - 3) // 2 + 1
    if ho < 1 or wo < 1:
        raise RefError("a stride-2 3x3 convolution needs at least 2x2 pixels, got %dx%d"
                       % (x.shape[2], x.shape[3]))
    y = np.zeros((co, x.shape[1], ho, wo))
    for c in range(3):
        for d in range(3):
            win = xp[:, :, c:c + 2 * (ho - 1) + 1:2, d:d + 2 * (wo - 1) + 1:2]
            y += np.tensordot(w[:, :, c, d], win, axes=(1, 0))
    return y + b[:, None, None, None]


def time_conv_stride2(x, w, b):
    """A (3, 1, 1) convolution with stride 2 in time and no padding:
    output frame j reads input frames 2j, 2j + 1, 2j + 2."""
    n = (x.shape[1] - 3) // 2 + 1
    y = np.zeros((w.shape[0], n, x.shape[2], x.shape[3]))
    for a in range(3):
        y += np.tensordot(w[:, :, a, 0, 0], x[:, a:a + 2 * (n - 1) + 1:2], axes=(1, 0))
    return y + b[:, None, None, None]


class Downsample:
    """Resample in mode downsample2d or downsample3d: the stride-2 spatial
    convolution `resample.1` (dim -> dim) on every frame; downsample3d then
    halves the frame count with `time_conv`, a (3, 1, 1) convolution of
    stride 2 (dim -> dim), except in the first chunk, whose frame passes
    through (its spatially downsampled self is cached instead)."""

    def __init__(self, p, key, dim, mode):
        assert mode in ("downsample2d", "downsample3d")
        self.mode = mode
        self.w = p.get(key + ".resample.1.weight", (dim, dim, 3, 3))
        self.b = p.get(key + ".resample.1.bias", (dim,))
        if mode == "downsample3d":
            self.tw = p.get(key + ".time_conv.weight", (dim, dim, 3, 1, 1))
            self.tb = p.get(key + ".time_conv.bias", (dim,))

    def spatial(self, x):
        return strided_conv2d(x, self.w, self.b)

    def __call__(self, x, feat_cache, feat_idx):
        x = self.spatial(x)
        if self.mode == "downsample3d":
            idx = feat_idx[0]
            if feat_cache[idx] is None:
                feat_cache[idx] = x.copy()
            else:
                prev = feat_cache[idx][:, -1:]
                feat_cache[idx] = x[:, -1:].copy()
                x = time_conv_stride2(np.concatenate([prev, x], axis=1), self.tw, self.tb)
            feat_idx[0] += 1
        return x

    def whole(self, x):
        """All frames at once: frame 0 passes (downsampled in space), frame
        j >= 1 is the time conv over frames 2j - 2, 2j - 1, 2j."""
        x = self.spatial(x)
        if self.mode == "downsample3d" and x.shape[1] > 1:
            x = np.concatenate([x[:, :1], time_conv_stride2(x, self.tw, self.tb)], axis=1)
        return x


class Encoder3d:
    def __init__(self, p, cfg):
        dims = [cfg.dim * u for u in (1,) + cfg.dim_mult]
        self.conv1 = D.CausalConv3d(p, "encoder.conv1", 3, dims[0], 3, 1)
        self.downsamples = []
        for i, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
            for _ in range(cfg.num_res_blocks):
                key = "encoder.downsamples.%d" % len(self.downsamples)
                self.downsamples.append(D.ResidualBlock(p, key, in_dim, out_dim))
                in_dim = out_dim
            if i != len(cfg.dim_mult) - 1:
                mode = "downsample3d" if cfg.temporal_downsample[i] else "downsample2d"
                key = "encoder.downsamples.%d" % len(self.downsamples)
                self.downsamples.append(Downsample(p, key, out_dim, mode))
        # attn_scales is [] in the published config: no attention before the middle.
        self.middle = [D.ResidualBlock(p, "encoder.middle.0", out_dim, out_dim),
                       D.AttentionBlock(p, "encoder.middle.1", out_dim),
                       D.ResidualBlock(p, "encoder.middle.2", out_dim, out_dim)]
        self.head_norm = D.RMSNorm(p, "encoder.head.0", out_dim, images=False)
        self.head_conv = D.CausalConv3d(p, "encoder.head.2", out_dim, 2 * cfg.z_dim, 3, 1)

    def __call__(self, x, feat_cache, feat_idx):
        x = D._cached_call(self.conv1, x, feat_cache, feat_idx)
        for m in self.downsamples:
            x = m(x, feat_cache, feat_idx)
        for m in self.middle:
            x = m(x, feat_cache, feat_idx) if isinstance(m, D.ResidualBlock) else m(x)
        x = D.silu(self.head_norm(x))
        return D._cached_call(self.head_conv, x, feat_cache, feat_idx)

    def whole(self, x):
        """Every cached conv is the causal conv over the whole sequence (two
        zero frames in front); each downsample3d as Downsample.whole."""
        x = self.conv1(x)
        for m in self.downsamples:
            x = m.whole(x) if isinstance(m, Downsample) else m(x)
        for m in self.middle:
            x = m(x)
        return self.head_conv(D.silu(self.head_norm(x)))


class _Cache(dict):
    """feat_cache: a slot per cached conv, in the order they run; empty is None."""

    def __missing__(self, key):
        return None


def _build(cfg, sd):
    p = D._Params(sd)
    enc = Encoder3d(p, cfg)
    conv1 = D.CausalConv3d(p, "conv1", 2 * cfg.z_dim, 2 * cfg.z_dim, 1, 0)
    p.finish()
    return enc, conv1, p.shapes


def tensor_shapes(cfg):
    """{official key: shape} of every encoder tensor (encoder.* and conv1.*)."""
    return _build(cfg, None)[2]


def random_weights(cfg, rng):
    """The same kind of random weights as wan_vae_ref.random_weights."""
    return D.random_weights_of(tensor_shapes(cfg), rng)


def check_video(cfg, video):
    """video as float64, (3, T, H, W) with T = 1 + 4k (every Wan VAE
    encoder's input; wan_vae22_ref.py checks its sizes beyond)."""
    video = np.asarray(video, dtype=np.float64)
    if video.ndim != 4 or video.shape[0] != 3:
        raise RefError("video must be (3, T, H, W), got %s" % (video.shape,))
    t = video.shape[1]
    if (t - 1) % CHUNK:
        # The published loop takes 1 + (T - 1) // 4 chunks and drops the rest.
        raise RefError("T = %d frames is not 1 + 4k" % t)
    return video


def encode_chunks(enc, video):
    """enc over video as WanVAE_.encode calls it: frame 0 alone, then chunks
    of CHUNK frames, one cache throughout; the outputs along time."""
    feat_cache = _Cache()
    outs = []
    for i in range(1 + (video.shape[1] - 1) // CHUNK):
        chunk = video[:, :1] if i == 0 else video[:, 1 + CHUNK * (i - 1):1 + CHUNK * i]
        outs.append(enc(chunk, feat_cache, [0]))
    return np.concatenate(outs, axis=1)


def latent_shape(cfg, T, H, W):
    """(z_dim, F, h, w): each spatial downsample halves with floor."""
    h, w = H, W
    for _ in range(len(cfg.dim_mult) - 1):
        h, w = h // 2, w // 2
    return (cfg.z_dim, 1 + (T - 1) // cfg.time_factor(), h, w)


def normalize(cfg, mu):
    """WanVAE_.encode's scale: (mu - mean) * (1 / std), per channel, with
    the float32 mean and 1/std the published wrapper holds."""
    mean, inv_std = S.scale_f32(cfg.family)
    if mu.shape[0] != len(mean):
        raise RefError("the %s statistics have %d channels, mu has %d"
                       % (cfg.family, len(mean), mu.shape[0]))
    return (mu - mean[:, None, None, None]) * inv_std[:, None, None, None]


def encode_mu(cfg, sd, video):
    """The encoder and conv1, chunked as published; returns mu (z_dim, F, h, w)
    before normalisation."""
    video = check_video(cfg, video)
    enc, conv1, _ = _build(cfg, sd)
    out = conv1(encode_chunks(enc, video))
    return out[:cfg.z_dim]   # log_var, the other half, is not used


def encode(cfg, sd, video):
    """video (3, T, H, W) in [-1, 1], T = 1 + 4k -> normalised latents
    (z_dim, 1 + k, H/8, W/8): WanVAE_.encode with Wan2_1_VAE's scale."""
    return normalize(cfg, encode_mu(cfg, sd, video))


def encode_whole(cfg, sd, video):
    """encode() without chunks or caches (Encoder3d.whole)."""
    video = check_video(cfg, video)
    enc, conv1, _ = _build(cfg, sd)
    return normalize(cfg, conv1(enc.whole(video))[:cfg.z_dim])
