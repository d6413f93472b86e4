"""`staticpipe convert` of fp8 checkpoints as ComfyUI distributes them
(fp8_e4m3fn: weights stored as F8_E4M3; fp8_e4m3fn_scaled: plus a float
KEY.scale_weight per weight, KEY.scale_input and the scaled_fp8 marker),
and of checkpoints holding non-finite weights.

The e4m3fn reference is written here from the format's definition (1 sign,
4 exponent bits of bias 7, 3 mantissa bits, exponent 0 subnormal, S.1111.111
NaN, no infinities), in float64; every converted weight must equal
float32(value) x float32(scale) rounded in float32, and for --dtype bf16 that
product rounded to nearest even bf16 (stlib.bf16_rne), bit for bit.
usage: fp8.py STATICPIPE_BIN WORKDIR"""
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import FAILS as failures, fail, seed  # noqa: E402
import stlib  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
SEED = seed("fp8")
rng = np.random.default_rng(SEED)
CFG = dict(stlib.SMALL)


def e4m3fn_value(b):
    s, e, m = b >> 7, (b >> 3) & 15, b & 7
    if e == 15 and m == 7:
        return float("nan")
    v = (m / 8.0) * 2.0 ** -6 if e == 0 else (1.0 + m / 8.0) * 2.0 ** (e - 7)
    return -v if s else v


E4M3 = np.array([e4m3fn_value(b) for b in range(256)], np.float64)
# The definition's landmarks: largest 448, smallest subnormal 2^-9, one = 0x38.
if not (E4M3[0x7E] == 448.0 and E4M3[0x01] == 2.0 ** -9 and E4M3[0x38] == 1.0 and
        E4M3[0xB8] == -1.0 and np.isnan(E4M3[0x7F]) and np.isnan(E4M3[0xFF])):
    fail("e4m3fn reference table is wrong")
FINITE = np.array([b for b in range(256) if b not in (0x7F, 0xFF)], np.uint8)


def checkpoint(scaled, nan_at=None):
    """ComfyUI-keyed entries: 2-D and larger weights in fp8 (with scales
    when scaled), the rest bf16; the reference float32 values by key."""
    entries, ref = [], {}
    for g, b, name, shape in stlib.table(CFG):
        k = stlib.key("comfy", g, b, name)
        n = int(np.prod(shape))
        if name.endswith(".weight") and len(shape) >= 2:
            q = rng.choice(FINITE, n).astype(np.uint8)
            if nan_at == k:
                q[n // 2] = 0x7F
            entries.append((k, "F8_E4M3", shape, q.tobytes()))
            scale = np.float32(1.0)
            if scaled:
                scale = np.float32(rng.uniform(1e-4, 4e-3))
                entries.append((k[:-len(".weight")] + ".scale_weight", "F32", (), scale.tobytes()))
                entries.append((k[:-len(".weight")] + ".scale_input", "F32", (), np.float32(1).tobytes()))
            with np.errstate(invalid="ignore"):
                ref[k] = E4M3[q].astype(np.float32) * scale  # one float32 rounding
        else:
            raw = stlib.random_tensor(rng, "BF16", shape)
            entries.append((k, "BF16", shape, raw))
            ref[k] = stlib.to_f32("BF16", raw)
    if scaled:
        entries.append((stlib.COMFY + "scaled_fp8", "F8_E4M3", (0,), b""))
    return entries, ref


def convert(src, out, dtype):
    if os.path.exists(out):
        os.remove(out)
    return subprocess.run([BIN, "convert", src, "-o", out, "--dtype", dtype],
                          capture_output=True, text=True)


os.makedirs(WORK, exist_ok=True)
for scaled in (False, True):
    label = "fp8_e4m3fn_scaled" if scaled else "fp8_e4m3fn"
    entries, ref = checkpoint(scaled)
    rng.shuffle(entries)
    src = os.path.join(WORK, f"{label}.safetensors")
    stlib.write_st(src, entries)
    for od in ("fp32", "bf16"):
        out = os.path.join(WORK, f"{label}-{od}.h5")
        r = convert(src, out, od)
        if r.returncode != 0:
            fail(f"{label} --dtype {od}: exit {r.returncode}: {r.stderr[-1500:]}")
            continue
        if "fp8 (e4m3fn) tensors dequantised" not in r.stderr:
            fail(f"{label}: no line counting the fp8 tensors: {r.stderr[-500:]}")
        v = subprocess.run([BIN, "inspect", "--verify", out], capture_output=True, text=True)
        if v.returncode != 0:
            fail(f"{label}: inspect --verify: {v.stderr[-500:]}")
        checked = 0
        with h5py.File(out, "r") as f:
            for g, b, name, shape in stlib.table(CFG):
                k = stlib.key("comfy", g, b, name)
                got = f[stlib.h5_path(g, b, name)][...].reshape(-1)
                x = ref[k].reshape(-1)
                if od == "fp32":
                    ok = got.dtype == np.float32 and np.array_equal(got.view(np.uint32),
                                                                   x.view(np.uint32))
                else:
                    ok = got.dtype == np.uint16 and np.array_equal(got, stlib.bf16_rne(x))
                checked += 1
                if not ok:
                    bad = np.flatnonzero(got.view(np.uint32 if od == "fp32" else np.uint16) !=
                                         (x.view(np.uint32) if od == "fp32" else stlib.bf16_rne(x)))
                    fail(f"{label} -> {od}: {k} differs from the reference at {bad[:5]}")
        print(f"ok   {label} -> {od}: {checked} tensors equal the reference")

# Non-finite weights: refused, naming the tensor; nothing written.
entries, _ = checkpoint(True, nan_at=stlib.key("comfy", "block", 1, "ffn.0.weight"))
src = os.path.join(WORK, "nan_fp8.safetensors")
stlib.write_st(src, entries)
cases = [("fp8 NaN byte", src, "blocks.1.ffn.0.weight", "NaN")]
f32 = stlib.make_checkpoint(rng, CFG, "official", "F32")
for i, (k, dt, shape, raw) in enumerate(f32):
    if k == "blocks.0.self_attn.k.weight":
        a = np.frombuffer(raw, "<f4").copy()
        a[7] = np.nan
        f32[i] = (k, dt, shape, a.tobytes())
    if k == "head.head.bias":
        a = np.frombuffer(raw, "<f4").copy()
        a[0] = -np.inf
        f32[i] = (k, dt, shape, a.tobytes())
src = os.path.join(WORK, "nan_f32.safetensors")
stlib.write_st(src, f32)
cases.append(("F32 NaN", src, "blocks.0.self_attn.k.weight", "NaN"))
big = [(k, dt, s, raw) for k, dt, s, raw in stlib.make_checkpoint(rng, CFG, "official", "F32")]
for i, (k, dt, shape, raw) in enumerate(big):
    if k == "time_embedding.0.bias":
        a = np.frombuffer(raw, "<f4").copy()
        a[3] = 3.4e38  # finite in float32, beyond bf16's largest
        big[i] = (k, dt, shape, a.tobytes())
over = os.path.join(WORK, "overflow.safetensors")
stlib.write_st(over, big)
for what, src, tensor, kind in cases:
    for od in ("fp32", "bf16"):
        out = os.path.join(WORK, "nan.h5")
        r = convert(src, out, od)
        lines = [l for l in r.stderr.splitlines() if "error:" in l]
        if r.returncode != 2 or os.path.exists(out) or len(lines) != 1 or tensor not in lines[0] \
                or kind not in lines[0]:
            fail(f"{what} -> {od}: exit {r.returncode}, {len(lines)} error lines: {r.stderr[-800:]}")
        else:
            print(f"ok   {what} -> {od}: refused: {lines[0][:160]}")
r = convert(over, os.path.join(WORK, "o.h5"), "fp32")
if r.returncode != 0:
    fail(f"3.4e38 to fp32 refused: {r.stderr[-500:]}")
r = convert(over, os.path.join(WORK, "o.h5"), "bf16")
if r.returncode != 2 or "time_embedding.0.bias" not in r.stderr or "infinite in bf16" not in r.stderr:
    fail(f"3.4e38 to bf16 (overflows to Inf) not refused: {r.stderr[-500:]}")
else:
    print("ok   a value beyond bf16's range is refused for --dtype bf16 only")

print(f"fp8: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
