"""Independent float64 numpy reference of the Wan 2.2 video VAE (TI2V-5B's):
encoder and decoder.

Written from the published code (Wan-Video/Wan2.2 wan/modules/vae2_2.py:
patchify, unpatchify, AvgDown3D, DupUp3D, Down_ResidualBlock,
Up_ResidualBlock, Resample, Encoder3d, Decoder3d, WanVAE_.encode and
.decode, Wan2_2_VAE), not from any C code. I2V.md ("The Wan 2.2 VAE")
describes it in words. The pieces it shares with the Wan 2.1 VAE come from
wan_vae_ref.py (causal convolution, RMS norm, residual and attention
blocks, nearest-exact upsampling, the cache pattern) and wan_vae_enc_ref.py
(the downsampling resamples).

Tensors are unbatched and channel-first, (C, T, H, W); weights a dict keyed
by the official state-dict keys (`encoder.*`, `conv1.*`, `conv2.*`,
`decoder.*`), loaded strictly. `encode` and `decode` follow the published
chunk loops (encoder: frame 0 alone, then 4 frames per call; decoder: one
latent frame per call, `first_chunk` on the first); `encode_whole` and
`decode_whole` compute the same functions on whole sequences without caches
(the self-test requires agreement).

Public entry points:
    Config(...), published_config()
    tensor_shapes(cfg, part)        part "encoder" (encoder.*, conv1.*) or
                                    "decoder" (conv2.*, decoder.*)
    random_weights(cfg, rng, part)
    patchify(x), unpatchify(x)      the 2x2 space-to-channel step
    encode(cfg, sd, video)          (3, 1+4k, 16h, 16w) -> (48, 1+k, h, w)
    decode(cfg, sd, z)              (48, F, h, w) -> (3, 1+4(F-1), 16h, 16w)
    encode_whole, decode_whole
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wan_vae_enc_ref as E  # noqa: E402
import wan_vae_ref as D  # noqa: E402

RefError = D.RefError
PATCH = 2          # patchify's factor in height and width
CHUNK = E.CHUNK    # frames per encoder call after the first


class Config:
    """dim is the encoder's base width, dec_dim the decoder's (the published
    WanVAE_ takes dim from Wan2_2_VAE's c_dim = 160 and keeps its own
    default dec_dim = 256). temporal_downsample: one flag per encoder
    resample; the decoder uses it reversed."""

    def __init__(self, dim=160, dec_dim=256, z_dim=48, dim_mult=(1, 2, 4, 4),
                 num_res_blocks=2, temporal_downsample=(False, True, True)):
        self.dim = int(dim)
        self.dec_dim = int(dec_dim)
        self.z_dim = int(z_dim)
        self.dim_mult = tuple(int(m) for m in dim_mult)
        self.num_res_blocks = int(num_res_blocks)
        self.temporal_downsample = tuple(bool(f) for f in temporal_downsample)
        self.family = "wan2.2"
        if len(self.temporal_downsample) != len(self.dim_mult) - 1:
            raise RefError("temporal_downsample needs %d flags" % (len(self.dim_mult) - 1))
        if sum(self.temporal_downsample) > 2:
            raise RefError("at most 2 temporal downsamples (chunks are 4 frames)")

    def __repr__(self):
        return ("Config(dim=%d, dec_dim=%d, z_dim=%d, dim_mult=%s, num_res_blocks=%d, "
                "temporal_downsample=%s)" % (self.dim, self.dec_dim, self.z_dim,
                                             list(self.dim_mult), self.num_res_blocks,
                                             [int(f) for f in self.temporal_downsample]))

    def time_factor(self):
        return 2 ** sum(self.temporal_downsample)

    def space_factor(self):
        return PATCH * 2 ** (len(self.dim_mult) - 1)


def published_config():
    """Wan2_2_VAE: z_dim 48, encoder width 160, decoder width 256,
    dim_mult (1, 2, 4, 4), temporal downsampling at resamples 2 and 3."""
    return Config(160, 256, 48, (1, 2, 4, 4), 2, (False, True, True))


# ---------------------------------------------------------------- pieces

def patchify(x):
    """(C, T, H, W) -> (4C, T, H/2, W/2): out[c*4 + r*2 + q, t, h, w] =
    x[c, t, 2h + q, 2w + r] (einops "c f (h q) (w r) -> (c r q) f h w":
    the column offset r before the row offset q)."""
    c, t, h, w = x.shape
    if h % PATCH or w % PATCH:
        raise RefError("patchify needs even sizes, got %dx%d" % (h, w))
    y = x.reshape(c, t, h // 2, 2, w // 2, 2)          # c t h q w r
    return y.transpose(0, 5, 3, 1, 2, 4).reshape(c * 4, t, h // 2, w // 2)


def unpatchify(x):
    """The inverse of patchify: (4C, T, h, w) -> (C, T, 2h, 2w)."""
    c4, t, h, w = x.shape
    y = x.reshape(c4 // 4, 2, 2, t, h, w)              # c r q t h w
    return y.transpose(0, 3, 4, 2, 5, 1).reshape(c4 // 4, t, 2 * h, 2 * w)


def avg_down(x, out_ch, ft, fs):
    """AvgDown3D: zero frames in front up to a multiple of ft; each output
    position gathers the ft x fs x fs block of every input channel as
    channels c*(ft*fs*fs) + (a*fs + q)*fs + r (a the frame, q the row, r the
    column in the block) and averages consecutive groups of
    C*ft*fs*fs / out_ch of them into one output channel."""
    c, t, h, w = x.shape
    pad = (ft - t % ft) % ft
    x = np.pad(x, ((0, 0), (pad, 0), (0, 0), (0, 0)))
    t += pad
    if h % fs or w % fs:
        raise RefError("AvgDown3D needs sizes divisible by %d, got %dx%d" % (fs, h, w))
    factor = ft * fs * fs
    if (c * factor) % out_ch:
        raise RefError("AvgDown3D: %d channels x %d do not split into %d" % (c, factor, out_ch))
    y = x.reshape(c, t // ft, ft, h // fs, fs, w // fs, fs)
    y = y.transpose(0, 2, 4, 6, 1, 3, 5).reshape(c * factor, t // ft, h // fs, w // fs)
    return y.reshape(out_ch, c * factor // out_ch, t // ft, h // fs, w // fs).mean(axis=1)


def dup_up(x, out_ch, ft, fs, first_chunk):
    """DupUp3D: every input channel repeated R = out_ch*ft*fs*fs / C times
    (repeat_interleave), the copies read as (out_ch, ft, fs, fs) and spread
    over an ft x fs x fs block; in the first chunk the first ft - 1 output
    frames are dropped."""
    c, t, h, w = x.shape
    factor = ft * fs * fs
    if (out_ch * factor) % c:
        raise RefError("DupUp3D: %d channels do not fill %d x %d" % (c, out_ch, factor))
    y = np.repeat(x, out_ch * factor // c, axis=0)
    y = y.reshape(out_ch, ft, fs, fs, t, h, w).transpose(0, 4, 1, 5, 2, 6, 3)
    y = y.reshape(out_ch, t * ft, h * fs, w * fs)
    return y[:, ft - 1:] if first_chunk else y


class Upsample:
    """Resample in mode upsample2d or upsample3d, Wan 2.2 variant: the
    spatial convolution `resample.1` keeps the width (dim -> dim; Wan 2.1
    halves it). upsample3d's `time_conv` (dim -> 2 dim, causal (3, 1, 1))
    doubles the frames except in the first chunk ("Rep")."""

    def __init__(self, p, key, dim, mode):
        assert mode in ("upsample2d", "upsample3d")
        self.mode = mode
        self.conv = D.Conv2d(p, key + ".resample.1", dim, dim, 3, 1)
        self.time_conv = (D.CausalConv3d(p, key + ".time_conv", dim, 2 * dim, (3, 1, 1), (1, 0, 0))
                          if mode == "upsample3d" else None)

    def spatial(self, x):
        return self.conv(D.upsample_nearest_exact(x))

    def __call__(self, x, feat_cache, feat_idx):
        if self.mode == "upsample3d":
            idx = feat_idx[0]
            if feat_cache[idx] is None:
                feat_cache[idx] = "Rep"
            else:
                rep = isinstance(feat_cache[idx], str)
                cache_x = x[:, -D.CACHE_T:].copy()
                if cache_x.shape[1] < 2:
                    front = (np.zeros_like(cache_x) if rep else feat_cache[idx][:, -1:])
                    cache_x = np.concatenate([front, cache_x], axis=1)
                x = self.time_conv(x, None if rep else feat_cache[idx])
                feat_cache[idx] = cache_x
                x = D.Resample.unfold_time(x)
            feat_idx[0] += 1
        return self.spatial(x)

    def whole(self, x):
        if self.mode == "upsample3d":
            rest = D.Resample.unfold_time(self.time_conv(x[:, 1:]))
            x = np.concatenate([x[:, :1], rest], axis=1)
        return self.spatial(x)


class DownBlock:
    """Down_ResidualBlock: num_res_blocks residual blocks (in -> out), then
    (except at the last level) a downsample; plus the parameter-free
    AvgDown3D shortcut of the block's input."""

    def __init__(self, p, key, in_dim, out_dim, n_res, temporal, down):
        self.out_dim = out_dim
        self.ft = 2 if temporal else 1
        self.fs = 2 if down else 1
        self.mods = []
        for _ in range(n_res):
            self.mods.append(D.ResidualBlock(p, "%s.downsamples.%d" % (key, len(self.mods)),
                                             in_dim, out_dim))
            in_dim = out_dim
        if down:
            mode = "downsample3d" if temporal else "downsample2d"
            self.mods.append(E.Downsample(p, "%s.downsamples.%d" % (key, len(self.mods)),
                                          out_dim, mode))

    def __call__(self, x, feat_cache, feat_idx):
        short = avg_down(x, self.out_dim, self.ft, self.fs)
        for m in self.mods:
            x = m(x, feat_cache, feat_idx)
        return x + short

    def whole(self, x):
        short = avg_down(x, self.out_dim, self.ft, self.fs)
        for m in self.mods:
            x = m.whole(x) if isinstance(m, E.Downsample) else m(x)
        return x + short


class UpBlock:
    """Up_ResidualBlock: num_res_blocks + 1 residual blocks (in -> out),
    then (except at the last level) an upsample and the parameter-free
    DupUp3D shortcut of the block's input; the last level has no shortcut."""

    def __init__(self, p, key, in_dim, out_dim, n_res, temporal, up):
        self.out_dim = out_dim
        self.up = up
        self.ft = 2 if temporal else 1
        self.fs = 2 if up else 1
        self.mods = []
        for _ in range(n_res):
            self.mods.append(D.ResidualBlock(p, "%s.upsamples.%d" % (key, len(self.mods)),
                                             in_dim, out_dim))
            in_dim = out_dim
        if up:
            mode = "upsample3d" if temporal else "upsample2d"
            self.mods.append(Upsample(p, "%s.upsamples.%d" % (key, len(self.mods)),
                                      out_dim, mode))

    def __call__(self, x, feat_cache, feat_idx, first_chunk):
        y = x
        for m in self.mods:
            y = m(y, feat_cache, feat_idx)
        if self.up:
            y = y + dup_up(x, self.out_dim, self.ft, self.fs, first_chunk)
        return y

    def whole(self, x):
        y = x
        for m in self.mods:
            y = m.whole(y) if isinstance(m, Upsample) else m(y)
        if self.up:
            y = y + dup_up(x, self.out_dim, self.ft, self.fs, True)
        return y


class Encoder3d:
    def __init__(self, p, cfg):
        dims = [cfg.dim * u for u in (1,) + cfg.dim_mult]
        n = len(cfg.dim_mult)
        self.conv1 = D.CausalConv3d(p, "encoder.conv1", 3 * PATCH * PATCH, dims[0], 3, 1)
        self.downsamples = []
        for i, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
            temporal = cfg.temporal_downsample[i] if i < n - 1 else False
            self.downsamples.append(DownBlock(p, "encoder.downsamples.%d" % i, in_dim, out_dim,
                                              cfg.num_res_blocks, temporal, i != n - 1))
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
        x = self.conv1(x)
        for m in self.downsamples:
            x = m.whole(x)
        for m in self.middle:
            x = m(x)
        return self.head_conv(D.silu(self.head_norm(x)))


class Decoder3d:
    def __init__(self, p, cfg):
        dims = [cfg.dec_dim * u for u in (cfg.dim_mult[-1],) + cfg.dim_mult[::-1]]
        temporal_up = cfg.temporal_downsample[::-1]
        n = len(cfg.dim_mult)
        self.conv1 = D.CausalConv3d(p, "decoder.conv1", cfg.z_dim, dims[0], 3, 1)
        self.middle = [D.ResidualBlock(p, "decoder.middle.0", dims[0], dims[0]),
                       D.AttentionBlock(p, "decoder.middle.1", dims[0]),
                       D.ResidualBlock(p, "decoder.middle.2", dims[0], dims[0])]
        self.upsamples = []
        for i, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
            temporal = temporal_up[i] if i < len(temporal_up) else False
            self.upsamples.append(UpBlock(p, "decoder.upsamples.%d" % i, in_dim, out_dim,
                                          cfg.num_res_blocks + 1, temporal, i != n - 1))
        self.head_norm = D.RMSNorm(p, "decoder.head.0", out_dim, images=False)
        self.head_conv = D.CausalConv3d(p, "decoder.head.2", out_dim, 3 * PATCH * PATCH, 3, 1)

    def __call__(self, x, feat_cache, feat_idx, first_chunk):
        x = D._cached_call(self.conv1, x, feat_cache, feat_idx)
        for m in self.middle:
            x = m(x, feat_cache, feat_idx) if isinstance(m, D.ResidualBlock) else m(x)
        for m in self.upsamples:
            x = m(x, feat_cache, feat_idx, first_chunk)
        x = D.silu(self.head_norm(x))
        return D._cached_call(self.head_conv, x, feat_cache, feat_idx)

    def whole(self, x):
        x = self.conv1(x)
        for m in self.middle:
            x = m(x)
        for m in self.upsamples:
            x = m.whole(x)
        return self.head_conv(D.silu(self.head_norm(x)))


# ---------------------------------------------------------------- model

def _build(cfg, sd, part):
    p = D._Params(sd)
    if part == "encoder":
        net = Encoder3d(p, cfg)
        conv = D.CausalConv3d(p, "conv1", 2 * cfg.z_dim, 2 * cfg.z_dim, 1, 0)
    elif part == "decoder":
        conv = D.CausalConv3d(p, "conv2", cfg.z_dim, cfg.z_dim, 1, 0)
        net = Decoder3d(p, cfg)
    else:
        raise RefError("part must be encoder or decoder")
    p.finish()
    return net, conv, p.shapes


def tensor_shapes(cfg, part):
    return _build(cfg, None, part)[2]


def random_weights(cfg, rng, part):
    return D.random_weights_of(tensor_shapes(cfg, part), rng)


def check_video(cfg, video):
    video = E.check_video(cfg, video)
    f = cfg.space_factor()
    if video.shape[2] % f or video.shape[3] % f:
        # patchify and every AvgDown3D reshape need exact halving
        raise RefError("H and W must be multiples of %d, got %dx%d"
                       % (f, video.shape[2], video.shape[3]))
    return video


def encode(cfg, sd, video):
    """video (3, 1 + 4k, H, W) in [-1, 1] -> normalised latents
    (z_dim, 1 + 4k / time_factor, H/16, W/16): WanVAE_.encode."""
    video = patchify(check_video(cfg, video))
    enc, conv1, _ = _build(cfg, sd, "encoder")
    mu = conv1(E.encode_chunks(enc, video))[:cfg.z_dim]
    return E.normalize(cfg, mu)


def encode_whole(cfg, sd, video):
    video = patchify(check_video(cfg, video))
    enc, conv1, _ = _build(cfg, sd, "encoder")
    return E.normalize(cfg, conv1(enc.whole(video))[:cfg.z_dim])


def unnormalize(cfg, z):
    """WanVAE_.decode's scale: z / (1 / std) + mean with the float32 values."""
    mean, inv_std = E.S.scale_f32(cfg.family)
    if z.shape[0] != len(mean):
        raise RefError("the wan2.2 statistics have %d channels, z has %d" % (len(mean), z.shape[0]))
    return z / inv_std[:, None, None, None] + mean[:, None, None, None]


def decode(cfg, sd, z):
    """Normalised latents (z_dim, F, h, w) -> video (3, 1 + 4 (F - 1), 16h,
    16w) clamped to [-1, 1]: WanVAE_.decode and Wan2_2_VAE.decode's clamp."""
    dec, conv2, _ = _build(cfg, sd, "decoder")
    x = conv2(unnormalize(cfg, np.asarray(z, dtype=np.float64)))
    feat_cache = E._Cache()
    out = [dec(x[:, i:i + 1], feat_cache, [0], i == 0) for i in range(x.shape[1])]
    return np.clip(unpatchify(np.concatenate(out, axis=1)), -1.0, 1.0)


def decode_whole(cfg, sd, z):
    dec, conv2, _ = _build(cfg, sd, "decoder")
    x = conv2(unnormalize(cfg, np.asarray(z, dtype=np.float64)))
    return np.clip(unpatchify(dec.whole(x)), -1.0, 1.0)


def out_frames(cfg, F):
    return 1 + cfg.time_factor() * (F - 1)
