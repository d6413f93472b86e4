"""Independent float64 reference of the Wan 2.1 T2V DiT and its samplers.

Written from MODEL.md and the published Wan 2.1 source
(wan/modules/model.py, wan/utils/fm_solvers_unipc.py), not from the C engine,
so that CI can check the engine against something that shares none of its code.
Everything is numpy float64; the only deliberate roundings are the ones the
published model itself makes (bf16/fp32 weights as stored, the time sinusoid
cast to fp32, the scheduler's sigmas stored as fp32).

Public entry points:
    load_model(path)                          -> Model
    forward(model, latent, t, context)        -> pred [16,F,H,W]
    schedule(steps, shift)                    -> (sigmas [N+1], timesteps [N])
    euler_sample / UniPC                      the two samplers
    sample(model, noise, context, context_null, steps, cfg, shift, sampler)
"""

import math

import numpy as np

try:
    import h5py
except ImportError:  # the self-tests that need no files still run
    h5py = None


class RefError(Exception):
    """A model or input file that does not follow the staticpipe layout."""


# ---------------------------------------------------------------- loading

_CONFIG_KEYS = ("dim", "ffn_dim", "heads", "layers", "in_dim", "out_dim",
                "patch", "text_len", "text_dim", "freq_dim", "eps")

_EMBED_KEYS = ("patch_embedding.weight", "patch_embedding.bias",
               "text_embedding.0.weight", "text_embedding.0.bias",
               "text_embedding.2.weight", "text_embedding.2.bias",
               "time_embedding.0.weight", "time_embedding.0.bias",
               "time_embedding.2.weight", "time_embedding.2.bias",
               "time_projection.1.weight", "time_projection.1.bias")

_BLOCK_KEYS = ("modulation",
               "self_attn.q.weight", "self_attn.q.bias",
               "self_attn.k.weight", "self_attn.k.bias",
               "self_attn.v.weight", "self_attn.v.bias",
               "self_attn.o.weight", "self_attn.o.bias",
               "self_attn.norm_q.weight", "self_attn.norm_k.weight",
               "norm3.weight", "norm3.bias",
               "cross_attn.q.weight", "cross_attn.q.bias",
               "cross_attn.k.weight", "cross_attn.k.bias",
               "cross_attn.v.weight", "cross_attn.v.bias",
               "cross_attn.o.weight", "cross_attn.o.bias",
               "cross_attn.norm_q.weight", "cross_attn.norm_k.weight",
               "ffn.0.weight", "ffn.0.bias", "ffn.2.weight", "ffn.2.bias")

_HEAD_KEYS = ("head.modulation", "head.head.weight", "head.head.bias")


def bf16_to_f64(u):
    """uint16 bf16 bit patterns -> float64: the bf16 bits are the high half
    of a float32, so widening is a 16-bit shift and a reinterpretation."""
    u = np.asarray(u, dtype=np.uint16)
    return (u.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


def f32_to_bf16_trunc(x):
    """float32 -> bf16 bits by truncation (used to write test files only)."""
    x = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    return (x.view(np.uint32) >> np.uint32(16)).astype(np.uint16)


def expected_shapes(cfg):
    """The shape of every tensor for a config, per the official Wan keys."""
    d, f, pt, ph, pw = cfg["dim"], cfg["ffn_dim"], *cfg["patch"]
    cin, cout = cfg["in_dim"], cfg["out_dim"]
    sh = {
        "patch_embedding.weight": (d, cin, pt, ph, pw),
        "patch_embedding.bias": (d,),
        "text_embedding.0.weight": (d, cfg["text_dim"]),
        "text_embedding.0.bias": (d,),
        "text_embedding.2.weight": (d, d), "text_embedding.2.bias": (d,),
        "time_embedding.0.weight": (d, cfg["freq_dim"]),
        "time_embedding.0.bias": (d,),
        "time_embedding.2.weight": (d, d), "time_embedding.2.bias": (d,),
        "time_projection.1.weight": (6 * d, d),
        "time_projection.1.bias": (6 * d,),
        "modulation": (1, 6, d),
        "norm3.weight": (d,), "norm3.bias": (d,),
        "ffn.0.weight": (f, d), "ffn.0.bias": (f,),
        "ffn.2.weight": (d, f), "ffn.2.bias": (d,),
        "head.modulation": (1, 2, d),
        "head.head.weight": (cout * pt * ph * pw, d),
        "head.head.bias": (cout * pt * ph * pw,),
    }
    for att in ("self_attn", "cross_attn"):
        for p in "qkvo":
            sh["%s.%s.weight" % (att, p)] = (d, d)
            sh["%s.%s.bias" % (att, p)] = (d,)
        sh[att + ".norm_q.weight"] = (d,)
        sh[att + ".norm_k.weight"] = (d,)
    return sh


class Model:
    """A loaded staticpipe model: cfg dict, embed/head dicts, list of blocks,
    every tensor float64 in the official (PyTorch) layout."""

    def __init__(self, cfg, embed, blocks, head):
        self.cfg, self.embed, self.blocks, self.head = cfg, embed, blocks, head


def _read_tensor(f, path, shape):
    if path not in f:
        raise RefError("model file: missing dataset %s" % path)
    ds = f[path]
    if tuple(ds.shape) != tuple(shape):
        raise RefError("model file: dataset %s has shape %s, expected %s"
                       % (path, tuple(ds.shape), tuple(shape)))
    tag = ds.attrs.get("dtype", None)
    if isinstance(tag, bytes):
        tag = tag.decode()
    if ds.dtype == np.uint16:
        if tag != "bf16":
            raise RefError("model file: uint16 dataset %s lacks dtype=\"bf16\"" % path)
        a = bf16_to_f64(ds[()])
    elif ds.dtype == np.float32:
        a = ds[()].astype(np.float64)
    else:
        raise RefError("model file: dataset %s has type %s (want bf16 or float32)"
                       % (path, ds.dtype))
    if not np.all(np.isfinite(a)):
        raise RefError("model file: dataset %s holds NaN or Inf" % path)
    return a


def _attr_str(attrs, key):
    v = attrs.get(key, None)
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, np.ndarray) and v.shape == ():
        v = v[()]
        if isinstance(v, bytes):
            v = v.decode()
    return v


def load_model(path):
    """Read a staticpipe HDF5 model file (format_version 1, wan2.1-t2v)."""
    if h5py is None:
        raise RefError("h5py is not installed")
    with h5py.File(path, "r") as f:
        a = f.attrs
        if _attr_str(a, "format") != "staticpipe":
            raise RefError("%s: root attribute format is not \"staticpipe\"" % path)
        if int(a.get("format_version", -1)) != 1:
            raise RefError("%s: format_version is not 1" % path)
        if _attr_str(a, "arch") != "wan2.1-t2v":
            raise RefError("%s: arch %r is not wan2.1-t2v" % (path, _attr_str(a, "arch")))
        cfg = {}
        for k in _CONFIG_KEYS:
            if k not in a:
                raise RefError("%s: missing root attribute %s" % (path, k))
            v = a[k]
            if k == "patch":
                cfg[k] = tuple(int(x) for x in np.asarray(v).reshape(-1))
                if len(cfg[k]) != 3:
                    raise RefError("%s: attribute patch must hold 3 ints" % path)
            elif k == "eps":
                cfg[k] = float(np.asarray(v).reshape(-1)[0])
            else:
                cfg[k] = int(np.asarray(v).reshape(-1)[0])
        if cfg["dim"] % cfg["heads"] or (cfg["dim"] // cfg["heads"]) % 2:
            raise RefError("%s: dim %d not a multiple of 2*heads" % (path, cfg["dim"]))
        cfg["dtype"] = _attr_str(a, "dtype")
        sh = expected_shapes(cfg)
        embed = {k: _read_tensor(f, "/embed/" + k, sh[k]) for k in _EMBED_KEYS}
        blocks = []
        for n in range(cfg["layers"]):
            blocks.append({k: _read_tensor(f, "/blocks/%04d/%s" % (n, k), sh[k])
                           for k in _BLOCK_KEYS})
        head = {k: _read_tensor(f, "/head/" + k, sh[k]) for k in _HEAD_KEYS}
    return Model(cfg, embed, blocks, head)


# ---------------------------------------------------------------- ops

def linear(x, w, b):
    """x [..., in] @ w[out, in]^T + b[out] (PyTorch nn.Linear layout)."""
    return x @ w.T + b


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def layer_norm(x, eps, w=None, b=None):
    """Over the last axis, biased variance, optional affine (norm3)."""
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    if w is not None:
        y = y * w + b
    return y


def rms_norm(x, w, eps):
    """Over the full model dim (all heads together), then the weight."""
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w


def softmax(s):
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    return p / p.sum(axis=-1, keepdims=True)


def attention(q, k, v, heads):
    """Exact softmax attention. q [Lq,D], k,v [Lk,D] -> [Lq,D]; heads split
    the dim in contiguous head_dim slices, scale 1/sqrt(head_dim)."""
    lq, d = q.shape
    hd = d // heads
    qh = q.reshape(lq, heads, hd).transpose(1, 0, 2)       # [H,Lq,hd]
    kh = k.reshape(-1, heads, hd).transpose(1, 0, 2)       # [H,Lk,hd]
    vh = v.reshape(-1, heads, hd).transpose(1, 0, 2)       # [H,Lk,hd]
    p = softmax(qh @ kh.transpose(0, 2, 1) / math.sqrt(hd))  # [H,Lq,Lk]
    return (p @ vh).transpose(1, 0, 2).reshape(lq, d)


def time_sinusoid(t, freq_dim):
    """[cos(t w_j), sin(t w_j)], w_j = 10000^(-j/half), in double as
    published, then rounded to fp32 because the published model feeds the
    time MLP an fp32 vector."""
    half = freq_dim // 2
    arg = float(t) * np.power(10000.0, -np.arange(half, dtype=np.float64) / half)
    v = np.concatenate([np.cos(arg), np.sin(arg)])
    return v.astype(np.float32).astype(np.float64)


def rope_split(head_dim):
    """(pairs, freq dims) of the frame/row/column axes: the published split
    c - 2(c//3), c//3, c//3 pairs with rope_params dims d - 4(d//6), 2(d//6),
    2(d//6) (22/21/21 pairs, 44/42/42 for head_dim 128)."""
    c = head_dim // 2
    pairs = (c - 2 * (c // 3), c // 3, c // 3)
    dims = (head_dim - 4 * (head_dim // 6), 2 * (head_dim // 6), 2 * (head_dim // 6))
    return pairs, dims


def rope_angles(grid, head_dim):
    """Angles [L, head_dim/2] for tokens in (f,h,w) row-major order: pair j of
    axis a uses pos_a * 10000^(-2j/dims[a])."""
    pairs, dims = rope_split(head_dim)
    fg, hg, wg = grid
    pos = np.stack(np.meshgrid(np.arange(fg), np.arange(hg), np.arange(wg),
                               indexing="ij"), axis=-1).reshape(-1, 3).astype(np.float64)
    parts = []
    for a in range(3):
        w = 1.0 / np.power(10000.0, np.arange(0, dims[a], 2, dtype=np.float64) / dims[a])
        assert w.shape[0] == pairs[a]
        parts.append(pos[:, a:a + 1] * w[None, :])
    return np.concatenate(parts, axis=1)


def rope_apply(x, ang, heads):
    """x [L,D]; rotate interleaved pairs (x[2j], x[2j+1]) of every head by
    ang [L, head_dim/2]."""
    l, d = x.shape
    hd = d // heads
    xr = x.reshape(l, heads, hd // 2, 2)
    x0, x1 = xr[..., 0], xr[..., 1]
    c = np.cos(ang)[:, None, :]
    s = np.sin(ang)[:, None, :]
    out = np.empty_like(xr)
    out[..., 0] = x0 * c - x1 * s
    out[..., 1] = x0 * s + x1 * c
    return out.reshape(l, d)


def patchify(x, patch):
    """x [C,F,H,W] -> tokens [L, C*pt*ph*pw] with the Conv3d weight's inner
    order (c, kt, kh, kw); tokens in (f,h,w) row-major order."""
    c, f, h, w = x.shape
    pt, ph, pw = patch
    g = (f // pt, h // ph, w // pw)
    y = x.reshape(c, g[0], pt, g[1], ph, g[2], pw)
    y = y.transpose(1, 3, 5, 0, 2, 4, 6)                   # [F',H',W',C,pt,ph,pw]
    return y.reshape(g[0] * g[1] * g[2], c * pt * ph * pw), g


def unpatchify(tok, grid, patch, c):
    """tok [L, pt*ph*pw*c] (channel fastest) -> [c, F, H, W], as the published
    einsum 'fhwpqrc->cfphqwr'."""
    fg, hg, wg = grid
    pt, ph, pw = patch
    u = tok.reshape(fg, hg, wg, pt, ph, pw, c)
    u = u.transpose(6, 0, 3, 1, 4, 2, 5)                   # [c,F',pt,H',ph,W',pw]
    return u.reshape(c, fg * pt, hg * ph, wg * pw)


# ---------------------------------------------------------------- model

def embed_text(model, context):
    """context [L,text_dim], L <= text_len -> [text_len, dim] over all padded
    rows (the padding rows become non-zero and are kept, as published)."""
    cfg = model.cfg
    context = np.asarray(context, dtype=np.float64)
    if context.ndim != 2 or context.shape[1] != cfg["text_dim"]:
        raise RefError("context must be [L,%d], got %s" % (cfg["text_dim"], context.shape))
    if context.shape[0] > cfg["text_len"]:
        raise RefError("context has %d rows, more than text_len %d"
                       % (context.shape[0], cfg["text_len"]))
    ctx = np.zeros((cfg["text_len"], cfg["text_dim"]))
    ctx[:context.shape[0]] = context
    e = model.embed
    y = gelu_tanh(linear(ctx, e["text_embedding.0.weight"], e["text_embedding.0.bias"]))
    return linear(y, e["text_embedding.2.weight"], e["text_embedding.2.bias"])


def embed_time(model, t):
    """-> e [dim], e0 [6,dim]."""
    em, d = model.embed, model.cfg["dim"]
    s = time_sinusoid(t, model.cfg["freq_dim"])
    e = linear(silu(linear(s, em["time_embedding.0.weight"], em["time_embedding.0.bias"])),
               em["time_embedding.2.weight"], em["time_embedding.2.bias"])
    e0 = linear(silu(e), em["time_projection.1.weight"], em["time_projection.1.bias"])
    return e, e0.reshape(6, d)


def block_forward(blk, x, e0, ctx, ang, cfg):
    """One WanAttentionBlock. x [L,dim] residual, e0 [6,dim], ctx [512,dim]."""
    eps, heads = cfg["eps"], cfg["heads"]
    m = blk["modulation"][0] + e0                            # [6,dim]
    sh1, sc1, g1, sh2, sc2, g2 = m
    # self-attention
    h = layer_norm(x, eps) * (1.0 + sc1) + sh1
    q = rms_norm(linear(h, blk["self_attn.q.weight"], blk["self_attn.q.bias"]),
                 blk["self_attn.norm_q.weight"], eps)
    k = rms_norm(linear(h, blk["self_attn.k.weight"], blk["self_attn.k.bias"]),
                 blk["self_attn.norm_k.weight"], eps)
    v = linear(h, blk["self_attn.v.weight"], blk["self_attn.v.bias"])
    a = attention(rope_apply(q, ang, heads), rope_apply(k, ang, heads), v, heads)
    x = x + linear(a, blk["self_attn.o.weight"], blk["self_attn.o.bias"]) * g1
    # cross-attention: affine norm3, no RoPE, no gate
    y = layer_norm(x, eps, blk["norm3.weight"], blk["norm3.bias"])
    q = rms_norm(linear(y, blk["cross_attn.q.weight"], blk["cross_attn.q.bias"]),
                 blk["cross_attn.norm_q.weight"], eps)
    k = rms_norm(linear(ctx, blk["cross_attn.k.weight"], blk["cross_attn.k.bias"]),
                 blk["cross_attn.norm_k.weight"], eps)
    v = linear(ctx, blk["cross_attn.v.weight"], blk["cross_attn.v.bias"])
    x = x + linear(attention(q, k, v, heads), blk["cross_attn.o.weight"],
                   blk["cross_attn.o.bias"])
    # feed-forward
    h = layer_norm(x, eps) * (1.0 + sc2) + sh2
    f = linear(gelu_tanh(linear(h, blk["ffn.0.weight"], blk["ffn.0.bias"])),
               blk["ffn.2.weight"], blk["ffn.2.bias"])
    return x + f * g2


def check_latent(model, latent):
    cfg = model.cfg
    latent = np.asarray(latent, dtype=np.float64)
    if latent.ndim != 4 or latent.shape[0] != cfg["in_dim"]:
        raise RefError("latent must be [%d,F,H,W], got %s" % (cfg["in_dim"], latent.shape))
    for n, p in zip(latent.shape[1:], cfg["patch"]):
        if n % p or n == 0:
            raise RefError("latent shape %s not divisible by patch %s"
                           % (latent.shape, cfg["patch"]))
    return latent


def forward_embedded(model, latent, t, ctx):
    """forward() with the text embedding already done (ctx [text_len,dim])."""
    cfg = model.cfg
    latent = check_latent(model, latent)
    em = model.embed
    tok, grid = patchify(latent, cfg["patch"])
    wpe = em["patch_embedding.weight"].reshape(cfg["dim"], -1)  # [dim, C*pt*ph*pw]
    x = tok @ wpe.T + em["patch_embedding.bias"]                # [L, dim]
    e, e0 = embed_time(model, t)
    ang = rope_angles(grid, cfg["dim"] // cfg["heads"])
    for blk in model.blocks:
        x = block_forward(blk, x, e0, ctx, ang, cfg)
    hd = model.head
    m = hd["head.modulation"][0] + e                           # [2,dim], e not e0
    y = layer_norm(x, cfg["eps"]) * (1.0 + m[1]) + m[0]
    out = linear(y, hd["head.head.weight"], hd["head.head.bias"])  # [L, 64]
    return unpatchify(out, grid, cfg["patch"], cfg["out_dim"])


def forward(model, latent, t, context):
    """latent [16,F,H,W], integer timestep t, context [L,text_dim] ->
    predicted flow velocity [16,F,H,W] (float64)."""
    return forward_embedded(model, latent, t, embed_text(model, context))


# ---------------------------------------------------------------- sampler

def schedule(steps, shift, num_train_timesteps=1000):
    """The published FlowUniPCMultistepScheduler.set_timesteps with shift:
    returns (sigmas float32 values as float64 [N+1] ending in 0, integer
    timesteps [N]). sigma_max is the constructor's float32 sigma at index 0
    (float32(0.999)), sigma_min its last (0)."""
    if steps < 1:
        raise RefError("steps must be >= 1")
    alphas = np.linspace(1.0, 1.0 / num_train_timesteps, num_train_timesteps)[::-1]
    train_sigmas = (1.0 - alphas).astype(np.float32)
    sigma_max = float(train_sigmas[0])
    sigma_min = float(train_sigmas[-1])
    u = np.linspace(sigma_max, sigma_min, steps + 1)[:-1]
    s = shift * u / (1.0 + (shift - 1.0) * u)
    # timesteps from the float64 sigmas, truncated toward zero (int64 cast)
    timesteps = (s * num_train_timesteps).astype(np.int64)
    sigmas = np.concatenate([s, [0.0]]).astype(np.float32).astype(np.float64)
    return sigmas, timesteps


def _lam(sigma):
    """lambda = log(alpha) - log(sigma), alpha = 1 - sigma (inf at sigma 0)."""
    with np.errstate(divide="ignore"):
        return math.log(1.0 - sigma) - (math.log(sigma) if sigma > 0 else -math.inf)


class UniPC:
    """FlowUniPCMultistepScheduler behaviour: solver_order 2, bh2,
    predict_x0, lower_order_final, no thresholding. disable_corrector lists
    the step indices whose corrector is skipped, as the published option
    (empty by default, as the Wan pipelines use it).
    step() is called once per timestep with the (guided) velocity."""

    def __init__(self, sigmas, order=2, disable_corrector=()):
        self.sigmas = sigmas
        self.disable_corrector = set(disable_corrector)
        self.n = len(sigmas) - 1
        self.order = order
        self.model_outputs = [None] * order    # x0 predictions, newest last
        self.lower_order_nums = 0
        self.last_sample = None
        self.this_order = None
        self.i = 0

    def _coeffs(self, h, order):
        """(h_phi_1, B_h, b[order]) as published for predict_x0, bh2."""
        hh = -h
        h_phi_1 = math.expm1(hh)
        h_phi_k = h_phi_1 / hh - 1.0
        b_h = math.expm1(hh)
        b, fact = [], 1
        for i in range(1, order + 1):
            b.append(h_phi_k * fact / b_h)
            fact *= i + 1
            h_phi_k = h_phi_k / hh - 1.0 / fact
        return h_phi_1, b_h, np.array(b)

    def _predict(self, x, order):
        """multistep_uni_p_bh_update: from sigmas[i] to sigmas[i+1]."""
        i, sg = self.i, self.sigmas
        m0 = self.model_outputs[-1]
        s_t, s_s0 = sg[i + 1], sg[i]
        a_t = 1.0 - s_t
        lam_t, lam_s0 = _lam(s_t), _lam(s_s0)
        h = lam_t - lam_s0
        d1s = []
        for k in range(1, order):
            rk = (_lam(sg[i - k]) - lam_s0) / h
            d1s.append((self.model_outputs[-(k + 1)] - m0) / rk)
        if math.isinf(h):
            # last step to sigma 0: sigma_t/sigma_s0 = 0 and alpha_t*expm1(-inf)
            # = -1, so the published update returns the x0 prediction m0.
            assert order == 1
            return m0.copy()
        h_phi_1, b_h, _ = self._coeffs(h, order)
        xt = s_t / s_s0 * x - a_t * h_phi_1 * m0
        if d1s:
            if order != 2:
                raise NotImplementedError("predictor order > 2")
            xt = xt - a_t * b_h * (0.5 * d1s[0])   # published rhos_p = [0.5]
        return xt

    def _correct(self, model_t, last_sample, this_sample, order):
        """multistep_uni_c_bh_update: refine this_sample (at sigmas[i]) from
        last_sample (at sigmas[i-1]) with the new x0 prediction model_t."""
        i, sg = self.i, self.sigmas
        m0 = self.model_outputs[-1]
        s_t, s_s0 = sg[i], sg[i - 1]
        a_t = 1.0 - s_t
        lam_t, lam_s0 = _lam(s_t), _lam(s_s0)
        h = lam_t - lam_s0
        rks, d1s = [], []
        for k in range(1, order):
            rk = (_lam(sg[i - (k + 1)]) - lam_s0) / h
            rks.append(rk)
            d1s.append((self.model_outputs[-(k + 1)] - m0) / rk)
        rks.append(1.0)
        rks = np.array(rks)
        h_phi_1, b_h, b = self._coeffs(h, order)
        if order == 1:
            rhos_c = np.array([0.5])
        else:
            r = np.stack([rks ** (k - 1) for k in range(1, order + 1)])
            rhos_c = np.linalg.solve(r, b)
        xt = s_t / s_s0 * last_sample - a_t * h_phi_1 * m0
        corr = 0.0
        for k, d in enumerate(d1s):
            corr = corr + rhos_c[k] * d
        return xt - a_t * b_h * (corr + rhos_c[-1] * (model_t - m0))

    def step(self, v, x):
        """v: velocity at sample x (sigma = sigmas[i]) -> sample at sigmas[i+1]."""
        i = self.i
        x0 = x - self.sigmas[i] * v
        if i > 0 and (i - 1) not in self.disable_corrector and self.last_sample is not None:
            x = self._correct(x0, self.last_sample, x, self.this_order)
        self.model_outputs = self.model_outputs[1:] + [x0]
        this_order = min(self.order, self.n - i)       # lower_order_final
        self.this_order = min(this_order, self.lower_order_nums + 1)
        self.last_sample = x
        out = self._predict(x, self.this_order)
        if self.lower_order_nums < self.order:
            self.lower_order_nums += 1
        self.i += 1
        return out


class Euler:
    """x <- x + (sigma_{i+1} - sigma_i) v on the same sigmas."""

    def __init__(self, sigmas):
        self.sigmas, self.i = sigmas, 0

    def step(self, v, x):
        out = x + (self.sigmas[self.i + 1] - self.sigmas[self.i]) * v
        self.i += 1
        return out


def make_sampler(name, sigmas):
    if name == "unipc":
        return UniPC(sigmas)
    if name == "unip":  # UniPC without its corrector (published disable_corrector)
        return UniPC(sigmas, disable_corrector=range(len(sigmas)))
    if name == "euler":
        return Euler(sigmas)
    raise RefError("unknown sampler %r (unipc|unip|euler)" % name)


def sample_with(velocity, noise, steps, shift, sampler):
    """Generic loop: velocity(x, t_int, i) -> v. Returns the final latents."""
    sigmas, timesteps = schedule(steps, shift)
    s = make_sampler(sampler, sigmas)
    x = np.asarray(noise, dtype=np.float64)
    for i in range(steps):
        x = s.step(velocity(x, int(timesteps[i]), i), x)
    return x


def sample(model, noise, context, context_null, steps, cfg, shift, sampler):
    """Text-to-video sampling as the published loop: CFG
    v = v_uncond + cfg (v_cond - v_uncond); cfg == 1 runs the conditional
    branch only. The text embeddings are computed once."""
    ctx_c = embed_text(model, context)
    ctx_u = None
    if cfg != 1.0:
        if context_null is None:
            raise RefError("cfg != 1 needs context_null")
        ctx_u = embed_text(model, context_null)

    def velocity(x, t, i):
        vc = forward_embedded(model, x, t, ctx_c)
        if ctx_u is None:
            return vc
        vu = forward_embedded(model, x, t, ctx_u)
        return vu + cfg * (vc - vu)

    return sample_with(velocity, noise, steps, shift, sampler)


# ---------------------------------------------------------------- CLI

def _main(argv):
    import argparse
    p = argparse.ArgumentParser(description="float64 Wan 2.1 reference")
    sub = p.add_subparsers(dest="cmd", required=True)
    pf = sub.add_parser("forward")
    pf.add_argument("--model", required=True)
    pf.add_argument("--latent", required=True)
    pf.add_argument("--timestep", type=int, required=True)
    pf.add_argument("--cond", required=True)
    pf.add_argument("-o", required=True)
    pr = sub.add_parser("run")
    pr.add_argument("--model", required=True)
    pr.add_argument("--cond", required=True)
    pr.add_argument("--noise", required=True)
    pr.add_argument("--steps", type=int, default=50)
    pr.add_argument("--cfg", type=float, default=5.0)
    pr.add_argument("--shift", type=float, default=5.0)
    pr.add_argument("--sampler", default="unipc")
    pr.add_argument("-o", required=True)
    a = p.parse_args(argv)
    m = load_model(a.model)
    if a.cmd == "forward":
        with h5py.File(a.latent, "r") as f:
            lat = f["latent"][()]
        with h5py.File(a.cond, "r") as f:
            ctx = f["context"][()]
        out, name = forward(m, lat, a.timestep, ctx), "pred"
    else:
        with h5py.File(a.cond, "r") as f:
            ctx = f["context"][()]
            ctxn = f["context_null"][()] if "context_null" in f else None
        with h5py.File(a.noise, "r") as f:
            noise = f["noise"][()]
        out = sample(m, noise, ctx, ctxn, a.steps, a.cfg, a.shift, a.sampler)
        name = "latents"
    with h5py.File(a.o, "w") as f:
        f.create_dataset(name, data=out.astype(np.float32))
    return 0


if __name__ == "__main__":
    import sys
    try:
        sys.exit(_main(sys.argv[1:]))
    except RefError as ex:
        print("wan_ref: %s" % ex, file=sys.stderr)
        sys.exit(2)
