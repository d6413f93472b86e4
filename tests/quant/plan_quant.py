"""`staticpipe plan` with quantized weights on GPUs, against the byte formula
of a CUDA stage's device memory written out here from planner/layout.c's
carve order and MODEL.md's tensor tables (not from the planner's code):

  1. Does Wan 2.1 14B fp8 fit one 24 GB card at 480x832x81 with CFG?
     (plan --gpu-mem 24gb --precision fp8: a GPU of unknown compute
     capability, counted as not sm_90, so with W8A8's fp32 products scratch)
  2. Wan 2.2 A14B fp8 on 2 x 24 GB cards: both experts resident?
  3. The same questions on H200s (sm_90, an inventory with "cc": "9.0"): no
     products scratch; and Wan 2.1 14B bf16 on one 24 GB card does not fit.

For each, every rank's peak from the formula (the arena plus the 1 GiB
reserve) must equal the plan's peak_bytes, and the answer (fits, resident)
must follow from formula against budget: the auto budget is the card less
max(5%, 256 MiB).

    plan_quant.py STATICPIPE_BIN"""
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import check, finish  # noqa: E402

BIN = sys.argv[1]
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GIB = 1 << 30
ALIGN = 256
# Wan 2.1 14B (MODEL.md "Configs"), 480x832x81: latent 21 x 60 x 104, tokens 21 x 30 x 52.
D, F, HD, C, TD, FREQ, IN, OUT = 5120, 13824, 128, 512, 4096, 256, 16, 16
L, VOXELS, BLOCKS = 21 * 30 * 52, 21 * 60 * 104, 40


def align(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


def block_bytes(fmt):
    """One block as a CUDA stage holds it: the ten linear weights (8 of
    D x D, ffn.0 F x D, ffn.2 D x F) 1 byte a value with an fp32 scale per
    output row in fp8, or 2 bytes a value in bf16; the rest bf16 (biases
    8 D + F + D, four RMSNorm weights 4 D, norm3 2 D, modulation 6 D), each
    tensor at an aligned offset."""
    lin = [(D, D)] * 8 + [(F, D), (D, F)]
    if fmt == "fp8":
        w = sum(align(r * c) + align(4 * r) for r, c in lin)
    else:
        w = sum(align(2 * r * c) for r, c in lin)
    rest = [6 * D] + [D] * 8 + [F, D] + [D] * 4 + [D, D]
    return w + sum(align(2 * n) for n in rest)


EMBED = sum(align(2 * n) for n in (D * IN * 4, D, D * TD, D, D * D, D, D * FREQ, D, D * D, D,
                                    6 * D * D, 6 * D))
HEAD = sum(align(2 * n) for n in (2 * D, 4 * OUT * D, 4 * OUT))


def arena(nblocks, first, last, experts, act_buffers, fmt, epilogue, prompts=2):
    """planner/layout.c's buffers in carve order (each at the next aligned
    offset), unchunked (rows = L), no LoRA, cache or Ulysses."""
    sizes = []
    for _ in range(experts):
        sizes += ([EMBED] if first else []) + ([HEAD] if last else [])
    sizes += [block_bytes(fmt)] * (experts * nblocks)
    kv = prompts * nblocks * C * D * 2
    sizes += [kv, kv] * experts                              # cross-attention k, v
    sizes += [(L + 7) * D * 4] * act_buffers                 # activation messages
    sizes += [max(2 * L * D * 2, L * F * 2)] + [L * D * 2] * 4  # k,v / ffn hidden; hb pb qb ab
    sizes += [C * max(TD, D) * 2, C * D * 4] + ([C * D * 2] if first else [])
    sizes += [L * HD // 2 * 4] * 2 + [6 * D * 4, 2 * D * 4, (FREQ + 2 * D) * 4]
    if first or last:
        sizes += [L * 4 * max(IN, OUT) * 4, max(IN, OUT) * VOXELS * 4]
    if fmt == "fp8":  # W8A8: codes and scales of the largest input, products scratch
        rows, k = max(L, C), max(D, F)
        sizes += [rows * k, rows * 4] + ([max(L * k, C * D) * 4] if epilogue else [])
    total = 0
    for s in sizes:
        total = align(total) + s
    return total


def plan(*args):
    r = subprocess.run([BIN, "plan", "--frames", "81", "--size", "480x832", "--json", *args],
                       capture_output=True, text=True)
    return r.returncode, (json.loads(r.stdout) if r.returncode == 0 else None), r.stderr


def budget_of(card):
    return card - max(int(0.05 * card), 256 << 20)


def check_rank(q, want_peak, budget, label):
    check(q["peak_bytes"] == want_peak, f"{label}: plan's peak {q['peak_bytes']} = the formula's "
          f"{want_peak} ({want_peak / GIB:.2f} GiB)")
    check(want_peak <= budget, f"{label}: the formula's peak {want_peak / GIB:.2f} GiB within the "
          f"budget {budget / GIB:.2f} GiB")


def main():
    card = 24 * GIB
    # 1. 14B fp8 on one 24 GB card (not known to be sm_90)
    rc, p, err = plan("--model", "synth:wan2.1-14b", "--gpu-mem", "24gb", "--precision", "fp8")
    check(rc == 0, f"14B fp8 on one 24 GB card: planned ({err.strip()[-200:]})")
    if rc == 0:
        q = p["ranks"][0]
        check(q["streamed"] == [] and q["chunk_rows"] == L, "14B fp8, 24 GB: every block "
              "resident, nothing chunked")
        peak = arena(BLOCKS, 1, 1, 1, 1, "fp8", True) + GIB
        check_rank(q, peak, budget_of(card), "14B fp8, one 24 GB card")
        print(f"     answer: yes, Wan 2.1 14B fp8 fits one 24 GB card at 480p "
              f"({peak / GIB:.2f} of {budget_of(card) / GIB:.2f} GiB)")
    # bf16 does not: the formula's smallest peak (all resident) is over the card
    need = arena(BLOCKS, 1, 1, 1, 1, "bf16", False) + GIB
    rc, p, err = plan("--model", "synth:wan2.1-14b", "--gpu-mem", "24gb")
    check(rc == 2 and need > budget_of(card) and "no plan fits" in err,
          f"14B bf16 on one 24 GB card refused (its weights alone {BLOCKS * block_bytes('bf16') / GIB:.1f} GiB)")
    # 2. A14B fp8 on 2 x 24 GB: both experts resident
    rc, p, err = plan("--model", "synth:wan2.2-a14b", "--ranks", "2", "--gpu-mem", "24gb",
                      "--precision", "fp8")
    check(rc == 0, f"A14B fp8 on 2 x 24 GB: planned ({err.strip()[-200:]})")
    if rc == 0:
        for r, q in enumerate(p["ranks"]):
            nb = q["last_block"] - q["first_block"] + 1
            peak = arena(nb, r == 0, r == 1, 2, 2, "fp8", True) + GIB
            check(q["experts"] == "resident" and q["streamed"] == [],
                  f"A14B fp8, rank {r} (blocks {q['first_block']}-{q['last_block']}): both "
                  f"experts resident")
            check_rank(q, peak, budget_of(card), f"A14B fp8, 2 x 24 GB, rank {r}")
        print("     answer: yes, both experts of Wan 2.2 A14B fp8 stay resident on 2 x 24 GB")
    # 3. on H200s (sm_90): no products scratch
    inv = os.path.join(SRC, "launch", "bench", "inventories", "h200x1.json")
    rc, p, err = plan("--model", "synth:wan2.1-14b", "--inventory", inv, "--precision", "fp8")
    check(rc == 0, f"14B fp8 on an H200: planned ({err.strip()[-200:]})")
    if rc == 0:
        check(p["ranks"][0]["peak_bytes"] == arena(BLOCKS, 1, 1, 1, 1, "fp8", False) + GIB,
              "14B fp8 on an H200 (sm_90): the formula without the products scratch")
    # 4. --fp8-accum fast: the same memory, a shorter predicted step (the fast
    # accumulation's linear ratio, plan_options.fp8_fast_linear_ratio)
    steps = {}
    for label, extra in (("bf16", []), ("fp8", ["--precision", "fp8"]),
                         ("fp8 fast", ["--precision", "fp8", "--fp8-accum", "fast"])):
        rc, p, err = plan("--model", "synth:wan2.1-14b", "--inventory", inv, *extra)
        check(rc == 0, f"14B {label} on an H200: planned ({err.strip()[-200:]})")
        steps[label] = p if rc == 0 else None
    if all(steps.values()):
        b, f, x = (steps[k]["predicted_step_ms"] for k in ("bf16", "fp8", "fp8 fast"))
        check(x < f < b, f"predicted steps: fp8 fast {x:.1f} < fp8 {f:.1f} < bf16 {b:.1f} ms")
        check(steps["fp8 fast"]["ranks"][0]["peak_bytes"] == steps["fp8"]["ranks"][0]["peak_bytes"],
              "--fp8-accum fast: the same peak as full accumulation")
    return finish("plan with quantized weights")


if __name__ == "__main__":
    sys.exit(main())
