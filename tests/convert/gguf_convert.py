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
from gguf import GGMLQuantizationType as T

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import stlib  # noqa: E402
from gguflib import (BLOCK_TYPES, CFG, LINEARS, Model, format_name, write_gguf,  # noqa: E402
                     write_twin)
from sptest import fail, finish, seed  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
SEED = seed("gguf convert", sys.argv[3] if len(sys.argv) > 3 else None)
rng = np.random.default_rng(SEED)


def sp(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True)



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
        for name, tt in tensors.items():
            a, raw, vals, t = tt.array, tt.raw, tt.values, tt.ggml
            ds = f[h5_path(name, expert)]
            dt = ds.attrs["dtype"]
            dt = dt.decode() if isinstance(dt, bytes) else dt
            stem = name.split(".", 2)[-1].rsplit(".", 1)[0] if name.startswith("blocks.") else ""
            if stem in LINEARS and name.endswith(".weight"):
                ok = (dt == format_name(t) and np.array_equal(
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
    a = Model(rng, BLOCK_TYPES)
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
    write_twin(BIN, a, tw)
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
    b = Model(rng, BLOCK_TYPES[::-1] + [T.F16, T.F32])
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
