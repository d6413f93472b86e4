#!/usr/bin/env python3
"""Check `staticpipe forward` against the Wan 2.1 DiT in PyTorch float64.

Not part of CI (it needs torch). For users who want to check a model file,
e.g. one made by `staticpipe convert`, against their own PyTorch stack:

    python3 tests/ref/published_parity.py --bin build/staticpipe --model wan13b.h5
    python3 tests/ref/published_parity.py --bin build/staticpipe --model wan13b.h5 \\
        --checkpoint Wan2.1-T2V-1.3B/diffusion_pytorch_model.safetensors

The PyTorch model has the module structure of the published wan/modules/
model.py (so its state_dict keys are the official checkpoint keys), written
from MODEL.md, and runs in float64 on the CPU with exact
attention. Its weights come from the staticpipe HDF5 file itself (layout
/embed/<key>, /blocks/NNNN/<key>, /head/<key>; bf16 stored as uint16 with
attribute dtype="bf16"), or, with --checkpoint, from the original
safetensors (official keys, optionally ComfyUI's `model.diffusion_model.`
prefix; several shards may be given), which checks the conversion too.
Loading is strict: a missing, extra or misshapen tensor is an error.

Random latent [16, F, H, W], timestep and context length from a printed seed
(--seed replays); the engine's `pred` must match to relative L2 <= --tol
(default 1e-5, the fp32 CPU path's per-forward tolerance in STYLE.md; use
2e-2 for --device cuda bf16 paths). With --checkpoint and a bf16 model file
from an fp32 checkpoint, the weights themselves differ by bf16 rounding:
use --tol 2e-2. Memory: float64 needs 8 bytes per parameter (1.3B: 11 GB;
14B: 115 GB). Exit 0 on agreement, 1 otherwise.
"""

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import h5py


def bf16_bits_to_f64(u):
    return (np.asarray(u, np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def attr(a, k):
    v = a[k]
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, str):
        return v
    v = np.asarray(v).reshape(-1)
    if v.dtype.kind in "SUO" and v.size == 1:
        x = v[0]
        return x.decode() if isinstance(x, bytes) else str(x)
    return v


def read_config(f):
    a = f.attrs
    if attr(a, "format") != "staticpipe" or attr(a, "arch") != "wan2.1-t2v":
        sys.exit("model file: not a staticpipe wan2.1-t2v file")
    cfg = {k: int(attr(a, k)[0]) for k in ("dim", "ffn_dim", "heads", "layers", "in_dim",
                                           "out_dim", "text_len", "text_dim", "freq_dim")}
    cfg["patch"] = tuple(int(v) for v in attr(a, "patch"))
    cfg["eps"] = float(attr(a, "eps")[0])
    return cfg


def read_h5_state(f):
    """Every dataset of the model file -> {official key: float64 array}."""
    sd = {}

    def put(key, ds):
        tag = ds.attrs.get("dtype", b"")
        tag = tag.decode() if isinstance(tag, bytes) else str(tag)
        if ds.dtype == np.uint16 and tag == "bf16":
            sd[key] = bf16_bits_to_f64(ds[()])
        elif ds.dtype == np.float32:
            sd[key] = ds[()].astype(np.float64)
        else:
            sys.exit("model file: dataset for %s has type %s/%r (want bf16 or float32)"
                     % (key, ds.dtype, tag))
    for k, ds in f["embed"].items():
        put(k, ds)
    for n, g in f["blocks"].items():
        for k, ds in g.items():
            put("blocks.%d.%s" % (int(n), k), ds)
    for k, ds in f["head"].items():
        put(k, ds)
    return sd


def read_checkpoint(paths):
    from safetensors.numpy import load_file
    sd = {}
    files = []
    for p in paths:
        files += ([os.path.join(p, x) for x in sorted(os.listdir(p)) if x.endswith(".safetensors")]
                  if os.path.isdir(p) else [p])
    for p in files:
        try:
            part = load_file(p)
        except Exception:
            # numpy has no bf16: go through torch for such files
            from safetensors.torch import load_file as tload
            part = {k: v.double().numpy() for k, v in tload(p).items()}
        for k, v in part.items():
            k = k[len("model.diffusion_model."):] if k.startswith("model.diffusion_model.") else k
            sd[k] = np.asarray(v, dtype=np.float64)
    return sd


def build_model(torch, cfg):
    """The published module tree (names = official keys), float64."""
    nn = torch.nn
    F = torch.nn.functional
    D, Fd, H, eps = cfg["dim"], cfg["ffn_dim"], cfg["heads"], cfg["eps"]

    class RMS(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(D))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * self.weight

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))
            self.norm_q, self.norm_k = RMS(), RMS()

    def sdpa(q, k, v):  # (Lq, D), (Lk, D) -> (Lq, D); exact softmax
        hd = D // H
        qh, kh, vh = (t.view(t.shape[0], H, hd).transpose(0, 1) for t in (q, k, v))
        p = torch.softmax(qh @ kh.transpose(1, 2) / math.sqrt(hd), dim=-1)
        return (p @ vh).transpose(0, 1).reshape(q.shape[0], D)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.modulation = nn.Parameter(torch.zeros(1, 6, D))
            self.self_attn, self.cross_attn = Attn(), Attn()
            self.norm3 = nn.LayerNorm(D, eps=eps, elementwise_affine=True)
            self.ffn = nn.Sequential(nn.Linear(D, Fd), nn.GELU(approximate="tanh"), nn.Linear(Fd, D))

        def forward(self, x, e0, ctx, rot):
            # x (L, D); e0 (6, D); ctx (text_len, D); rot (L, hd/2) complex
            sh1, sc1, g1, sh2, sc2, g2 = (self.modulation[0] + e0).unbind(0)
            ln = lambda t: F.layer_norm(t, (D,), eps=eps)  # noqa: E731
            a = self.self_attn
            h = ln(x) * (1 + sc1) + sh1
            q, k, v = a.norm_q(a.q(h)), a.norm_k(a.k(h)), a.v(h)

            def rope(t):
                tc = torch.view_as_complex(t.reshape(t.shape[0], H, -1, 2).contiguous())
                return torch.view_as_real(tc * rot[:, None, :]).reshape(t.shape[0], D)
            x = x + a.o(sdpa(rope(q), rope(k), v)) * g1
            c = self.cross_attn
            y = self.norm3(x)
            x = x + c.o(sdpa(c.norm_q(c.q(y)), c.norm_k(c.k(ctx)), c.v(ctx)))
            return x + self.ffn(ln(x) * (1 + sc2) + sh2) * g2

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            pt, ph, pw = cfg["patch"]
            self.modulation = nn.Parameter(torch.zeros(1, 2, D))
            self.head = nn.Linear(D, pt * ph * pw * cfg["out_dim"])

    class WanModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embedding = nn.Conv3d(cfg["in_dim"], D, cfg["patch"], cfg["patch"])
            self.text_embedding = nn.Sequential(nn.Linear(cfg["text_dim"], D),
                                                nn.GELU(approximate="tanh"), nn.Linear(D, D))
            self.time_embedding = nn.Sequential(nn.Linear(cfg["freq_dim"], D), nn.SiLU(),
                                                nn.Linear(D, D))
            self.time_projection = nn.Sequential(nn.SiLU(), nn.Linear(D, 6 * D))
            self.blocks = nn.ModuleList([Block() for _ in range(cfg["layers"])])
            self.head = Head()

        def forward(self, latent, t, context):
            # latent (C, F, H, W); context (L, text_dim), L <= text_len
            f64 = torch.float64
            pt, ph, pw = cfg["patch"]
            x = self.patch_embedding(latent[None])[0]            # (D, F', H', W')
            gf, gh, gw = x.shape[1:]
            x = x.flatten(1).T                                   # (L, D), (f,h,w) order
            half = cfg["freq_dim"] // 2
            arg = float(t) * torch.pow(10000.0, -torch.arange(half, dtype=f64) / half)
            s = torch.cat([torch.cos(arg), torch.sin(arg)]).float().double()
            e = self.time_embedding(s)
            e0 = self.time_projection(e).view(6, D)
            ctx = torch.zeros(cfg["text_len"], cfg["text_dim"], dtype=f64)
            ctx[:context.shape[0]] = context
            ctx = self.text_embedding(ctx)
            # RoPE angles: pairs split c-2(c//3), c//3, c//3 over (f, h, w)
            c = D // H // 2
            parts = []
            for n, size, shape in ((c - 2 * (c // 3), gf, (gf, 1, 1)), (c // 3, gh, (1, gh, 1)),
                                   (c // 3, gw, (1, 1, gw))):
                w = torch.pow(10000.0, -torch.arange(n, dtype=f64) * 2 / (2 * n))
                ang = torch.arange(size, dtype=f64)[:, None] * w
                parts.append(ang.view(*shape, n).expand(gf, gh, gw, n))
            ang = torch.cat(parts, -1).reshape(gf * gh * gw, c)
            rot = torch.polar(torch.ones_like(ang), ang)
            for blk in self.blocks:
                x = blk(x, e0, ctx, rot)
            sh, sc = (self.head.modulation[0] + e[None]).unbind(0)
            out = self.head.head(F.layer_norm(x, (D,), eps=cfg["eps"]) * (1 + sc) + sh)
            co = cfg["out_dim"]
            out = out.view(gf, gh, gw, pt, ph, pw, co)
            return torch.einsum("fhwpqrc->cfphqwr", out).reshape(co, gf * pt, gh * ph, gw * pw)

    return WanModel().double()


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="the staticpipe executable")
    ap.add_argument("--model", required=True, help="staticpipe HDF5 model file")
    ap.add_argument("--checkpoint", nargs="+", help="original safetensors file(s) or folder")
    ap.add_argument("--latent-shape", default="2x8x8", help="F x H x W of the latent (default 2x8x8)")
    ap.add_argument("--device", default="cpu", help="passed to staticpipe forward (default cpu)")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        sys.exit("published_parity.py needs torch (pip install torch)")
    seed = a.seed if a.seed is not None else int(time.time()) & 0x7FFFFFFF
    print("seed %d" % seed, flush=True)
    rng = np.random.default_rng(seed)
    try:
        fr, hr, wr = (int(v) for v in a.latent_shape.split("x"))
    except ValueError:
        sys.exit("--latent-shape %s: expected FxHxW" % a.latent_shape)

    with h5py.File(a.model, "r") as f:
        cfg = read_config(f)
        sd = read_h5_state(f) if not a.checkpoint else None
    if a.checkpoint:
        sd = read_checkpoint(a.checkpoint)
    model = build_model(torch, cfg)
    try:
        model.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()}, strict=True)
    except RuntimeError as exc:
        sys.exit("weights do not match the published layout: %s" % str(exc)[:2000])
    del sd

    latent = rng.standard_normal((cfg["in_dim"], fr, hr, wr)).astype(np.float32)
    t = int(rng.integers(0, 1001))
    L = int(rng.integers(1, cfg["text_len"] + 1))
    context = rng.standard_normal((L, cfg["text_dim"])).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = os.path.join(tmp, "in.h5"), os.path.join(tmp, "pred.h5")
        with h5py.File(inp, "w") as f:
            f["latent"] = latent
            f["context"] = context
        cmd = [a.bin, "forward", "--model", a.model, "--latent", inp, "--timestep", str(t),
               "--cond", inp, "--device", a.device, "-o", out]
        print("$ " + " ".join(cmd), flush=True)
        if subprocess.run(cmd).returncode != 0:
            print("staticpipe forward failed")
            return 1
        with h5py.File(out, "r") as f:
            pred = f["pred"][()].astype(np.float64)
    with torch.no_grad():
        ref = model(torch.from_numpy(latent.astype(np.float64)), t,
                    torch.from_numpy(context.astype(np.float64))).numpy()
    if pred.shape != ref.shape:
        print("pred shape %s, reference %s" % (pred.shape, ref.shape))
        return 1
    err = float(np.linalg.norm(pred - ref) / np.linalg.norm(ref))
    ok = math.isfinite(err) and err <= a.tol
    print("latent %s t=%d L=%d: relative L2 %.3e (tolerance %.1e) %s"
          % (latent.shape, t, L, err, a.tol, "ok" if ok else "MISMATCH"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
