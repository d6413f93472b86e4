"""`staticpipe convert MODEL.gguf` (MODEL.md "GGUF weights") against gguf-py.

    gguf_convert.py STATICPIPE_BIN WORK_DIR [SEED]

A small Wan DiT written by gguf-py's GGUFWriter the way ComfyUI-GGUF's Wan
files are (general.architecture "wan"; official names, or the
"model.diffusion_model." prefix; the blocks' ten linear weights in every
ggml type staticpipe reads, one per layer and block, quantised by gguf-py
where it can and random blocks with finite scales where it cannot; F32
1-D tensors and 3-D modulation tables, the 5-D F32 patch embedding; an F16,
a BF16 and two block-quantised 2-D embedding/head weights):

  1. convert --dtype fp32 writes a quant-fp32 file: every block linear
     weight stored in its GGUF format, its bytes as the GGUF held them
     (dataset dtype the format's name, attribute shape the tensor's);
     every other tensor gguf-py's dequantisation (gguf.quants.dequantize)
     in fp32, bit for bit; inspect --verify passes and names the formats.
  2. The CPU forward of that file is bit-identical to the forward of an
     fp32 model file holding gguf-py's dequantised weights (written here
     with numpy as safetensors, then `convert --dtype fp32`).
  3. The default (bf16) writes a quant file: the same linear weights' bytes,
     every other tensor the bf16 of gguf-py's dequantisation (nearest even).
  4. --expert high=A.gguf --expert low=B.gguf: one two-expert file, each
     expert's blocks from its own GGUF (the prefixed layout for one of them).
  5. Refused with exit 2 and one line naming the file: another
     general.architecture; --dtype fp8 and int8 of a GGUF; a missing tensor
     (named); a shape the inferred config does not take."""
import os
import subprocess
import sys

import h5py
import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
sys.path.insert(0, os.path.join(HERE, "..", "kernels"))
import quant_ref  # noqa: E402  (random block bytes with finite f16 scales)
import stlib  # noqa: E402
from sptest import fail, finish, seed  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
SEED = seed("gguf convert", sys.argv[3] if len(sys.argv) > 3 else None)
rng = np.random.default_rng(SEED)
# Rows of 256 values everywhere a K-quant goes (ffn 512).
CFG = dict(stlib.SMALL, ffn_dim=512, text_dim=256)
LINEARS = [f"{a}.{p}" for a in ("self_attn", "cross_attn") for p in "qkvo"] + ["ffn.0", "ffn.2"]
BLOCK_TYPES = [T.Q8_0, T.Q4_K, T.Q5_0, T.Q6_K, T.Q5_K, T.Q4_0, T.Q4_1, T.Q5_1, T.Q3_K, T.Q2_K]
QUANTISABLE = {T.Q8_0, T.Q5_0, T.Q5_1, T.Q4_0, T.Q4_1}
# 2-D tensors outside the blocks, not F32 (each dequantised into the file's dtype).
OTHER_TYPES = {"text_embedding.0.weight": T.F16, "time_embedding.0.weight": T.BF16,
               "text_embedding.2.weight": T.Q8_0, "head.head.weight": T.Q4_0}


def sp(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True)


def gguf_tensor(t, shape, scale):
    """(array for GGUFWriter.add_tensor, raw_dtype, gguf-py's float32 values)."""
    rows, cols = shape[0], int(np.prod(shape[1:]))
    if t == T.F32:
        x = (rng.standard_normal(shape) * scale).astype(np.float32)
        return x, None, x
    if t == T.F16:
        x = (rng.standard_normal(shape) * scale).astype(np.float16)
        return x, None, x.astype(np.float32)
    if t == T.BF16 or t in QUANTISABLE:
        x = (rng.standard_normal((rows, cols)) * scale).astype(np.float32)
        q = gguf.quants.quantize(x, t)
    else:
        q = quant_ref.random_blocks(rng, t, rows, cols)
    return q, t, gguf.quants.dequantize(q, t).reshape(shape).astype(np.float32)


def model(types):
    """{official name: (array, raw_dtype, float32 values, ggml type)} of CFG."""
    out = {}
    for g, b, name, shape in stlib.table(CFG):
        full = name if g != "block" else f"blocks.{b}.{name}"
        stem = name.rsplit(".", 1)[0]
        if g == "block" and stem in LINEARS and name.endswith(".weight"):
            t = types[(b * len(LINEARS) + LINEARS.index(stem)) % len(types)]
        else:
            t = OTHER_TYPES.get(name, T.F32)
        scale = 0.1 if len(shape) > 1 and "modulation" not in name else 1.0
        a, raw, vals = gguf_tensor(t, shape, scale / np.sqrt(shape[-1]) if scale < 1 else 0.3)
        out[full] = (a, raw, vals, t)
    return out


def write_gguf(path, tensors, prefix="", arch="wan", drop=None, reshape=None):
    w = gguf.GGUFWriter(path, arch)
    for name, (a, raw, _, _) in tensors.items():
        if name == drop:
            continue
        if name == reshape:
            a = a.reshape(a.shape[0] // 2, -1) if raw is None else a
        w.add_tensor(prefix + name, a, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def twin(tensors, path):
    """An fp32 model file of gguf-py's dequantised values (numpy, safetensors)."""
    st = path + ".safetensors"
    stlib.write_st(st, [(k, "F32", v.shape, np.ascontiguousarray(v, np.float32).tobytes())
                        for k, (_, _, v, _) in tensors.items()])
    r = sp("convert", st, "-o", path, "--dtype", "fp32")
    if r.returncode != 0:
        sys.exit(f"FAIL convert of the fp32 twin: {r.stderr[-800:]}")


def h5_path(name, expert=None):
    pre = f"/experts/{expert}" if expert else ""
    if name.startswith("blocks."):
        _, b, rest = name.split(".", 2)
        return f"{pre}/blocks/{int(b):04d}/{rest}"
    return f"{pre}/{'head' if name.startswith('head.') else 'embed'}/{name}"


def check_file(path, tensors, rest, label, expert=None):
    """Linear weights kept byte for byte in their format, the rest gguf-py's
    values in rest (fp32 or bf16)."""
    bad, kept = 0, 0
    with h5py.File(path, "r") as f:
        want_root = "quant-fp32" if rest == "fp32" else "quant"
        root = f.attrs["dtype"]
        if (root.decode() if isinstance(root, bytes) else root) != want_root:
            fail(f"{label}: root dtype {root!r}, want {want_root}")
        for name, (a, raw, vals, t) in tensors.items():
            ds = f[h5_path(name, expert)]
            dt = ds.attrs["dtype"]
            dt = dt.decode() if isinstance(dt, bytes) else dt
            stem = name.split(".", 2)[-1].rsplit(".", 1)[0] if name.startswith("blocks.") else ""
            if stem in LINEARS and name.endswith(".weight"):
                want = {T.F16: "fp16", T.F32: "fp32", T.BF16: "bf16"}.get(t, t.name.lower())
                ok = (dt == want and np.array_equal(
                    ds[...].reshape(-1).view(np.uint8), np.ascontiguousarray(a).reshape(-1).view(np.uint8)))
                if raw is not None and t != T.BF16:
                    ok = ok and list(ds.attrs["shape"]) == list(vals.shape)
                kept += ok
            elif rest == "fp32":
                ok = dt == "fp32" and np.array_equal(ds[...].view(np.uint32),
                                                     vals.view(np.uint32))
            else:
                ok = dt == "bf16" and np.array_equal(ds[...].reshape(-1),
                                                     stlib.bf16_rne(vals.reshape(-1)))
            if not ok:
                bad += 1
                if bad < 5:
                    fail(f"{label}: {name} ({t.name}, stored as {dt}) differs from gguf-py's")
    v = sp("inspect", "--verify", path)
    if v.returncode != 0 or "q4_k" not in v.stdout:
        fail(f"{label}: inspect --verify: {v.returncode} {v.stdout[-300:]} {v.stderr[-300:]}")
    return kept


def forward(model_path, out):
    r = sp("forward", "--model", model_path, "--latent", os.path.join(WORK, "in.h5"),
           "--timestep", "611", "--cond", os.path.join(WORK, "in.h5"), "-o", out)
    if r.returncode != 0:
        sys.exit(f"FAIL forward {model_path}: {r.stderr[-800:]}")
    with h5py.File(out, "r") as f:
        return f["pred"][...]


def refused(args, needle, label):
    r = sp(*args)
    last = next((ln for ln in r.stderr.splitlines() if needle in ln), "")
    if r.returncode != 2 or needle not in r.stderr:
        fail(f"{label}: not refused as expected: exit {r.returncode}: {r.stderr[-400:]}")
    else:
        print(f"ok   {label}: {last[:140]}")


def main():
    os.makedirs(WORK, exist_ok=True)
    a = model(BLOCK_TYPES)
    ga = os.path.join(WORK, "a.gguf")
    write_gguf(ga, a)
    # 1. quant-fp32, bytes and values
    q32 = os.path.join(WORK, "a-fp32.h5")
    r = sp("convert", ga, "-o", q32, "--dtype", "fp32")
    if r.returncode != 0:
        sys.exit(f"FAIL convert {ga}: {r.stderr[-800:]}")
    kept = check_file(q32, a, "fp32", "convert --dtype fp32")
    print(f"ok   convert --dtype fp32: {kept} linear weights kept in their GGUF formats "
          f"({', '.join(sorted({t.name for t in BLOCK_TYPES}))}), the rest gguf-py's fp32")
    # 2. forward against the fp32 twin
    with h5py.File(os.path.join(WORK, "in.h5"), "w") as f:
        f["latent"] = rng.standard_normal((16, 2, 8, 10)).astype(np.float32)
        f["context"] = rng.standard_normal((7, CFG["text_dim"])).astype(np.float32)
    tw = os.path.join(WORK, "twin.h5")
    twin(a, tw)
    pq, pt = forward(q32, os.path.join(WORK, "pq.h5")), forward(tw, os.path.join(WORK, "pt.h5"))
    if pq.tobytes() != pt.tobytes():
        fail(f"forward of the GGUF-converted file differs from its fp32 twin's (relative L2 "
             f"{np.linalg.norm(pq - pt) / np.linalg.norm(pt):.3e})")
    else:
        print("ok   forward of the GGUF-converted file bit-identical to the fp32 file of "
              "gguf-py's dequantised weights")
    # 3. the default: quant, rest bf16
    qb = os.path.join(WORK, "a-bf16.h5")
    r = sp("convert", ga, "-o", qb)
    if r.returncode != 0 or "kept as stored" not in r.stderr:
        sys.exit(f"FAIL convert {ga} (bf16): {r.stderr[-800:]}")
    check_file(qb, a, "bf16", "convert (bf16)")
    print("ok   convert (default bf16): the same bytes, the rest the bf16 of gguf-py's values")
    # 4. two experts, the low-noise one with ComfyUI's prefix and other formats
    b = model(BLOCK_TYPES[::-1] + [T.F16, T.F32])
    gb = os.path.join(WORK, "b.gguf")
    write_gguf(gb, b, prefix=stlib.COMFY)
    qe = os.path.join(WORK, "experts.h5")
    r = sp("convert", "--expert", f"high={ga}", "--expert", f"low={gb}", "-o", qe)
    if r.returncode != 0:
        sys.exit(f"FAIL convert --expert: {r.stderr[-800:]}")
    check_file(qe, a, "bf16", "--expert high", expert="high")
    check_file(qe, b, "bf16", "--expert low", expert="low")
    print("ok   --expert high=A.gguf --expert low=B.gguf: each expert's blocks from its GGUF")
    # 5. refusals
    gx = os.path.join(WORK, "flux.gguf")
    write_gguf(gx, a, arch="flux")
    refused(["convert", gx, "-o", os.path.join(WORK, "no.h5")], "architecture 'flux'",
            "another general.architecture")
    for dt in ("fp8", "int8"):
        refused(["convert", ga, "-o", os.path.join(WORK, "no.h5"), "--dtype", dt],
                "keeps its quantized bytes", f"--dtype {dt} of a GGUF")
    gm = os.path.join(WORK, "missing.gguf")
    write_gguf(gm, a, drop="blocks.1.cross_attn.k.weight")
    refused(["convert", gm, "-o", os.path.join(WORK, "no.h5")],
            "missing tensor 'blocks.1.cross_attn.k.weight'", "a missing tensor")
    gs = os.path.join(WORK, "shape.gguf")
    write_gguf(gs, a, reshape="blocks.0.self_attn.norm_q.weight")
    refused(["convert", gs, "-o", os.path.join(WORK, "no.h5")], "blocks.0.self_attn.norm_q.weight",
            "a shape the config does not take")
    if os.path.exists(os.path.join(WORK, "no.h5")):
        fail("a refused convert left its output behind")
    return finish("gguf convert")


if __name__ == "__main__":
    sys.exit(main())
