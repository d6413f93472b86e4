"""Test helpers for LoRA merging: LoRA safetensors files in the key styles
people download (ComfyUI/kohya, diffusers/PEFT, plain official names, full
differences), written from MODEL.md "LoRA" and stlib's name tables (not from
the C code), and an independent numpy reference of the merge in float64.

A LoRA is built as a list of terms; each term knows the table tensor it
changes, its values (already rounded to the file's dtype, so the reference
sees exactly what the file holds) and its key(s)."""
import os
import sys

import h5py
import numpy as np

for _d in ("convert", "common"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", _d))
import h5crc  # noqa: E402
import stlib  # noqa: E402

DTYPES = ["F32", "BF16", "F16"]


def model_config(path):
    with h5py.File(path, "r") as f:
        a = f.attrs
        return {k: int(a[k]) for k in ("dim", "ffn_dim", "heads", "layers", "in_dim", "out_dim",
                                         "text_len", "text_dim", "freq_dim")}, a["dtype"]


def read_model(path):
    """{(group, block, name): float32 array} of a model file (bf16 widened)."""
    c, dt = model_config(path)
    out = {}
    with h5py.File(path, "r") as f:
        for g, b, n, shape in stlib.table(c):
            raw = f[stlib.h5_path(g, b, n)][...]
            if raw.dtype == np.uint16:
                raw = (raw.astype(np.uint32) << 16).view(np.float32)
            out[(g, b, n)] = np.asarray(raw, np.float32).reshape(shape)
    return out


def scaled_linears(path, c):
    """{(block, name): (codes as stored, (out, in), row scales)} of the
    linear weights of a file that stores them scaled (fp8, int8)."""
    out = {}
    with h5py.File(path, "r") as f:
        for b in range(c["layers"]):
            for n in stlib.LINEARS:
                p = stlib.h5_path("block", b, n)
                out[(b, n)] = (f[p][...].reshape(f[p].shape[0], -1), f[p + ".scale"][...])
    return out


def write_scaled(template, path, c, weights, quantise):
    """A copy of the scaled model file template (fp8, int8) whose linear
    weights are quantise(x) -> (codes, row scales) of weights {(block,
    name): float32 (out, in)}, its checksums made again (h5crc)."""
    h5crc.replace_scaled(template, path, [stlib.h5_path(g, b, n) for g, b, n, _ in stlib.table(c)],
                         {stlib.h5_path("block", b, n): x for (b, n), x in weights.items()},
                         quantise)


def encode(x, dt):
    """float32 values -> (raw bytes in dtype dt, the values those bytes hold)."""
    x = np.asarray(x, np.float32)
    if dt == "F32":
        raw = x.astype("<f4").tobytes()
    elif dt == "F16":
        raw = x.astype("<f2").tobytes()
    else:
        raw = stlib.bf16_rne(x.ravel()).astype("<u2").tobytes()
    return raw, stlib.to_f32(dt, raw).reshape(x.shape)


# ---- key styles ---------------------------------------------------------------

def stem(style, g, b, name):
    """The key stem (no .weight/.bias, no term suffix) of a table tensor."""
    leaf = ""
    for suf in (".weight", ".bias"):
        if name.endswith(suf):
            name, leaf = name[: -len(suf)], suf
    if style == "kohya":
        full = f"blocks.{b}.{name}" if g == "block" else name
        return "lora_unet_" + full.replace(".", "_")
    if style == "diffusers":
        k = stlib.key("diffusers", g, b, name + (leaf or ".weight"))
        return "transformer." + k[: -len(leaf or ".weight")]
    full = f"blocks.{b}.{name}" if g == "block" else name
    return {"comfy": "diffusion_model.", "comfy-model": "model.diffusion_model.",
            "plain": ""}[style] + full


def pair_keys(style):
    """(down suffix, up suffix) of a style."""
    if style in ("diffusers", "plain"):
        return ".lora_A.weight", ".lora_B.weight"
    return ".lora_down.weight", ".lora_up.weight"


class Lora:
    def __init__(self, style):
        self.style = style
        self.entries = []  # (key, dtype, shape, raw)
        self.terms = []    # dicts: target, kind, values

    def pair(self, rng, g, b, name, shape, r, alpha=None, dt="F32", conv=False):
        """A lora_down/lora_up pair (and alpha) on weight `name` [out, in...]."""
        out = shape[0]
        rest = tuple(shape[1:])
        a_shape = (r,) + (rest if conv else (int(np.prod(rest)),))
        b_shape = (out, r) + ((1,) * (len(shape) - 2) if conv else ())
        a_raw, a = encode(rng.standard_normal(a_shape) * 0.1, dt)
        b_raw, bv = encode(rng.standard_normal(b_shape) * 0.1, dt)
        s = stem(self.style, g, b, name)
        dk, uk = pair_keys(self.style)
        self.entries += [(s + dk, dt, a_shape, a_raw), (s + uk, dt, b_shape, b_raw)]
        al = None
        if alpha is not None:
            al_raw, alv = encode(np.array([alpha], np.float32), "F32")
            self.entries.append((s + ".alpha", "F32", (), al_raw))
            al = float(alv[0])
        self.terms.append({"target": (g, b, name), "kind": "pair", "a": a.reshape(r, -1),
                           "b": bv.reshape(out, r), "r": r, "alpha": al})

    def diff(self, rng, g, b, name, shape, dt="F32"):
        """A full difference: .diff_b for a bias, .diff otherwise."""
        raw, d = encode(rng.standard_normal(shape) * 0.01, dt)
        suffix = ".diff_b" if name.endswith(".bias") else ".diff"
        self.entries.append((stem(self.style, g, b, name) + suffix, dt, shape, raw))
        self.terms.append({"target": (g, b, name), "kind": "diff", "d": d})

    def write(self, path):
        stlib.write_st(path, self.entries)


def shapes(c):
    return {(g, b, n): s for g, b, n, s in stlib.table(c)}


def block_pairs(rng, c, style, r, names, dt="F32", alpha=None):
    """A LoRA of style with a rank-r pair (values in dt, alpha) on each
    of names (a block's linear weights) of every block of the model c."""
    sh = shapes(c)
    lo = Lora(style)
    for b in range(c["layers"]):
        for n in names:
            lo.pair(rng, "block", b, n, sh[("block", b, n)], r, alpha=alpha, dt=dt)
    return lo


def make_loras(rng, c):
    """Four LoRAs over the model c, in four key styles, overlapping on some
    tensors so their order matters; with mixed dtypes, alpha present and
    absent, a conv (patch embedding), embedding and head terms, and full
    differences of a norm gain, a modulation and a bias."""
    sh = shapes(c)
    L = c["layers"]
    comfy = Lora("comfy")
    k = 0
    for b in range(L):
        for n in ("self_attn.q.weight", "self_attn.k.weight", "self_attn.v.weight",
                  "self_attn.o.weight", "cross_attn.q.weight", "cross_attn.v.weight",
                  "ffn.0.weight", "ffn.2.weight"):
            comfy.pair(rng, "block", b, n, sh[("block", b, n)], 4,
                       alpha=(2.0 if k % 2 == 0 else None), dt=DTYPES[k % 3])
            k += 1
    comfy.pair(rng, "embed", -1, "patch_embedding.weight", sh[("embed", -1, "patch_embedding.weight")],
               3, alpha=1.5, conv=True)
    comfy.pair(rng, "head", -1, "head.head.weight", sh[("head", -1, "head.head.weight")], 2)
    comfy.diff(rng, "block", 1, "norm3.weight", sh[("block", 1, "norm3.weight")])
    comfy.diff(rng, "block", 2, "modulation", sh[("block", 2, "modulation")], dt="BF16")
    comfy.diff(rng, "block", 0, "ffn.0.bias", sh[("block", 0, "ffn.0.bias")])
    comfy.diff(rng, "block", L - 1, "self_attn.norm_q.weight",
               sh[("block", L - 1, "self_attn.norm_q.weight")])

    diff = Lora("diffusers")
    for b in range(L):
        for n in ("self_attn.q.weight", "cross_attn.o.weight", "ffn.0.weight"):
            diff.pair(rng, "block", b, n, sh[("block", b, n)], 8, dt="BF16")
    diff.pair(rng, "embed", -1, "text_embedding.0.weight", sh[("embed", -1, "text_embedding.0.weight")], 2)
    diff.pair(rng, "embed", -1, "time_projection.1.weight",
              sh[("embed", -1, "time_projection.1.weight")], 2, alpha=4.0)

    kohya = Lora("kohya")
    for b in range(L):
        kohya.pair(rng, "block", b, "self_attn.k.weight", sh[("block", b, "self_attn.k.weight")], 4,
                   alpha=1.0, dt="F16")
    kohya.diff(rng, "block", 0, "cross_attn.k.bias", sh[("block", 0, "cross_attn.k.bias")])

    plain = Lora("plain")
    plain.pair(rng, "block", L // 2, "cross_attn.k.weight", sh[("block", L // 2, "cross_attn.k.weight")], 5)
    plain.diff(rng, "block", L // 2, "cross_attn.k.weight", sh[("block", L // 2, "cross_attn.k.weight")])
    return [comfy, diff, kohya, plain]


def reference_merge(weights, loras, strengths):
    """The merge of MODEL.md "LoRA" in float64: per tensor, acc = w, then for
    each LoRA in order its pair (c = strength * (alpha / r), alpha default
    r; acc += c * (B @ A)) and then its differences (acc += strength * d).
    Returns {target: float64 array} for every tensor a term changes."""
    out = {}
    for lora, s in zip(loras, strengths):
        order = sorted(lora.terms, key=lambda t: t["kind"] != "pair")
        for t in order:
            key = t["target"]
            acc = out.get(key)
            if acc is None:
                acc = weights[key].astype(np.float64)
            if t["kind"] == "pair":
                alpha = t["alpha"] if t["alpha"] is not None else float(t["r"])
                cval = s * (alpha / t["r"])
                delta = t["b"].astype(np.float64) @ t["a"].astype(np.float64)
                acc = acc + cval * delta.reshape(acc.shape)
            else:
                acc = acc + s * t["d"].astype(np.float64).reshape(acc.shape)
            out[key] = acc
    return out


def exact_lora(rng, c, linears=stlib.LINEARS):
    """A rank-4 pair (alpha 4) on each of linears (names of a block's
    linear weights, by default all of them) of every block, values k/64 with |k| <= 4: every product
    and sum of its merge is exact in float64, so a reference's merged
    weights are bit-exact whatever the order."""
    sh_ = shapes(c)
    lo = Lora("comfy")
    dk, uk = pair_keys("comfy")
    r = 4
    for b in range(c["layers"]):
        for n in linears:
            out, inn = sh_[("block", b, n)]
            a = (rng.integers(-4, 5, (r, inn)) / 64).astype(np.float32)
            bv = (rng.integers(-4, 5, (out, r)) / 64).astype(np.float32)
            s = stem("comfy", "block", b, n)
            lo.entries += [(s + dk, "F32", a.shape, a.tobytes()),
                           (s + uk, "F32", bv.shape, bv.tobytes()),
                           (s + ".alpha", "F32", (), np.float32(r).tobytes())]
            lo.terms.append({"target": ("block", b, n), "kind": "pair", "a": a, "b": bv,
                             "r": r, "alpha": float(r)})
    return lo


def exact_deltas(lora):
    """{(block, name): B @ A in float64} of an exact_lora (its scale is 1)."""
    return {(t["target"][1], t["target"][2]): t["b"].astype(np.float64) @ t["a"].astype(np.float64)
            for t in lora.terms}


def bf16_merged(weights, deltas):
    """{(block, name): float32} of bf16(float32(w + delta)) for each delta,
    weights as read_model gives them: the merged weights a bf16 file holds
    before a quantiser takes them (--precision fp8 or int8)."""
    out = {}
    for (b, n), d in deltas.items():
        m32 = (weights[("block", b, n)].astype(np.float64) + d).astype(np.float32)
        out[(b, n)] = (stlib.bf16_rne(m32.ravel()).astype(np.uint32) << 16).view(np.float32) \
            .reshape(m32.shape)
    return out
