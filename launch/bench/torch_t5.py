#!/usr/bin/env python3
"""The published UMT5-XXL encoder in plain PyTorch, bf16, for bench_t5.sh.

usage: torch_t5.py TOKENS REPS

Written from the published architecture (Wan's wan/modules/t5.py and
transformers' UMT5 encoder, which compute the same thing): token embedding,
24 layers of T5LayerNorm (fp32 statistics), self-attention without the
1/sqrt(d) scale and with each layer's own relative-position bias (32
bidirectional buckets, max distance 128), softmax in fp32, gated-GELU (tanh)
feed-forward, a final T5LayerNorm; eager attention as both publish it.
Random weights of the published shapes in bf16 (the speed does not depend
on the values; staticpipe's side runs synth:umt5-xxl). One sequence of
TOKENS tokens; two warm-up forwards, then REPS timed with CUDA events.
Prints one JSON line: init_s (the weights made on the GPU), the median and
min forward ms, the device memory peak.
"""
import json
import math
import sys
import time

import torch

V, D, A, F, H, LAYERS, NB, MAXD = 256384, 4096, 4096, 10240, 64, 24, 32, 128


def buckets(L, dev):
    ctx = torch.arange(L, device=dev)[:, None]
    mem = torch.arange(L, device=dev)[None, :]
    rel = mem - ctx
    nb = NB // 2
    out = (rel > 0).long() * nb
    rel = rel.abs()
    exact = nb // 2
    large = exact + (torch.log(rel.float().clamp(min=1) / exact) / math.log(MAXD / exact)
                     * (nb - exact)).long()
    large = torch.min(large, torch.full_like(large, nb - 1))
    return out + torch.where(rel < exact, rel, large)


def norm(x, w):
    v = x.float().pow(2).mean(-1, keepdim=True)
    return w * (x.float() * torch.rsqrt(v + 1e-6)).to(w.dtype)


def main():
    L, reps = int(sys.argv[1]), int(sys.argv[2])
    dev = torch.device("cuda")
    bf = torch.bfloat16
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    g = torch.Generator(device=dev).manual_seed(0)
    r = lambda *s: (torch.randn(*s, device=dev, dtype=bf, generator=g) * 0.02)  # noqa: E731
    emb = r(V, D)
    layers = [dict(n1=torch.ones(D, device=dev, dtype=bf), q=r(A, D), k=r(A, D), v=r(A, D),
                   o=r(D, A), n2=torch.ones(D, device=dev, dtype=bf), gate=r(F, D), fc1=r(F, D),
                   fc2=r(D, F), pos=r(NB, H)) for _ in range(LAYERS)]
    fn = torch.ones(D, device=dev, dtype=bf)
    torch.cuda.synchronize()
    init_s = time.perf_counter() - t0
    ids = torch.randint(0, V, (1, L), device=dev, generator=g)
    bk = buckets(L, dev)

    @torch.no_grad()
    def forward():
        x = emb[ids]
        hd = A // H
        for w in layers:
            y = norm(x, w["n1"])
            q = (y @ w["q"].T).view(1, L, H, hd).transpose(1, 2)
            k = (y @ w["k"].T).view(1, L, H, hd).transpose(1, 2)
            v = (y @ w["v"].T).view(1, L, H, hd).transpose(1, 2)
            bias = w["pos"][bk].permute(2, 0, 1)[None]
            s = torch.matmul(q, k.transpose(-1, -2)) + bias
            p = torch.softmax(s.float(), dim=-1).type_as(s)
            a = torch.matmul(p, v).transpose(1, 2).reshape(1, L, A)
            x = x + a @ w["o"].T
            y = norm(x, w["n2"])
            x = x + (torch.nn.functional.gelu(y @ w["gate"].T, approximate="tanh")
                     * (y @ w["fc1"].T)) @ w["fc2"].T
        return norm(x, fn)

    for _ in range(2):
        forward()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    ms = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        forward()
        b.record()
        torch.cuda.synchronize()
        ms.append(a.elapsed_time(b))
    ms.sort()
    print(json.dumps({"torch": torch.__version__, "tokens": L, "init_s": init_s,
                      "median_ms": ms[len(ms) // 2], "min_ms": ms[0],
                      "peak_bytes": torch.cuda.max_memory_allocated()}))


if __name__ == "__main__":
    main()
