"""Small Wan DiTs as GGUF files, written by gguf-py's GGUFWriter the way
ComfyUI-GGUF's Wan files are (general.architecture "wan", official names or
the "model.diffusion_model." prefix, F32 1-D tensors and 3-D modulation
tables, the 5-D F32 patch embedding), and their twins: fp32 model files of
gguf-py's dequantised values, written here with numpy (safetensors) and
converted with `staticpipe convert --dtype fp32`.

    m = Model(rng, types)        {official name: Tensor} of CFG: the blocks'
                                 linear weights in the ggml types of `types`
                                 in turn (one per layer and block), the other
                                 2-D weights in OTHER_TYPES, the rest F32
    m = from_values(vals, t)     the same of given float32 values {official
                                 name: array}: the blocks' linear weights
                                 quantised to t (Q8_0 by gguf-py, Q4_K by
                                 quantize_q4_k), the rest F32
    write_gguf(path, m, prefix="", arch="wan", drop=None, reshape=None)
    write_twin(bin, m, path)     the fp32 model file of m's values

A tensor quantised by gguf-py where it can (Q8_0, Q5_0, Q5_1, Q4_0, Q4_1,
BF16) and random blocks with finite f16 scales where it cannot (the
K-quants, tests/kernels/quant_ref.py); its values are always
gguf.quants.dequantize of its bytes. gguf-py has no K-quant quantiser:
quantize_q4_k is a plain one (each 32-value sub-block's min and range, six
bits of each against the block's two f16 scales, codes rounded to
nearest), written from the Q4_K layout of kern_quant_decode.h, not
llama.cpp's search; it serves to measure Q4_K weights' error. Weights drawn as synth: draws them
(variance 1/fan_in, biases small, norm weights near 1), so a forward stays
in range."""
import os
import subprocess
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

sys.dont_write_bytecode = True
_HERE = os.path.dirname(os.path.abspath(__file__))
for _d in (_HERE, os.path.join(_HERE, "..", "kernels")):
    if _d not in sys.path:
        sys.path.insert(0, _d)
import quant_ref  # noqa: E402
import stlib  # noqa: E402

# Rows of 256 values everywhere a K-quant goes (ffn 512).
CFG = dict(stlib.SMALL, ffn_dim=512, text_dim=256)
LINEARS = [f"{a}.{p}" for a in ("self_attn", "cross_attn") for p in "qkvo"] + ["ffn.0", "ffn.2"]
BLOCK_TYPES = [T.Q8_0, T.Q4_K, T.Q5_0, T.Q6_K, T.Q5_K, T.Q4_0, T.Q4_1, T.Q5_1, T.Q3_K, T.Q2_K]
QUANTISABLE = {T.Q8_0, T.Q5_0, T.Q5_1, T.Q4_0, T.Q4_1}
# 2-D tensors outside the blocks that are not F32 (dequantised into the file's dtype).
OTHER_TYPES = {"text_embedding.0.weight": T.F16, "time_embedding.0.weight": T.BF16,
               "text_embedding.2.weight": T.Q8_0, "head.head.weight": T.Q4_0}
# The model file's name of each ggml type.
FORMAT_NAME = {T.F16: "fp16", T.F32: "fp32", T.BF16: "bf16"}


def format_name(t):
    return FORMAT_NAME.get(t, t.name.lower())


class Tensor:
    def __init__(self, array, raw, values, ggml):
        self.array, self.raw, self.values, self.ggml = array, raw, values, ggml


def _values(rng, name, shape):
    """float32 values drawn as synth: draws them (MODEL.md "Model file")."""
    if len(shape) >= 2 and "modulation" not in name:
        fan_in = int(np.prod(shape[1:]))
        half = np.sqrt(3.0 / fan_in) * (0.25 if name.startswith("time_projection") else 1.0)
        return rng.uniform(-half, half, shape).astype(np.float32)
    if "modulation" in name:
        return rng.uniform(-0.1, 0.1, shape).astype(np.float32)
    if "norm" in name and name.endswith("weight"):
        return (1 + rng.uniform(-0.1, 0.1, shape)).astype(np.float32)
    return rng.uniform(-0.05, 0.05, shape).astype(np.float32)


def _tensor(rng, name, t, shape):
    x = _values(rng, name, shape)
    rows, cols = shape[0], int(np.prod(shape[1:]))
    if t == T.F32:
        return Tensor(x, None, x, t)
    if t == T.F16:
        h = x.astype(np.float16)
        return Tensor(h, None, h.astype(np.float32), t)
    if t == T.BF16 or t in QUANTISABLE:
        q = gguf.quants.quantize(x.reshape(rows, cols), t)
    else:
        q = _k_blocks(rng, t, rows, cols, float(np.abs(x).max()))
    return Tensor(q, t, gguf.quants.dequantize(q, t).reshape(shape).astype(np.float32), t)


# A K-quant's largest |code x sub-scale| products (kern_quant_decode.h's
# layouts): its f16 scales set to about sigma over it keep the values near
# the weights' range.
_K_SPAN = {T.Q2_K: 45.0, T.Q3_K: 128.0, T.Q4_K: 945.0, T.Q5_K: 1953.0, T.Q6_K: 4096.0}


def _k_blocks(rng, t, rows, cols, amax):
    """Random K-quant blocks (every code and sub-scale pattern) whose f16
    scale fields (d, dmin) are amax / span times a factor in [0.5, 1.5)."""
    q = quant_ref.random_blocks(rng, t, rows, cols)
    size = quant_ref.GGML_QUANT_SIZES[t][1]
    blocks = q.reshape(-1, size)
    for off in quant_ref.F16_FIELDS[t]:
        d = (amax / _K_SPAN[t] * rng.uniform(0.5, 1.5, blocks.shape[0])).astype(np.float16)
        blocks[:, off:off + 2] = d.view(np.uint8).reshape(-1, 2)
    return q


def Model(rng, types, cfg=None):
    cfg = cfg or CFG
    out = {}
    for g, b, name, shape in stlib.table(cfg):
        full = name if g != "block" else f"blocks.{b}.{name}"
        stem = name.rsplit(".", 1)[0]
        if g == "block" and stem in LINEARS and name.endswith(".weight"):
            t = types[(b * len(LINEARS) + LINEARS.index(stem)) % len(types)]
        else:
            t = OTHER_TYPES.get(name, T.F32)
        out[full] = _tensor(rng, full, t, shape)
    return out


def write_gguf(path, m, prefix="", arch="wan", drop=None, reshape=None):
    w = gguf.GGUFWriter(path, arch)
    for name, t in m.items():
        if name == drop:
            continue
        a = t.array
        if name == reshape and t.raw is None:
            a = a.reshape(a.shape[0] // 2, -1)
        w.add_tensor(prefix + name, a, raw_dtype=t.raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_twin(binary, m, path):
    st = path + ".safetensors"
    stlib.write_st(st, [(k, "F32", t.values.shape, np.ascontiguousarray(t.values).tobytes())
                        for k, t in m.items()])
    r = subprocess.run([binary, "convert", st, "-o", path, "--dtype", "fp32"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL convert of the fp32 twin: {r.stderr[-800:]}")


def quantize_q4_k(x):
    """x (rows, cols) float32, cols a multiple of 256 -> Q4_K bytes (rows, cols / 256 x 144)."""
    rows, cols = x.shape
    b = x.reshape(-1, 8, 32).astype(np.float64)          # sub-blocks of 32
    lo = np.minimum(b.min(axis=2), 0.0)                   # the min subtracted: x = d sc q - dmin m
    rng_ = b.max(axis=2) - lo
    sc = rng_ / 15.0
    mn = -lo
    d = sc.max(axis=1) / 63.0
    dmin = mn.max(axis=1) / 63.0
    d16, dm16 = d.astype(np.float16), dmin.astype(np.float16)
    dd, dm = d16.astype(np.float64), dm16.astype(np.float64)
    sc6 = np.clip(np.rint(np.divide(sc, dd[:, None], out=np.zeros_like(sc), where=dd[:, None] > 0)),
                  0, 63).astype(np.int64)
    m6 = np.clip(np.rint(np.divide(mn, dm[:, None], out=np.zeros_like(mn), where=dm[:, None] > 0)),
                 0, 63).astype(np.int64)
    step = (dd[:, None] * sc6)[:, :, None]
    q = np.clip(np.rint(np.divide(b + (dm[:, None] * m6)[:, :, None], step,
                                  out=np.zeros_like(b), where=step > 0)), 0, 15).astype(np.uint8)
    nb = b.shape[0]
    scales = np.zeros((nb, 12), np.uint8)
    for j in range(4):
        scales[:, j] = (sc6[:, j] & 63) | ((sc6[:, j + 4] >> 4) << 6)
        scales[:, j + 4] = (m6[:, j] & 63) | ((m6[:, j + 4] >> 4) << 6)
        scales[:, j + 8] = (sc6[:, j + 4] & 15) | ((m6[:, j + 4] & 15) << 4)
    qs = np.zeros((nb, 128), np.uint8)
    for j in range(4):  # 64 values: sub-block 2j in the low nibbles, 2j + 1 in the high
        qs[:, 32 * j:32 * j + 32] = q[:, 2 * j, :] | (q[:, 2 * j + 1, :] << 4)
    out = np.concatenate([d16.view(np.uint8).reshape(nb, 2), dm16.view(np.uint8).reshape(nb, 2),
                          scales, qs], axis=1)
    return out.reshape(rows, -1)


def from_values(vals, t):
    """{official name: Tensor} of float32 values: the blocks' linear weights
    quantised to ggml type t (Q8_0 or Q4_K), every other tensor F32."""
    out = {}
    for name, x in vals.items():
        stem = name.split(".", 2)[-1].rsplit(".", 1)[0] if name.startswith("blocks.") else ""
        if stem in LINEARS and name.endswith(".weight"):
            x2 = x.reshape(x.shape[0], -1).astype(np.float32)
            q = quantize_q4_k(x2) if t == T.Q4_K else gguf.quants.quantize(x2, t)
            out[name] = Tensor(q, t, gguf.quants.dequantize(q, t).reshape(x.shape)
                               .astype(np.float32), t)
        else:
            out[name] = Tensor(x.astype(np.float32), None, x.astype(np.float32), T.F32)
    return out
