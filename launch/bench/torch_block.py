#!/usr/bin/env python3
"""One Wan 2.1 DiT block in PyTorch, timed eager and under torch.compile.

This is the baseline a user would otherwise run: the block of
MODEL.md written plainly in PyTorch, bf16 weights and
activations with an fp32 residual stream and fp32 modulation/norm statistics,
i.e. what bf16 autocast does with the published model:

  h  = LayerNorm(x) * (1 + scale1) + shift1                   (fp32 -> bf16)
  q  = RMSNorm(Wq h + bq) * nq,  k = RMSNorm(Wk h + bk) * nk  (stats in fp32)
  v  = Wv h + bv
  q, k <- 3-D RoPE on interleaved pairs, 22/21/21 pairs per (f, h, w),
          angles in double, rotation in fp32
  x += (Wo SDPA(q, k, v) + bo) * gate1                        (fp32 residual)
  y  = LayerNorm_affine(x) (norm3);  q = RMSNorm(Wq' y + bq') * nq'
  x += Wo' SDPA(q, K_ctx, V_ctx) + bo'   (K_ctx, V_ctx over 512 context rows,
                                          computed once per prompt: untimed)
  h  = LayerNorm(x) * (1 + scale2) + shift2
  x += (W2 GELU_tanh(W1 h + b1) + b2) * gate2

Cases (random weights, batch 1, 512 context rows):
  14b   dim 5120, ffn 13824, 40 heads, 32,760 tokens (grid 21x30x52, 480p)
  1.3b  dim 1536, ffn  8960, 12 heads, 32,760 tokens
  14b-720p  the 14B block at 75,600 tokens (grid 21x45x80)

Each case is timed eager and then compiled (torch.compile, default mode) with
CUDA events: warm-up, then the median (and min) of --reps runs. FLOPs per
block are MODEL.md's "Cost": 12 L D^2 + 4 L D F + 4 L^2 D + 4 L 512 D
(the context k/v projections are per prompt and excluded). Peak memory is
torch.cuda.max_memory_allocated over the case (weights and inputs included).

Output: a fixed-width table on stdout (header lines start with '#'), rows
printed as they are measured, then one JSON line; --json-out FILE writes the
same JSON (atomically, after every row, so a killed run keeps what it had).
Progress goes to stderr. A torch.compile failure is reported in the row's
status and the eager numbers are still printed.

Before timing, a sanity check runs the block at a tiny size (dim 256, 2
heads of 128, grid 3x4x5, 512 context rows) on the GPU in bf16 and compares
its update x_out - x_in with an independent float64 CPU implementation
(explicit softmax, complex-multiply RoPE, formula GELU): relative L2 must be
<= 2e-2 (STYLE.md, bf16 end to end). --check runs only that check and exits
1 if it fails. The compiled output of every case is also compared with the
eager one.

Usage:
  python3 launch/bench/torch_block.py [--only 14b|1.3b|14b-720p] [--reps N]
      [--warmup N] [--no-compile] [--json-out FILE] [--seed S]
      [--sdpa default|flash|cudnn|efficient|math] [--time-budget SECONDS]
  python3 launch/bench/torch_block.py --check
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

# launch/ holds the shared atomic_write module; found from any cwd.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from atomic_write import atomic_path  # noqa: E402

CASES = {
    # name: (dim, ffn_dim, heads, grid (F', H', W'))
    "14b": (5120, 13824, 40, (21, 30, 52)),
    "1.3b": (1536, 8960, 12, (21, 30, 52)),
    "14b-720p": (5120, 13824, 40, (21, 45, 80)),
}
# --only 14b selects both 14B cases (480p and 720p), as the brief groups them
ONLY = {"14b": ("14b", "14b-720p"), "1.3b": ("1.3b",), "14b-720p": ("14b-720p",)}
HEAD_DIM = 128
CTX_ROWS = 512
EPS = 1e-6
CHECK_TOL = 2e-2          # STYLE.md: bf16 GPU path end to end against fp32
COMPILE_VS_EAGER_TOL = 2e-2
# a compile of one block has taken well under this; used to decide whether a
# compile still fits in the time budget
COMPILE_ALLOWANCE_S = 150.0

T0 = time.time()


def log(msg):
    print("[torch_block %7.1fs] %s" % (time.time() - T0, msg), file=sys.stderr, flush=True)


# ------------------------------------------------------------ pure formulas
# (no torch needed: checkable on a machine without it)

def block_flops(tokens, dim, ffn, ctx_rows=CTX_ROWS):
    """FLOPs of one block (MODEL.md "Cost"), context k/v excluded."""
    L, D, F = tokens, dim, ffn
    return 12 * L * D * D + 4 * L * D * F + 4 * L * L * D + 4 * L * ctx_rows * D


def rope_axis_freqs(head_dim):
    """Per-axis angular frequencies of the 3-D RoPE for one head.

    The head's c = head_dim/2 pairs split as c - 2(c//3) pairs for the frame
    index and c//3 each for row and column; an axis with n pairs uses
    w_j = 10000^(-2j/(2n)), j = 0..n-1 (for head_dim 128: 22 pairs with
    10000^(-2j/44), then 21 and 21 with 10000^(-2j/42)).
    Returns three lists of floats (f, h, w)."""
    c = head_dim // 2
    split = (c - 2 * (c // 3), c // 3, c // 3)
    return [[10000.0 ** (-(2.0 * j) / (2 * n)) for j in range(n)] for n in split]


def median_ms(times):
    return statistics.median(times)


def atomic_write_text(path, text):
    with atomic_path(path, prefix=".torch_block.") as tmp, open(tmp, "w") as f:
        f.write(text)


# ------------------------------------------------------------ torch parts

def import_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("torch_block.py: cannot import torch: this benchmark needs PyTorch "
                 "(pip install torch) and a CUDA GPU")
    return torch


def make_block_class(torch):
    nn = torch.nn
    F = torch.nn.functional
    bf16 = torch.bfloat16

    def rms_norm(x, w):
        # x (1, L, D) bf16; statistics over the whole dim (all heads) in fp32
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)).to(bf16) * w

    def rope(x, cos, sin):
        # x (1, L, H, hd) bf16; cos, sin (L, 1, hd/2) fp32 (angles were double)
        xf = x.float().unflatten(-1, (-1, 2))          # (1, L, H, hd/2, 2)
        x0, x1 = xf[..., 0], xf[..., 1]                # (1, L, H, hd/2)
        out = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
        return out.flatten(-2).to(bf16)                # (1, L, H, hd)

    class WanBlock(nn.Module):
        """One Wan 2.1 T2V block; parameter names follow the official keys."""

        def __init__(self, dim, ffn, heads, device, gen):
            super().__init__()
            self.dim, self.ffn, self.heads = dim, ffn, heads
            self.hd = dim // heads

            def p(t):
                return nn.Parameter(t, requires_grad=False)

            def w(o, i):  # (o, i) bf16, std 1/sqrt(i) so activations stay O(1)
                return p((torch.randn(o, i, device=device, generator=gen) * i ** -0.5).to(bf16))

            def b(o):     # (o,) bf16
                return p((torch.randn(o, device=device, generator=gen) * 0.02).to(bf16))

            def g(o):     # (o,) bf16 norm weight around 1
                return p((1.0 + 0.1 * torch.randn(o, device=device, generator=gen)).to(bf16))

            D, Fd = dim, ffn
            self.modulation = p(torch.randn(1, 6, D, device=device, generator=gen) * D ** -0.5)  # (1,6,D) fp32
            self.sa_q_w, self.sa_q_b = w(D, D), b(D)
            self.sa_k_w, self.sa_k_b = w(D, D), b(D)
            self.sa_v_w, self.sa_v_b = w(D, D), b(D)
            self.sa_o_w, self.sa_o_b = w(D, D), b(D)
            self.sa_norm_q, self.sa_norm_k = g(D), g(D)
            self.norm3_w = p(1.0 + 0.1 * torch.randn(D, device=device, generator=gen))   # (D,) fp32
            self.norm3_b = p(0.02 * torch.randn(D, device=device, generator=gen))        # (D,) fp32
            self.ca_q_w, self.ca_q_b = w(D, D), b(D)
            self.ca_k_w, self.ca_k_b = w(D, D), b(D)
            self.ca_v_w, self.ca_v_b = w(D, D), b(D)
            self.ca_o_w, self.ca_o_b = w(D, D), b(D)
            self.ca_norm_q, self.ca_norm_k = g(D), g(D)
            self.ffn0_w, self.ffn0_b = w(Fd, D), b(Fd)
            self.ffn2_w, self.ffn2_b = w(D, Fd), b(D)

        def context_kv(self, ctx):
            """ctx (1, 512, D) bf16 embedded context -> k, v (1, H, 512, hd)
            bf16: once per prompt, so outside the timed forward."""
            n = ctx.shape[1]
            k = rms_norm(F.linear(ctx, self.ca_k_w, self.ca_k_b), self.ca_norm_k)
            v = F.linear(ctx, self.ca_v_w, self.ca_v_b)
            k = k.view(1, n, self.heads, self.hd).transpose(1, 2)
            v = v.view(1, n, self.heads, self.hd).transpose(1, 2)
            return k.contiguous(), v.contiguous()

        def forward(self, x, e0, ck, cv, cos, sin):
            # x (1, L, D) fp32 residual; e0 (1, 6, D) fp32; ck, cv (1, H, 512, hd)
            # bf16; cos, sin (L, 1, hd/2) fp32
            L, D, H, hd = x.shape[1], self.dim, self.heads, self.hd
            shift1, scale1, gate1, shift2, scale2, gate2 = (self.modulation + e0).chunk(6, dim=1)  # (1,1,D) fp32

            # self-attention
            h = (F.layer_norm(x, (D,), eps=EPS) * (1 + scale1) + shift1).to(bf16)   # (1, L, D)
            q = rms_norm(F.linear(h, self.sa_q_w, self.sa_q_b), self.sa_norm_q).view(1, L, H, hd)
            k = rms_norm(F.linear(h, self.sa_k_w, self.sa_k_b), self.sa_norm_k).view(1, L, H, hd)
            v = F.linear(h, self.sa_v_w, self.sa_v_b).view(1, L, H, hd)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                               v.transpose(1, 2))            # (1, H, L, hd)
            a = a.transpose(1, 2).reshape(1, L, D)
            x = x + F.linear(a, self.sa_o_w, self.sa_o_b).float() * gate1     # (1, L, D) fp32

            # cross-attention over the context rows (no RoPE, no gate)
            y = F.layer_norm(x, (D,), self.norm3_w, self.norm3_b, EPS).to(bf16)
            q = rms_norm(F.linear(y, self.ca_q_w, self.ca_q_b), self.ca_norm_q)
            q = q.view(1, L, H, hd).transpose(1, 2)                           # (1, H, L, hd)
            a = F.scaled_dot_product_attention(q, ck, cv).transpose(1, 2).reshape(1, L, D)
            x = x + F.linear(a, self.ca_o_w, self.ca_o_b).float()

            # feed-forward
            h = (F.layer_norm(x, (D,), eps=EPS) * (1 + scale2) + shift2).to(bf16)
            f = F.gelu(F.linear(h, self.ffn0_w, self.ffn0_b), approximate="tanh")  # (1, L, ffn)
            return x + F.linear(f, self.ffn2_w, self.ffn2_b).float() * gate2

    return WanBlock


def rope_tables(torch, grid, head_dim, device):
    """cos, sin (L, 1, hd/2) fp32 for tokens in (f, h, w) row-major order;
    angles position * w_j computed in double."""
    Fg, Hg, Wg = grid
    wf, wh, ww = (torch.tensor(v, dtype=torch.float64, device=device)
                  for v in rope_axis_freqs(head_dim))
    af = torch.arange(Fg, dtype=torch.float64, device=device)[:, None] * wf   # (F, 22)
    ah = torch.arange(Hg, dtype=torch.float64, device=device)[:, None] * wh   # (H, 21)
    aw = torch.arange(Wg, dtype=torch.float64, device=device)[:, None] * ww   # (W, 21)
    ang = torch.cat([af[:, None, None, :].expand(Fg, Hg, Wg, -1),
                     ah[None, :, None, :].expand(Fg, Hg, Wg, -1),
                     aw[None, None, :, :].expand(Fg, Hg, Wg, -1)], dim=-1)
    ang = ang.reshape(Fg * Hg * Wg, 1, head_dim // 2)                       # (L, 1, 64)
    return torch.cos(ang).float(), torch.sin(ang).float()


def make_inputs(torch, block, grid, device, gen):
    """x (1, L, D) fp32, e0 (1, 6, D) fp32, context k/v, RoPE tables."""
    L = grid[0] * grid[1] * grid[2]
    D = block.dim
    x = torch.randn(1, L, D, device=device, generator=gen)
    e0 = 0.5 * torch.randn(1, 6, D, device=device, generator=gen)
    ctx = torch.randn(1, CTX_ROWS, D, device=device, generator=gen).to(torch.bfloat16)
    with torch.no_grad():
        ck, cv = block.context_kv(ctx)
    cos, sin = rope_tables(torch, grid, block.hd, device)
    return x, e0, ctx, ck, cv, cos, sin


# ------------------------------------------------------------ float64 reference

def reference_f64(torch, block, x, e0, ctx, grid):
    """The same block in float64 on the CPU, written independently of the
    fast path: explicit LayerNorm/RMSNorm, complex-multiply RoPE, explicit
    softmax attention, formula GELU. Returns x_out (1, L, D) float64."""
    dd = torch.float64
    P = {n: t.detach().to("cpu", dd) for n, t in block.named_parameters()}
    x = x.detach().to("cpu", dd)
    e0 = e0.detach().to("cpu", dd)
    ctx = ctx.detach().to("cpu", dd)
    L, D, H, hd = x.shape[1], block.dim, block.heads, block.hd

    def ln(t, w=None, b=None):
        mu = t.mean(-1, keepdim=True)
        var = ((t - mu) ** 2).mean(-1, keepdim=True)
        out = (t - mu) / torch.sqrt(var + EPS)
        return out if w is None else out * w + b

    def rms(t, w):
        return t / torch.sqrt((t * t).mean(-1, keepdim=True) + EPS) * w

    def lin(t, name):
        return t @ P[name + "_w"].T + P[name + "_b"]

    def heads(t):  # (1, n, D) -> (H, n, hd)
        return t[0].reshape(t.shape[1], H, hd).permute(1, 0, 2)

    def attn(q, k, v):  # (H, n, hd) each
        s = q @ k.transpose(1, 2) / math.sqrt(hd)
        s = s - s.max(-1, keepdim=True).values
        p = torch.exp(s)
        p = p / p.sum(-1, keepdim=True)
        return (p @ v).permute(1, 0, 2).reshape(1, q.shape[1], D)

    # RoPE as the published source does it: complex multiply by e^{i angle},
    # angles written out per token from the formula
    fr = rope_axis_freqs(hd)
    ang = torch.zeros(L, hd // 2, dtype=dd)
    Fg, Hg, Wg = grid
    for t in range(L):
        pos = (t // (Hg * Wg), (t // Wg) % Hg, t % Wg)
        col = 0
        for axis in range(3):
            for wj in fr[axis]:
                ang[t, col] = pos[axis] * wj
                col += 1
    rot = torch.polar(torch.ones_like(ang), ang)              # (L, 64) complex128

    def rope_c(t):  # (1, L, D)
        tc = torch.view_as_complex(t[0].reshape(L, H, hd // 2, 2).contiguous())
        return torch.view_as_real(tc * rot[:, None, :]).reshape(1, L, D)

    m = P["modulation"] + e0                                   # (1, 6, D)
    sh1, sc1, g1, sh2, sc2, g2 = (m[:, i:i + 1] for i in range(6))
    h = ln(x) * (1 + sc1) + sh1
    q = rope_c(rms(lin(h, "sa_q"), P["sa_norm_q"]))
    k = rope_c(rms(lin(h, "sa_k"), P["sa_norm_k"]))
    v = lin(h, "sa_v")
    x = x + lin(attn(heads(q), heads(k), heads(v)), "sa_o") * g1
    y = ln(x, P["norm3_w"], P["norm3_b"])
    q = rms(lin(y, "ca_q"), P["ca_norm_q"])
    k = rms(lin(ctx, "ca_k"), P["ca_norm_k"])
    v = lin(ctx, "ca_v")
    x = x + lin(attn(heads(q), heads(k), heads(v)), "ca_o")
    h = ln(x) * (1 + sc2) + sh2
    f = lin(h, "ffn0")
    f = 0.5 * f * (1 + torch.tanh(math.sqrt(2 / math.pi) * (f + 0.044715 * f ** 3)))
    return x + lin(f, "ffn2") * g2


def rel_l2(torch, a, b):
    a = a.detach().to("cpu", torch.float64)
    b = b.detach().to("cpu", torch.float64)
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


def rel_l2_dev(torch, a, b):
    """Relative L2 on the tensors' own device in fp32 (big activations)."""
    a, b = a.float(), b.float()
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


def run_check(torch, WanBlock, device, seed):
    """Tiny block on `device` in bf16 vs float64 CPU. Returns (ok, rel_l2)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    grid = (3, 4, 5)
    block = WanBlock(256, 512, 2, device, gen)
    x, e0, ctx, ck, cv, cos, sin = make_inputs(torch, block, grid, device, gen)
    with torch.no_grad():
        out = block(x, e0, ck, cv, cos, sin)
        ref = reference_f64(torch, block, x, e0, ctx, grid)
    x64 = x.detach().to("cpu", torch.float64)
    err = rel_l2(torch, out.to("cpu", torch.float64) - x64, ref - x64)
    ok = math.isfinite(err) and err <= CHECK_TOL
    log("check: tiny block (dim 256, 2 heads, grid 3x4x5) bf16 on %s vs float64 cpu: "
        "relative L2 of the update %.3e (tolerance %.0e) %s" % (device, err, CHECK_TOL,
                                                               "ok" if ok else "FAILED"))
    return ok, err


# ------------------------------------------------------------ timing

def time_cuda(torch, fn, args, warmup, reps):
    """Median and min of `reps` runs in ms, each between two CUDA events."""
    for _ in range(warmup):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        fn(*args)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return median_ms(times), min(times)


def sdpa_context(torch, name):
    """A context manager selecting the SDPA backend (default: PyTorch picks)."""
    import contextlib
    if name == "default":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    be = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
          "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}[name]
    return sdpa_kernel(be)


def fmt_row(r):
    def num(v, f):
        return f % v if isinstance(v, (int, float)) else "-"
    return "%10s %7d %-8s %9s %9s %8s %9s %9s  %s" % (
        r["case"], r["tokens"], r["mode"], num(r.get("ms"), "%.2f"),
        num(r.get("ms_min"), "%.2f"), num(r.get("tflops"), "%.1f"),
        num(r.get("peak_gib"), "%.2f"), num(r.get("compile_s"), "%.1f"), r["status"])


HEADER = "#%9s %7s %-8s %9s %9s %8s %9s %9s  %s" % (
    "case", "tokens", "mode", "ms_median", "ms_min", "TFLOP/s", "peak_GiB", "compile_s", "status")


def bench_case(torch, WanBlock, name, args, gen, emit):
    dim, ffn, heads, grid = CASES[name]
    L = grid[0] * grid[1] * grid[2]
    flops = block_flops(L, dim, ffn)
    base = {"case": name, "tokens": L, "grid": list(grid), "dim": dim, "ffn_dim": ffn,
            "heads": heads, "flops": flops}
    dev = torch.device("cuda")
    torch.cuda.empty_cache()
    log("%s: building block (dim %d, ffn %d, %d heads) and inputs for %d tokens"
        % (name, dim, ffn, heads, L))
    block = WanBlock(dim, ffn, heads, dev, gen)
    inputs = make_inputs(torch, block, grid, dev, gen)
    x, e0, _ctx, ck, cv, cos, sin = inputs
    fargs = (x, e0, ck, cv, cos, sin)
    eager_out = None

    def measure(mode, fn):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        ms, ms_min = time_cuda(torch, fn, fargs, args.warmup, args.reps)
        peak = torch.cuda.max_memory_allocated() / 2 ** 30
        r = dict(base, mode=mode, ms=ms, ms_min=ms_min, tflops=flops / (ms * 1e-3) / 1e12,
                 peak_gib=peak, reps=args.reps, status="ok")
        return r

    with torch.no_grad(), sdpa_context(torch, args.sdpa):
        log("%s: eager, %d warm-up + %d timed runs" % (name, args.warmup, args.reps))
        try:
            r = measure("eager", block)
            # kept (one activation) only until the compiled output is compared
            eager_out = block(*fargs)
            if not bool(torch.isfinite(eager_out).all()):
                r["status"] = "non-finite output"
        except Exception as exc:  # e.g. out of memory: report and go on
            r = dict(base, mode="eager", status="failed: %s" % one_line(exc))
        emit(r)

        if args.no_compile:
            emit(dict(base, mode="compiled", status="skipped (--no-compile)"))
        elif time.time() - T0 > args.time_budget - COMPILE_ALLOWANCE_S:
            emit(dict(base, mode="compiled", status="skipped: time budget (%.0f s) nearly spent"
                      % args.time_budget))
        else:
            r = dict(base, mode="compiled")
            try:
                import torch._dynamo as dynamo
                log("%s: torch.compile (first call compiles)" % name)
                dynamo.reset()
                cblock = torch.compile(block, dynamic=False)
                t_c = time.time()
                cout = cblock(*fargs)
                torch.cuda.synchronize()
                compile_s = time.time() - t_c
                log("%s: compiled in %.1f s; timing" % (name, compile_s))
                d = None
                if eager_out is not None:
                    d = rel_l2_dev(torch, cout - x, eager_out - x)
                # free both outputs so the compiled peak is measured like eager's
                del cout
                eager_out = None
                r = measure("compiled", cblock)
                r["compile_s"] = compile_s
                if d is not None:
                    r["rel_l2_vs_eager"] = d
                    if not (math.isfinite(d) and d <= COMPILE_VS_EAGER_TOL):
                        r["status"] = "output differs from eager (rel L2 %.2e)" % d
            except Exception as exc:
                log("%s: torch.compile failed: %s" % (name, one_line(exc)))
                r["status"] = "compile failed: %s" % one_line(exc)
            emit(r)
            try:
                torch._dynamo.reset()
            except Exception:
                pass
    del block, inputs, fargs, eager_out, x, ck, cv, cos, sin, e0, _ctx
    torch.cuda.empty_cache()


def one_line(exc):
    s = ("%s: %s" % (type(exc).__name__, exc)).replace("\n", " ")
    return s[:300]


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Time one Wan 2.1 DiT block in PyTorch (bf16, eager and torch.compile) "
                    "for the 14B and 1.3B shapes; see the module docstring.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--only", choices=sorted(ONLY), help="run only these cases "
                    "(14b = the 14B block at 32,760 and 75,600 tokens; default all)")
    ap.add_argument("--reps", type=int, default=10, help="timed runs per measurement (median)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs before timing")
    ap.add_argument("--no-compile", action="store_true", help="eager only")
    ap.add_argument("--json-out", metavar="FILE", help="also write the JSON result here")
    ap.add_argument("--seed", type=int, default=None, help="weights/inputs seed (default: from the clock, printed)")
    ap.add_argument("--sdpa", default="default",
                    choices=("default", "flash", "cudnn", "efficient", "math"),
                    help="SDPA backend; default lets PyTorch choose")
    ap.add_argument("--time-budget", type=float, default=540.0, metavar="SECONDS",
                    help="skip a torch.compile that would start later than this minus %.0f s"
                    % COMPILE_ALLOWANCE_S)
    ap.add_argument("--check", action="store_true",
                    help="only run the tiny bf16-vs-float64 sanity check; exit 1 if it fails")
    a = ap.parse_args(argv)
    if a.reps < 1 or a.warmup < 0:
        ap.error("--reps must be >= 1 and --warmup >= 0 (got %d, %d)" % (a.reps, a.warmup))
    if a.time_budget <= 0:
        ap.error("--time-budget must be > 0 (got %g)" % a.time_budget)
    if a.seed is None:
        a.seed = int(time.time()) & 0x7FFFFFFF
    return a


def main(argv):
    args = parse_args(argv)
    torch = import_torch()
    WanBlock = make_block_class(torch)
    have_cuda = torch.cuda.is_available()
    log("seed %d, torch %s, cuda %s" % (args.seed, torch.__version__,
                                        torch.version.cuda if have_cuda else "unavailable"))

    if args.check:
        dev = "cuda" if have_cuda else "cpu"
        if not have_cuda:
            log("no CUDA device: the check runs the bf16 path on the CPU instead")
        ok, _ = run_check(torch, WanBlock, dev, args.seed)
        return 0 if ok else 1

    if not have_cuda:
        print("torch_block.py: no CUDA device visible to torch; the benchmark needs one "
              "(--check runs on the CPU)", file=sys.stderr)
        return 1

    props = torch.cuda.get_device_properties(0)
    doc = {"bench": "torch_block", "torch": torch.__version__, "cuda": torch.version.cuda,
           "device": props.name, "device_mem_gib": props.total_memory / 2 ** 30,
           "seed": args.seed, "sdpa": args.sdpa, "reps": args.reps, "warmup": args.warmup,
           "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "results": []}

    try:
        ok, err = run_check(torch, WanBlock, "cuda", args.seed)
        doc["check"] = {"rel_l2": err, "tol": CHECK_TOL, "ok": ok}
    except Exception as exc:
        log("check failed to run: %s" % one_line(exc))
        doc["check"] = {"ok": False, "error": one_line(exc)}

    print("# staticpipe launch/bench/torch_block.py: one Wan 2.1 DiT block in PyTorch "
          "(bf16 weights/activations, fp32 residual), batch 1, %d context rows" % CTX_ROWS)
    print("# torch %s, cuda %s, %s, seed %d, sdpa %s, median of %d after %d warm-up"
          % (torch.__version__, torch.version.cuda, props.name, args.seed, args.sdpa,
             args.reps, args.warmup))
    print("# FLOPs/block = 12 L D^2 + 4 L D F + 4 L^2 D + 4 L 512 D; check rel L2 %s"
          % ("%.2e" % doc["check"]["rel_l2"] if "rel_l2" in doc["check"] else "n/a"))
    print(HEADER, flush=True)

    def emit(r):
        doc["results"].append(r)
        print(fmt_row(r), flush=True)
        if args.json_out:
            try:
                atomic_write_text(args.json_out, json.dumps(doc) + "\n")
            except OSError as exc:
                log("cannot write --json-out %s: %s" % (args.json_out, exc))

    names = ONLY[args.only] if args.only else ("14b", "1.3b", "14b-720p")
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    for name in names:
        bench_case(torch, WanBlock, name, args, gen, emit)
    print(json.dumps(doc), flush=True)
    bad = [r for r in doc["results"] if r["status"] != "ok" and not r["status"].startswith("skipped")]
    return 1 if bad or not doc["check"].get("ok") else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
