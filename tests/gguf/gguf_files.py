"""The GGUF reader (ranks/import/gguf.c) on files gguf-py writes and on
malformed ones, through tests/gguf/gguf_dump.

    gguf_files.py GGUF_DUMP WORK_DIR SEED

Files written by gguf-py's GGUFWriter the way ComfyUI-GGUF's Wan files are
(general.architecture "wan", the official tensor names, 2-D block weights
quantized to every ggml type staticpipe reads, F32 1-D tensors and the 3-D
modulation tables, the 5-D F32 patch_embedding.weight that
tools/fix_5d_tensors.py adds, F16/BF16 embeddings; a second file with the
"model.diffusion_model." prefix, a custom alignment and a
comfy.gguf.orig_shape entry; the first again as GGUF version 2; one with
no tensors) must read back: version, alignment, every metadata pair's type
and value, every tensor's name, ggml type, dims in GGUF and PyTorch order,
offset and size as gguf-py's GGUFReader sees them, its bytes equal, and its
fp32 dequantisation bit-exact to gguf.quants.dequantize.

Malformed files, built by hand from a small valid one, must each be refused
with exit status 2 and a message naming the file and the check; a FIFO and
a directory are refused without blocking. Exit 0 when every check held."""
import os
import struct
import subprocess
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import GGUFValueType as V

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels"))
import quant_ref  # noqa: E402  (random block bytes with finite f16 scales)

DUMP, WORK, SEED = None, None, 0  # set by main
rng = np.random.default_rng(0)
fails = 0


def check(ok, msg):
    global fails
    print(("ok   " if ok else "FAIL ") + msg)
    fails += 0 if ok else 1


# ---- valid files ---------------------------------------------------------------

DIM, FFN = 256, 512
BLOCK_TYPES = {  # the ten linear layers of a block, one ggml type each
    "self_attn.q": T.Q8_0, "self_attn.k": T.Q4_K, "self_attn.v": T.Q5_0, "self_attn.o": T.Q6_K,
    "cross_attn.q": T.Q5_K, "cross_attn.k": T.Q4_0, "cross_attn.v": T.Q4_1,
    "cross_attn.o": T.Q5_1, "ffn.0": T.Q3_K, "ffn.2": T.Q2_K,
}
QUANTISABLE = {T.Q8_0, T.Q5_0, T.Q5_1, T.Q4_0, T.Q4_1}


def weight(t, rows, cols):
    """A (rows, cols) weight in ggml type t, as GGUFWriter.add_tensor takes it."""
    if t in (T.F32, T.F16):
        x = rng.standard_normal((rows, cols)) * 0.05
        return x.astype(np.float32 if t == T.F32 else np.float16), None
    if t == T.BF16 or t in QUANTISABLE:
        x = (rng.standard_normal((rows, cols)) * 0.05).astype(np.float32)
        return gguf.quants.quantize(x, t), t
    return quant_ref.random_blocks(rng, t, rows, cols), t


def wan_tensors(prefix=""):
    ts = []  # (name, array, raw_dtype or None)
    ts.append(("patch_embedding.weight", rng.standard_normal((DIM, 16, 1, 2, 2)).astype(np.float32), None))
    ts.append(("patch_embedding.bias", rng.standard_normal(DIM).astype(np.float32), None))
    ts.append(("text_embedding.0.weight",) + weight(T.F16, DIM, 384))
    ts.append(("time_embedding.0.weight",) + weight(T.BF16, DIM, 256))
    for b in range(2):
        for layer, t in BLOCK_TYPES.items():
            rows, cols = (FFN, DIM) if layer == "ffn.0" else (DIM, FFN) if layer == "ffn.2" else (DIM, DIM)
            ts.append((f"blocks.{b}.{layer}.weight",) + weight(t, rows, cols))
            ts.append((f"blocks.{b}.{layer}.bias", rng.standard_normal(rows).astype(np.float32), None))
        ts.append((f"blocks.{b}.self_attn.norm_q.weight", rng.standard_normal(DIM).astype(np.float32), None))
        ts.append((f"blocks.{b}.modulation", rng.standard_normal((1, 6, DIM)).astype(np.float32), None))
    ts.append(("head.modulation", rng.standard_normal((1, 2, DIM)).astype(np.float32), None))
    ts.append(("head.head.weight",) + weight(T.F16, 64, DIM))
    return [(prefix + n, a, t) for n, a, t in ts]


METADATA = [  # (key, value, type, sub_type)
    ("general.file_type", 15, V.UINT32, None),
    ("general.quantization_version", 2, V.UINT32, None),
    ("test.u8", 200, V.UINT8, None), ("test.i8", -100, V.INT8, None),
    ("test.u16", 60000, V.UINT16, None), ("test.i16", -30000, V.INT16, None),
    ("test.i32", -2000000000, V.INT32, None), ("test.f32", 0.1, V.FLOAT32, None),
    ("test.bool", True, V.BOOL, None), ("test.string", "Wan 2.1 — 14B ✓", V.STRING, None),
    ("test.u64", 2 ** 63 + 5, V.UINT64, None), ("test.i64", -(2 ** 62), V.INT64, None),
    ("test.f64", -1.0 / 3.0, V.FLOAT64, None),
    ("test.arr_i32", [1, -2, 3, 2 ** 31 - 1], V.ARRAY, V.INT32),
    ("test.arr_f32", [0.5, -1.25, 3e-8], V.ARRAY, V.FLOAT32),
    ("test.arr_str", ["a", "", "übung", "x" * 300], V.ARRAY, V.STRING),
    ("test.arr_bool", [True, False, True], V.ARRAY, V.BOOL),
    ("test.arr_u8", list(range(0, 256, 7)), V.ARRAY, V.UINT8),
]
NP = {V.UINT8: "<u1", V.INT8: "<i1", V.UINT16: "<u2", V.INT16: "<i2", V.UINT32: "<u4",
      V.INT32: "<i4", V.FLOAT32: "<f4", V.BOOL: "<u1", V.UINT64: "<u8", V.INT64: "<i8",
      V.FLOAT64: "<f8"}


def expected_kv(value, vt, sub):
    """gguf_dump's rendering of a pair: type, element type, count, value."""
    name = {V.UINT8: "u8", V.INT8: "i8", V.UINT16: "u16", V.INT16: "i16", V.UINT32: "u32",
            V.INT32: "i32", V.FLOAT32: "f32", V.BOOL: "bool", V.STRING: "string",
            V.ARRAY: "array", V.UINT64: "u64", V.INT64: "i64", V.FLOAT64: "f64"}
    if vt == V.ARRAY:
        if sub == V.STRING:
            rep = ",".join(s.encode().hex() for s in value)
        else:
            rep = np.array(value, dtype=NP[sub]).tobytes().hex()
        return f"array {name[sub]} {len(value)} {rep}"
    if vt == V.STRING:
        return f"string - 1 {value.encode().hex()}"
    if vt in (V.FLOAT32, V.FLOAT64):
        v = float(np.float32(value)) if vt == V.FLOAT32 else float(value)
        return f"{name[vt]} - 1 {'%.17g' % v}"
    return f"{name[vt]} - 1 {int(value)}"


def write_gguf(path, tensors, meta, arch="wan", alignment=None, extra=None):
    w = gguf.GGUFWriter(path, arch)
    if alignment:
        w.add_custom_alignment(alignment)
    for key, value, vt, sub in meta:
        w.add_key_value(key, value, vt, sub_type=sub)
    for key, value, vt, sub in extra or []:
        w.add_key_value(key, value, vt, sub_type=sub)
    for name, arr, raw in tensors:
        w.add_tensor(name, arr, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def parse_dump(out):
    info, kvs, ts = {}, {}, []
    for line in out.splitlines():
        f = line.split(" ")
        if f[0] == "kv":
            kvs[f[1]] = " ".join(f[2:])
        elif f[0] == "tensor":
            ts.append(dict(name=f[1], type=int(f[2]), fmt=f[3], ne=[int(v) for v in f[4].split(",")],
                           shape=[int(v) for v in f[5].split(",")], offset=int(f[6]),
                           bytes=int(f[7]), rows=int(f[8]), cols=int(f[9])))
        else:
            info[f[0]] = f[1]
    return info, kvs, ts


def check_valid(label, path, meta, orig_shapes=None, version=3, alignment=32):
    out_dir = os.path.join(WORK, label + ".out")
    os.makedirs(out_dir, exist_ok=True)
    r = subprocess.run([DUMP, path, out_dir], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"{label}: read (exit {r.returncode}) {r.stderr.strip()[-300:]}")
    if r.returncode != 0:
        return
    info, kvs, ts = parse_dump(r.stdout)
    want_ft = next((str(v) for k, v, vt, sub in meta if k == "general.file_type"), None)
    check(info.get("version") == str(version) and info.get("alignment") == str(alignment)
          and info.get("arch") == "wan" and info.get("file_type") == want_ft,
          f"{label}: version, alignment, arch, file_type {info}")
    bad = [k for k, v, vt, sub in meta if kvs.get(k) != expected_kv(v, vt, sub)]
    check(not bad, f"{label}: {len(meta)} metadata pairs read back"
          + (f"; differ: {bad[:3]} e.g. {kvs.get(bad[0])!r} vs {expected_kv(*[m for m in meta if m[0] == bad[0]][0][1:])!r}" if bad else ""))
    rd = gguf.GGUFReader(path)
    data_start = int(info["data_start"])
    check(len(ts) == len(rd.tensors), f"{label}: {len(ts)} tensors, gguf-py reads {len(rd.tensors)}")
    wrong = []
    for i, (got, ref) in enumerate(zip(ts, rd.tensors)):
        ne = [int(v) for v in ref.shape]
        shape = (orig_shapes or {}).get(ref.name, list(reversed(ne)))
        if (got["name"] != ref.name or got["type"] != int(ref.tensor_type) or got["ne"] != ne
                or got["shape"] != shape or got["offset"] + data_start != ref.data_offset
                or got["bytes"] != ref.n_bytes or got["rows"] * got["cols"] != ref.n_elements):
            wrong.append(f"{ref.name}: {got} vs ne {ne} shape {shape} at {ref.data_offset}")
            continue
        raw = open(os.path.join(out_dir, f"{i}.raw"), "rb").read()
        if raw != ref.data.tobytes():
            wrong.append(f"{ref.name}: bytes differ")
            continue
        val = np.fromfile(os.path.join(out_dir, f"{i}.f32"), dtype=np.float32)
        want = gguf.quants.dequantize(ref.data, ref.tensor_type).astype(np.float32).ravel()
        if val.view(np.uint32).tobytes() != want.view(np.uint32).tobytes():
            wrong.append(f"{ref.name}: fp32 values differ from gguf.quants.dequantize")
    check(not wrong, f"{label}: every tensor's name, type, dims, offset, bytes and values"
          + (f"; {len(wrong)} wrong, first {wrong[0]}" if wrong else ""))


def valid_files():
    p1 = os.path.join(WORK, "wan.gguf")
    write_gguf(p1, wan_tensors(), METADATA)
    check_valid("wan (GGUFWriter, every type)", p1, METADATA)
    # GGUF version 2: the same layout with the version field 2
    b = bytearray(open(p1, "rb").read())
    b[4:8] = struct.pack("<I", 2)
    p2 = os.path.join(WORK, "wan_v2.gguf")
    open(p2, "wb").write(bytes(b))
    check_valid("wan as version 2", p2, METADATA, version=2)
    # the ComfyUI prefix, alignment 64 and a tensor stored reshaped
    ts = wan_tensors("model.diffusion_model.")[:6]
    reshaped = rng.standard_normal((12, 256)).astype(np.float32)
    ts.append(("model.diffusion_model.img_emb.emb_pos", reshaped, None))
    extra = [("comfy.gguf.orig_shape.model.diffusion_model.img_emb.emb_pos", [4, 3, 256],
              V.ARRAY, V.INT32)]
    p3 = os.path.join(WORK, "wan_prefix.gguf")
    write_gguf(p3, ts, METADATA[:3], alignment=64, extra=extra)
    check_valid("prefix, alignment 64, orig_shape", p3, METADATA[:3],
                orig_shapes={"model.diffusion_model.img_emb.emb_pos": [4, 3, 256]}, alignment=64)
    p4 = os.path.join(WORK, "empty.gguf")
    write_gguf(p4, [], METADATA[:2])
    check_valid("no tensors", p4, METADATA[:2])


# ---- malformed files ------------------------------------------------------------------

def gstr(b):
    return struct.pack("<Q", len(b)) + b


def kv(key, vt, payload):
    return gstr(key) + struct.pack("<I", vt) + payload


def tinfo(name, dims, ttype, offset):
    return (gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
            + struct.pack("<IQ", ttype, offset))


ARCH = kv(b"general.architecture", 8, gstr(b"wan"))
A_DATA = np.arange(8, dtype=np.float32).tobytes()  # tensor a: F32 (8)
B_DATA = bytes(34 * 2)                              # tensor b: Q8_0 (32, 2)


def build(kvs=None, tinfos=None, data=None, magic=b"GGUF", version=3, nkv=None, nt=None,
          align=32):
    kvs = [ARCH] if kvs is None else kvs
    tinfos = [tinfo(b"a", [8], 0, 0), tinfo(b"b", [32, 2], 8, 32)] if tinfos is None else tinfos
    head = magic + struct.pack("<IQQ", version, len(tinfos) if nt is None else nt,
                               len(kvs) if nkv is None else nkv)
    body = head + b"".join(kvs) + b"".join(tinfos)
    body += bytes((-len(body)) % align)
    return body + (A_DATA + B_DATA if data is None else data)


def malformed_cases():
    base = build()
    big = 1 << 62
    return [
        ("empty file", b"", "truncated: magic"),
        ("truncated in the tensor infos", base[:120], "truncated: tensor 'b': dims"),
        ("truncated data", base[:-10], "run past the end of the file"),
        ("bad magic", build(magic=b"GGUX"), "bad magic 'GGUX'"),
        ("version 1", build(version=1), "version 1 is not read"),
        ("version 4", build(version=4), "version 4 is not read"),
        ("big-endian", build(version=0x03000000), "big-endian GGUF"),
        ("huge tensor count", build(nt=big), "cannot fit"),
        ("huge metadata count", build(nkv=big), "cannot fit"),
        ("huge string length", build(kvs=[kv(b"general.architecture", 8, struct.pack("<Q", big))]),
         "runs past the end of the file"),
        ("huge array length", build(kvs=[ARCH, kv(b"x.arr", 9, struct.pack("<IQ", 5, big))]),
         "an array of"),
        ("offset past the end", build(tinfos=[tinfo(b"a", [8], 0, 0), tinfo(b"b", [32, 2], 8, 4096)]),
         "past the end of the file"),
        ("misaligned offset", build(tinfos=[tinfo(b"a", [8], 0, 0), tinfo(b"b", [32, 2], 8, 40)]),
         "not a multiple of the alignment 32"),
        ("overlapping tensors", build(tinfos=[tinfo(b"a", [8], 0, 0), tinfo(b"b", [8], 0, 0)]),
         "overlap tensor"),
        ("unknown ggml type", build(tinfos=[tinfo(b"a", [8], 99, 0), tinfo(b"b", [32, 2], 8, 32)]),
         "ggml type 99 (unknown) is not one staticpipe reads"),
        ("a type not read (IQ2_XXS)", build(tinfos=[tinfo(b"a", [256], 16, 0)]),
         "ggml type 16 (IQ2_XXS)"),
        ("n_dims 6", build(tinfos=[tinfo(b"a", [1, 1, 1, 1, 8, 1], 0, 0)]), "n_dims 6"),
        ("n_dims 0", build(tinfos=[tinfo(b"a", [], 0, 0)]), "n_dims 0"),
        ("dims product overflow", build(tinfos=[tinfo(b"a", [1 << 32, 1 << 32], 0, 0)]), "overflows"),
        ("a zero dim", build(tinfos=[tinfo(b"a", [8, 0], 0, 0)]), "dim 1 is 0"),
        ("byte size overflow", build(tinfos=[tinfo(b"a", [1 << 31, 1 << 31], 0, 0)]),
         "overflows 64 bits"),
        ("row not a whole number of blocks", build(tinfos=[tinfo(b"a", [100, 2], 12, 0)]),
         "not a multiple of the q4_k block of 256"),
        ("duplicate tensor name", build(tinfos=[tinfo(b"a", [8], 0, 0), tinfo(b"a", [8], 0, 32)]),
         "tensor 'a' appears twice"),
        ("duplicate key", build(kvs=[ARCH, ARCH]), "metadata 'general.architecture' appears twice"),
        ("alignment not a power of two",
         build(kvs=[ARCH, kv(b"general.alignment", 4, struct.pack("<I", 48))]), "power of two"),
        ("alignment not a u32",
         build(kvs=[ARCH, kv(b"general.alignment", 10, struct.pack("<Q", 64))]), "must be a u32"),
        ("tensor name not UTF-8", build(tinfos=[tinfo(b"a\xff", [8], 0, 0)]), "not valid UTF-8"),
        ("key with a control character", build(kvs=[kv(b"x\ny", 4, struct.pack("<I", 1))]),
         "control character"),
        ("empty key", build(kvs=[kv(b"", 4, struct.pack("<I", 1))]), "key of 0 bytes"),
        ("bool 2", build(kvs=[ARCH, kv(b"x.b", 7, b"\x02")]), "bool is 2"),
        ("unknown value type", build(kvs=[ARCH, kv(b"x.t", 13, b"")]), "unknown value type 13"),
        ("array of arrays", build(kvs=[ARCH, kv(b"x.aa", 9, struct.pack("<IQ", 9, 1))]),
         "an array of arrays"),
        ("orig_shape of the wrong size",
         build(kvs=[ARCH, kv(b"comfy.gguf.orig_shape.b", 9, struct.pack("<IQii", 5, 2, 3, 32))]),
         "96 elements, the tensor has 64"),
        ("orig_shape without a tensor",
         build(kvs=[ARCH, kv(b"comfy.gguf.orig_shape.zz", 9, struct.pack("<IQi", 5, 1, 8))]),
         "no tensor of that name"),
    ]


def refused(label, path, needle):
    try:
        r = subprocess.run([DUMP, path], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        check(False, f"{label}: the reader blocked (timeout)")
        return
    msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
    check(r.returncode == 2 and path in msg and needle in msg,
          f"{label}: refused (exit {r.returncode}): {msg[-250:]!r} (want {needle!r})")


def malformed_files():
    base = os.path.join(WORK, "base.gguf")
    open(base, "wb").write(build())
    r = subprocess.run([DUMP, base], capture_output=True, text=True)
    check(r.returncode == 0, f"the hand-built base file reads (exit {r.returncode}) {r.stderr.strip()}")
    for i, (label, data, needle) in enumerate(malformed_cases()):
        path = os.path.join(WORK, f"bad{i}.gguf")
        open(path, "wb").write(data)
        refused(label, path, needle)
    fifo = os.path.join(WORK, "fifo.gguf")
    os.mkfifo(fifo)
    refused("a FIFO", fifo, "not a regular file")
    refused("a directory", WORK, "not a regular file")


def main():
    global DUMP, WORK, SEED, rng
    DUMP, WORK, SEED = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = np.random.default_rng(SEED)
    valid_files()
    malformed_files()
    print(f"gguf_files: {'all checks passed' if fails == 0 else f'{fails} check(s) failed'} "
          f"(seed {SEED})")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
