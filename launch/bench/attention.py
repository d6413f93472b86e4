#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention at the Wan shapes, the
side-by-side reference for our flash and cudnn backends: the FLASH_ATTENTION
and CUDNN_ATTENTION backends forced one at a time through
torch.nn.attention.sdpa_kernel. Same table and JSON format as
tests/gpu/test_attention_bench.c (header lines start with '#', JSON lines
prefixed "json "). FLOPs = 4 * Lq * Lk * heads * 128.

Before timing, each backend's output is compared with a float32 SDPA on 64
query rows forced to the MATH backend (rel L2 <= 2e-2; without the force,
float32 would dispatch to the memory-efficient kernel), and a backend that
fails it is not timed, so one that silently computes something else is not
reported as fast. A backend torch refuses for a shape (no kernel available)
gets a "refused" row. Exit 0, 1 when a check failed, 77 (skip) without torch
2.x's torch.nn.attention or without a CUDA device.

    python3 launch/bench/attention.py [--quick]
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="only self-32760, 3 timed runs")
    ap.add_argument("--heads", type=int, default=40)
    args = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print(f"skip: torch not importable ({e})")
        return 77
    if not torch.cuda.is_available():
        print("skip: no CUDA device for torch")
        return 77
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(0)
    cases = [("self-32760", 32760, 32760), ("cross-32760", 32760, 512),
             ("self-75600", 75600, 75600), ("cross-75600", 75600, 512)]
    if args.quick:
        cases = cases[:1]
    iters = 3 if args.quick else 20
    H, D = args.heads, 128
    backends = [("torch-flash", SDPBackend.FLASH_ATTENTION),
                ("torch-cudnn", SDPBackend.CUDNN_ATTENTION)]
    print(f"# torch sdpa, {name}, torch {torch.__version__}, cudnn "
          f"{torch.backends.cudnn.version()}, heads {H} x {D}, bf16")
    print(f"# {'case':<12} {'backend':<12} {'Lq':>8} {'Lk':>8} {'ms':>10} {'TFLOP/s':>10}")
    fails = 0
    gen = torch.Generator(device=dev).manual_seed(torch.seed() % (2**63))
    for cname, Lq, Lk in cases:
        # our layout (L, heads, 128) is (batch 1, L, heads, 128) in torch;
        # SDPA wants (batch, heads, L, 128): a transposed view, as Wan does
        q = (torch.rand(1, Lq, H, D, device=dev, generator=gen) * 4 - 2).to(torch.bfloat16)
        k = (torch.rand(1, Lk, H, D, device=dev, generator=gen) * 4 - 2).to(torch.bfloat16)
        v = (torch.rand(1, Lk, H, D, device=dev, generator=gen) * 2 - 1).to(torch.bfloat16)
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
        rows = torch.randperm(Lq, device=dev, generator=gen)[:64]
        with sdpa_kernel([SDPBackend.MATH]):
            ref = F.scaled_dot_product_attention(qt[:, :, rows].float(), kt.float(), vt.float())
        flop = 4.0 * Lq * Lk * H * D
        for bname, b in backends:
            try:
                with sdpa_kernel([b]):
                    out = F.scaled_dot_product_attention(qt, kt, vt)
                    err = ((out[:, :, rows].float() - ref).norm() / ref.norm()).item()
                    print(f"# {cname}: {bname} vs fp32 math rel L2 {err:.3e}")
                    if not err <= 2e-2:
                        print(f"FAIL {cname} {bname}: rel L2 {err:.3e}", file=sys.stderr)
                        print(f"  {cname:<12} {bname:<12} {Lq:>8} {Lk:>8} {'wrong':>10} {'-':>10}")
                        fails += 1
                        continue
                    for _ in range(2):
                        F.scaled_dot_product_attention(qt, kt, vt)
                    e0 = torch.cuda.Event(enable_timing=True)
                    e1 = torch.cuda.Event(enable_timing=True)
                    e0.record()
                    for _ in range(iters):
                        F.scaled_dot_product_attention(qt, kt, vt)
                    e1.record()
                    torch.cuda.synchronize()
                    ms = e0.elapsed_time(e1) / iters
            except RuntimeError as e:
                msg = str(e).splitlines()[0][:80]
                print(f"  {cname:<12} {bname:<12} {Lq:>8} {Lk:>8} {'refused':>10} {'-':>10}"
                      f"  # {msg}")
                continue
            tf = flop / (ms * 1e-3) / 1e12
            print(f"  {cname:<12} {bname:<12} {Lq:>8} {Lk:>8} {ms:>10.3f} {tf:>10.1f}")
            print("json " + json.dumps({"case": cname, "backend": bname, "Lq": Lq, "Lk": Lk,
                                        "heads": H, "hd": D, "ms": round(ms, 4),
                                        "tflops": round(tf, 2), "gpu": name}))
        del q, k, v, qt, kt, vt, ref
        torch.cuda.empty_cache()
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
