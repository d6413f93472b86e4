"""Test helpers for `staticpipe convert`: a hand-written safetensors writer and
reader (8-byte little-endian header length, JSON, data; no safetensors
package), the Wan 2.1 T2V tensor table and the diffusers/ComfyUI names
written out again from MODEL.md (independent of the C tables), and a
round-to-nearest-even bf16 reference computed by comparing distances (not
by the bit trick the C code uses)."""
import json
import struct

import numpy as np

COMFY = "model.diffusion_model."
# The small DiT config the converter tests write checkpoints of (copy it:
# dict(SMALL) before changing a key).
SMALL = dict(dim=256, ffn_dim=640, heads=2, layers=2, in_dim=16, out_dim=16, text_dim=96,
             freq_dim=256)

# The linear weights of a block, in table order: the GEMMs' weights that
# fp8 and int8 files store quantised and that LoRA pairs change.
LINEARS = [f"{a}.{p}.weight" for a in ("self_attn", "cross_attn") for p in "qkvo"] + [
    "ffn.0.weight", "ffn.2.weight"]


def table(c):
    """(group, name, shape) of every tensor, official names, canonical order."""
    D, F = c["dim"], c["ffn_dim"]
    embed = [
        ("patch_embedding.weight", (D, c["in_dim"], 1, 2, 2)),
        ("patch_embedding.bias", (D,)),
        ("text_embedding.0.weight", (D, c["text_dim"])), ("text_embedding.0.bias", (D,)),
        ("text_embedding.2.weight", (D, D)), ("text_embedding.2.bias", (D,)),
        ("time_embedding.0.weight", (D, c["freq_dim"])), ("time_embedding.0.bias", (D,)),
        ("time_embedding.2.weight", (D, D)), ("time_embedding.2.bias", (D,)),
        ("time_projection.1.weight", (6 * D, D)), ("time_projection.1.bias", (6 * D,)),
    ]
    block = [("modulation", (1, 6, D))]
    for a in ("self_attn", "cross_attn"):
        if a == "cross_attn":
            block += [("norm3.weight", (D,)), ("norm3.bias", (D,))]
        for p in "qkvo":
            block += [(f"{a}.{p}.weight", (D, D)), (f"{a}.{p}.bias", (D,))]
        block += [(f"{a}.norm_q.weight", (D,)), (f"{a}.norm_k.weight", (D,))]
    block += [("ffn.0.weight", (F, D)), ("ffn.0.bias", (F,)),
              ("ffn.2.weight", (D, F)), ("ffn.2.bias", (D,))]
    head = [("head.modulation", (1, 2, D)),
            ("head.head.weight", (c["out_dim"] * 4, D)), ("head.head.bias", (c["out_dim"] * 4,))]
    out = [("embed", -1, n, s) for n, s in embed]
    for b in range(c["layers"]):
        out += [("block", b, n, s) for n, s in block]
    out += [("head", -1, n, s) for n, s in head]
    return out


DIFF_EMBED = {
    "text_embedding.0": "condition_embedder.text_embedder.linear_1",
    "text_embedding.2": "condition_embedder.text_embedder.linear_2",
    "time_embedding.0": "condition_embedder.time_embedder.linear_1",
    "time_embedding.2": "condition_embedder.time_embedder.linear_2",
    "time_projection.1": "condition_embedder.time_proj",
}
DIFF_BLOCK = {
    "self_attn.q": "attn1.to_q", "self_attn.k": "attn1.to_k", "self_attn.v": "attn1.to_v",
    "self_attn.o": "attn1.to_out.0", "self_attn.norm_q": "attn1.norm_q",
    "self_attn.norm_k": "attn1.norm_k",
    "cross_attn.q": "attn2.to_q", "cross_attn.k": "attn2.to_k", "cross_attn.v": "attn2.to_v",
    "cross_attn.o": "attn2.to_out.0", "cross_attn.norm_q": "attn2.norm_q",
    "cross_attn.norm_k": "attn2.norm_k",
    "norm3": "norm2", "ffn.0": "ffn.net.0.proj", "ffn.2": "ffn.net.2",
}


def key(style, group, block, name):
    """The checkpoint key of a table tensor in a style."""
    if style == "diffusers":
        if group == "block":
            if name == "modulation":
                return f"blocks.{block}.scale_shift_table"
            stem, leaf = name.rsplit(".", 1)
            return f"blocks.{block}.{DIFF_BLOCK[stem]}.{leaf}"
        if name == "head.modulation":
            return "scale_shift_table"
        if name.startswith("head.head."):
            return "proj_out." + name.rsplit(".", 1)[1]
        stem, leaf = name.rsplit(".", 1)
        return f"{DIFF_EMBED.get(stem, stem)}.{leaf}"
    k = f"blocks.{block}.{name}" if group == "block" else name
    return COMFY + k if style == "comfy" else k


def h5_path(group, block, name):
    return {"embed": f"/embed/{name}", "head": f"/head/{name}"}.get(
        group, f"/blocks/{block:04d}/{name}")


DT_SIZE = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8}


def random_tensor(rng, dt, shape):
    """Random bytes of a tensor in safetensors dtype dt. F32 data carries
    exact bf16 ties (low half 0x8000) and near-ties so rounding is tested."""
    n = int(np.prod(shape))
    x = (rng.standard_normal(n) * 0.05).astype(np.float32)
    if dt == "F32":
        u = x.view(np.uint32).copy()
        pick = rng.random(n)
        u[pick < 0.05] = (u[pick < 0.05] & 0xFFFF0000) | 0x8000
        u[(pick >= 0.05) & (pick < 0.08)] = (u[(pick >= 0.05) & (pick < 0.08)] & 0xFFFF0000) | 0x7FFF
        u[(pick >= 0.08) & (pick < 0.11)] = (u[(pick >= 0.08) & (pick < 0.11)] & 0xFFFF0000) | 0x8001
        return u.astype("<u4").tobytes()
    if dt == "F16":
        return x.astype("<f2").tobytes()
    if dt == "BF16":
        return (x.view(np.uint32) >> 16).astype("<u2").tobytes()
    if dt == "I64":
        return rng.integers(-5, 5, n).astype("<i8").tobytes()
    raise ValueError(dt)


def to_f32(dt, raw):
    """Exact widening of source bytes to float32 (numpy's own conversions)."""
    if dt == "F32":
        return np.frombuffer(raw, "<f4").astype(np.float32)
    if dt == "F16":
        return np.frombuffer(raw, "<f2").astype(np.float32)
    if dt == "BF16":
        return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
    raise ValueError(dt)


def bf16_rne(x):
    """float32 -> bf16 bits, nearest with ties to even, by comparing the
    distances to the two bf16 neighbours in float64 (exact there)."""
    x = np.asarray(x, np.float32)
    u = x.view(np.uint32)
    lo = u & np.uint32(0xFFFF0000)          # toward zero
    hi = lo + np.uint32(0x10000)             # one bf16 ulp away from zero
    xd = x.astype(np.float64)
    dlo = np.abs(xd - lo.view(np.float32).astype(np.float64))
    dhi = np.abs(hi.view(np.float32).astype(np.float64) - xd)
    lo_even = ((lo >> 16) & 1) == 0
    take_hi = (dhi < dlo) | ((dhi == dlo) & ~lo_even)
    return np.where(take_hi, hi >> 16, lo >> 16).astype(np.uint16)


def header_bytes(hdr, pad=True):
    js = json.dumps(hdr, separators=(",", ":")).encode()
    if pad:
        js += b" " * ((8 - len(js) % 8) % 8)
    return js


def write_raw(path, header, data):
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + data)


def layout(entries, metadata=None):
    """(header dict, data bytes) for entries [(key, dtype, shape, raw)]."""
    hdr, off, data = {}, 0, []
    if metadata is not None:
        hdr["__metadata__"] = metadata
    for k, dt, shape, raw in entries:
        hdr[k] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        data.append(raw)
    return hdr, b"".join(data)


def write_st(path, entries, metadata=None):
    hdr, data = layout(entries, metadata)
    write_raw(path, header_bytes(hdr), data)


def read_st(path):
    """{key: (dtype, shape, raw bytes)} and the metadata of a file."""
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    hdr = json.loads(buf[8:8 + n])
    meta = hdr.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for k, e in hdr.items():
        b, end = e["data_offsets"]
        out[k] = (e["dtype"], tuple(e["shape"]), buf[base + b:base + end])
    return out, meta


def make_checkpoint(rng, c, style, dtype):
    """[(key, dtype, shape, raw)] of a whole checkpoint; dtype may be a list
    cycled over the tensors (mixed-dtype files)."""
    dts = dtype if isinstance(dtype, list) else [dtype]
    return [(key(style, g, b, n), dts[i % len(dts)], s, random_tensor(rng, dts[i % len(dts)], s))
            for i, (g, b, n, s) in enumerate(table(c))]
