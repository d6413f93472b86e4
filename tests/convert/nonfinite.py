"""One rule for every network: a weight that is not finite once stored is
refused, nothing written. A value of 3.4e38 (finite in float32, beyond
bf16's largest) is refused ("infinite in bf16") when a text encoder
converts to bf16 (its default) and a VAE with --dtype bf16, and kept in
fp32; inspect --verify refuses a text encoder or VAE file that holds an
infinity under valid checksums; a ComfyUI scale_weight of 0 or below is
refused when dequantising (DiT and text encoder).

usage: nonfinite.py STATICPIPE_BIN WORKDIR   (after tests/golden/inputs.py BIN WORKDIR/in)"""
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "common"))
sys.path.insert(0, os.path.join(HERE, "..", "ref"))
import stlib  # noqa: E402
import wan_vae_ref  # noqa: E402
from h5crc import crc32c  # noqa: E402
from sptest import FAILS, finish, seed  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
IN = os.path.join(WORK, "in")
rng = np.random.default_rng(seed("nonfinite"))


def check(ok, what, err=""):
    """sptest.check with the end of err (a command's stderr) on a failure."""
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else ": " + err[-600:]))
    if not ok:
        FAILS.append(what)


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, errors="replace")


def edited(src, dst, key, edit):
    """src's safetensors with tensor key replaced by edit(f32 values)."""
    ent, meta = stlib.read_st(src)
    out = []
    for k, (dt, shape, raw) in sorted(ent.items()):
        if k == key:
            a = stlib.to_f32(dt, raw).copy()
            edit(a)
            raw = a.astype("<f4").tobytes() if dt == "F32" else stlib.bf16_rne(a).tobytes()
        out.append((k, dt, shape, raw))
    stlib.write_st(dst, out, meta or None)


def refused(args, out, tensor, words, what):
    """Exit 2, nothing written, the first error line naming tensor with words."""
    r = run("convert", *args, "-o", out, "-q")
    errs = [ln for ln in r.stderr.splitlines() if "error:" in ln]
    ok = r.returncode == 2 and not os.path.exists(out) and len(errs) >= 1 and tensor in errs[0] \
        and all(w in errs[0] for w in words)
    check(ok, what, r.stderr)


def big_at(a):
    a[int(rng.integers(0, a.size))] = 3.4e38


# ---- convert: 3.4e38 into bf16 -------------------------------------------------
tok = os.path.join(IN, "spiece.model")
t5 = os.path.join(WORK, "t5_big.safetensors")
edited(os.path.join(IN, "src_t5.safetensors"), t5, "blocks.1.ffn.fc1.weight", big_at)
refused([t5, "--tokenizer", tok], os.path.join(WORK, "t5.h5"), "blocks.1.ffn.fc1.weight",
        ["infinite in bf16"], "text encoder 3.4e38 -> bf16 (its default) refused")
r = run("convert", t5, "--tokenizer", tok, "--dtype", "fp32", "-q", "-o", os.path.join(WORK, "t5_32.h5"))
check(r.returncode == 0, "text encoder 3.4e38 -> fp32 converted", r.stderr)
vae = os.path.join(WORK, "vae_big.safetensors")
edited(os.path.join(IN, "src_vae.safetensors"), vae, "decoder.head.2.weight", big_at)
refused([vae, "--dtype", "bf16"], os.path.join(WORK, "vae.h5"), "decoder.head.2.weight",
        ["infinite in bf16"], "VAE 3.4e38 -> bf16 refused")
r = run("convert", vae, "-q", "-o", os.path.join(WORK, "vae_32.h5"))
check(r.returncode == 0, "VAE 3.4e38 -> fp32 (its default) converted", r.stderr)


# ---- inspect --verify of a file holding an infinity, checksums valid ----------
def with_inf(src, dst, ds, order):
    """src with one value of dataset ds infinite, its checksum and the
    model checksum (MODEL.md "Model file": the CRC-32C of the datasets'
    CRCs, 4 bytes little-endian each, in the writer's order) recomputed."""
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        d = f[ds]
        a = d[...]
        flat = a.reshape(-1)
        flat[int(rng.integers(0, flat.size))] = 0x7F80 if a.dtype == np.uint16 else np.inf
        d[...] = a
        d.attrs["checksum"] = np.uint32(crc32c(a.tobytes()))
        crcs = [int(f[k].attrs["checksum"]) for k in order]
        acc = crc32c(b"".join(c.to_bytes(4, "little") for c in crcs))
        f.attrs["checksum"] = np.bytes_("crc32c:%08x" % acc)


# the writers' orders: the text encoder's table (UMT5.md "Checkpoint keys",
# umt5.h), then its tokenizer's datasets; the VAE decoder's module order
T5_LAYER = ["norm1.weight", "attn.q.weight", "attn.k.weight", "attn.v.weight", "attn.o.weight",
            "norm2.weight", "ffn.gate.0.weight", "ffn.fc1.weight", "ffn.fc2.weight",
            "pos_embedding.embedding.weight"]
t5_file = os.path.join(IN, "t5_good.h5")
r = run("init", "--arch", "umt5-tiny", "--seed", "3", "--tokenizer", tok, "-q", "-o", t5_file)
check(r.returncode == 0, "init umt5-tiny", r.stderr)
t5_inf = os.path.join(WORK, "t5_inf.h5")
order = ["/encoder/token_embedding.weight"] + [
    "/encoder/blocks.%d.%s" % (b, n) for b in range(2) for n in T5_LAYER] + ["/encoder/norm.weight"]
with h5py.File(t5_file, "r") as f:
    order += [t for t in ("/tokenizer/" + n for n in ("piece_bytes", "piece_offsets", "scores",
                                                       "types", "charsmap")) if t in f]
with_inf(t5_file, t5_inf, "/encoder/blocks.0.attn.v.weight", order)
r = run("inspect", t5_file, "--verify")
check(r.returncode == 0, "inspect --verify of the good text encoder", r.stderr)
r = run("inspect", t5_inf, "--verify")
check(r.returncode == 2 and "blocks.0.attn.v.weight" in r.stderr and "infinite" in r.stderr,
      "inspect --verify refuses a text encoder holding an infinity", r.stderr + r.stdout)
vae_file = os.path.join(IN, "vae_good.h5")
r = run("init", "--arch", "wan2.1-vae-tiny", "--seed", "3", "--dtype", "bf16", "-q", "-o", vae_file)
vae_inf = os.path.join(WORK, "vae_inf.h5")
tiny = wan_vae_ref.Config(8, 16, (1, 2, 4, 4), 2, (True, True, False))
# module order, but a temporal resample's time_conv first (the model file's
# table, ranks/nets/wan_vae.h, holds them in the order the decoder runs them)
ref = list(wan_vae_ref.tensor_shapes(tiny))
keys = sorted(ref, key=lambda k: ref.index(k.split(".time_conv.")[0] + ".resample.1.weight") - 0.5 +
              (0.25 if k.endswith(".bias") else 0) if ".time_conv." in k else ref.index(k))
order = ["/decoder/" + k for k in keys]
with_inf(vae_file, vae_inf, "/decoder/decoder.middle.1.proj.weight", order)
r = run("inspect", vae_file, "--verify")
check(r.returncode == 0, "inspect --verify of the good VAE", r.stderr)
r = run("inspect", vae_inf, "--verify")
check(r.returncode == 2 and "decoder.middle.1.proj.weight" in r.stderr and "infinite" in r.stderr,
      "inspect --verify refuses a VAE holding an infinity", r.stderr + r.stdout)

# ---- a scale_weight of 0 or below, dequantised -----------------------------------
CFG = dict(dim=128, ffn_dim=64, heads=1, layers=1, in_dim=16, out_dim=16, text_dim=32,
           freq_dim=16)
for scale in (0.0, -0.5):
    ent = stlib.make_checkpoint(rng, CFG, "comfy", "BF16")
    k = stlib.key("comfy", "block", 0, "ffn.0.weight")
    ent = [(n, "F8_E4M3", s, rng.integers(0, 0x7E, int(np.prod(s)), dtype=np.uint8).tobytes())
           if n == k else (n, d, s, raw) for n, d, s, raw in ent]
    ent.append((k[:-len(".weight")] + ".scale_weight", "F32", (), np.float32(scale).tobytes()))
    src = os.path.join(WORK, "dit_scale.safetensors")
    stlib.write_st(src, ent)
    refused([src, "--dtype", "bf16"], os.path.join(WORK, "dit_scale.h5"), "scale_weight",
            ["finite and positive"], f"DiT scale_weight {scale} refused when dequantising")
    ent, meta = stlib.read_st(os.path.join(IN, "src_t5.safetensors"))
    out = []
    for n, (d, s, raw) in sorted(ent.items()):
        if n == "blocks.0.attn.q.weight":
            raw, d = rng.integers(0, 0x7E, int(np.prod(s)), dtype=np.uint8).tobytes(), "F8_E4M3"
            out.append(("blocks.0.attn.q.scale_weight", "F32", (), np.float32(scale).tobytes()))
        out.append((n, d, s, raw))
    src = os.path.join(WORK, "t5_scale.safetensors")
    stlib.write_st(src, out)
    refused([src, "--tokenizer", tok], os.path.join(WORK, "t5_scale.h5"), "scale_weight",
            ["finite and positive"], f"text encoder scale_weight {scale} refused")

sys.exit(finish("nonfinite"))
