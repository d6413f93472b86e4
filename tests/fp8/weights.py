"""fp8 model files (MODEL.md "fp8 weights") against an independent e4m3
quantiser (fp8ref.py, from the OCP FP8 definition):

  1. convert --dtype fp8 of a BF16 checkpoint: every block linear weight's
     bytes and scales equal fp8ref's quantisation of the checkpoint's
     values bit for bit, the rest keeps its bf16 bits; the root dtype is
     fp8; inspect --verify passes; the engine's dequantised weights (the
     run) equal the bf16 file's with --precision fp8, bit for bit; with
     --precision bf16 the fp8 file runs its dequantised weights: the run
     of an fp32 file holding fp8ref's dequantisation, bit for bit.
  2. init --dtype fp8 = fp8ref's quantisation of init's bf16 weights.
  3. ComfyUI fp8_e4m3fn and fp8_e4m3fn_scaled with --dtype fp8: the blocks'
     linear weights keep their bytes, every output channel's scale is the
     scale_weight (1 without); other fp8 tensors dequantised to bf16.
  4. Malformed fp8 files are refused by inspect --verify with one line
     naming the dataset and the check.
usage: weights.py STATICPIPE_BIN WORKDIR"""
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import FAILS as failures, fail, seed  # noqa: E402
import fp8ref  # noqa: E402
import h5crc  # noqa: E402
import stlib  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
SEED = seed("fp8 weights")
rng = np.random.default_rng(SEED)
CFG = dict(stlib.SMALL)
# The linear layers an fp8 file stores in e4m3 (MODEL.md "fp8 weights").
LINEARS = set(stlib.LINEARS)


def sp(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True)


def is_fp8(group, name):
    return group == "block" and name in LINEARS


def check_file(path, label, expect):
    """expect(group, block, name) -> ("fp8", codes, scale) or ("bf16", bits)."""
    n = 0
    with h5py.File(path, "r") as f:
        if f.attrs["dtype"] != b"fp8" and f.attrs["dtype"] != "fp8":
            fail(f"{label}: root dtype {f.attrs['dtype']!r}, not fp8")
        for g, b, name, shape in stlib.table(CFG):
            ds = f[stlib.h5_path(g, b, name)]
            e = expect(g, b, name, shape)
            if e[0] == "fp8":
                sc = f[stlib.h5_path(g, b, name) + ".scale"]
                ok = (ds.dtype == np.uint8 and ds.attrs["dtype"] in (b"fp8_e4m3", "fp8_e4m3")
                      and ds.shape == tuple(shape) and sc.shape == (shape[0],)
                      and sc.dtype == np.float32
                      and np.array_equal(ds[...].reshape(shape[0], -1), e[1])
                      and np.array_equal(sc[...].view(np.uint32), e[2].view(np.uint32)))
            else:
                ok = ds.dtype == np.uint16 and np.array_equal(ds[...].reshape(-1), e[1])
            n += 1
            if not ok:
                fail(f"{label}: {g} {b} {name} differs from the reference")
    v = sp("inspect", "--verify", path)
    if v.returncode != 0:
        fail(f"{label}: inspect --verify: {v.stderr[-400:]}")
    return n


os.makedirs(WORK, exist_ok=True)

# ---- 1. convert --dtype fp8 of a BF16 checkpoint ----
ck = stlib.make_checkpoint(rng, CFG, "official", "BF16")
src = os.path.join(WORK, "bf16.safetensors")
stlib.write_st(src, ck)
vals = {k: stlib.to_f32(dt, raw).reshape(shape) for k, dt, shape, raw in ck}
f8, b16 = os.path.join(WORK, "fp8.h5"), os.path.join(WORK, "bf16.h5")
for out, dt in ((f8, "fp8"), (b16, "bf16")):
    r = sp("convert", src, "-o", out, "--dtype", dt)
    if r.returncode != 0:
        sys.exit(f"FAIL convert --dtype {dt}: {r.stderr[-800:]}")


def expect_quantised(source):
    def f(g, b, name, shape):
        x = source(g, b, name)
        if is_fp8(g, name):
            return ("fp8",) + fp8ref.quantise_rows(x.reshape(shape[0], -1))
        return ("bf16", stlib.bf16_rne(x.reshape(-1)))
    return f


n = check_file(f8, "convert --dtype fp8", expect_quantised(
    lambda g, b, name: vals[stlib.key("official", g, b, name)]))
print(f"ok   convert --dtype fp8: {n} tensors equal the independent quantiser bit for bit")

# The engine reads them back: the fp8 file and the bf16 file run with
# --precision fp8 give the same latents; the bf16 run differs from both.
with h5py.File(os.path.join(WORK, "cond.h5"), "w") as f:
    f["context"] = rng.standard_normal((7, CFG["text_dim"])).astype(np.float32)
    f["context_null"] = rng.standard_normal((5, CFG["text_dim"])).astype(np.float32)
run = ["run", "--cond", os.path.join(WORK, "cond.h5"), "--frames", "5", "--size", "32x48",
       "--steps", "2", "--seed", str(SEED), "--no-preview", "-q"]
lat = {}
for name, model, extra in (("fp8", f8, []), ("bf16-as-fp8", b16, ["--precision", "fp8"]),
                           ("bf16", b16, [])):
    out = os.path.join(WORK, f"run-{name}.h5")
    r = sp(*run, "--model", model, *extra, "-o", out)
    if r.returncode != 0:
        sys.exit(f"FAIL run {name}: {r.stderr[-800:]}")
    with h5py.File(out, "r") as f:
        lat[name] = f["latents"][...]
        prec = f["latents"].attrs.get("precision", f.attrs.get("precision"))
    want = None if name == "bf16" else "fp8"
    if (prec.decode() if isinstance(prec, bytes) else prec) != want:
        fail(f"run {name}: the output's precision attribute is {prec!r}, want {want!r}")
if lat["fp8"].tobytes() != lat["bf16-as-fp8"].tobytes():
    fail("the fp8 file and the bf16 file with --precision fp8 give different latents")
else:
    print("ok   fp8 file and bf16 file with --precision fp8: bit-identical latents")
rel = np.linalg.norm(lat["fp8"] - lat["bf16"]) / np.linalg.norm(lat["bf16"])
print(f"     fp8 against bf16 (2 steps, random weights): relative L2 {rel:.3e}")
if not 0 < rel < 0.2:
    fail(f"fp8 against bf16: relative L2 {rel} (0 means fp8 did nothing)")
# --precision bf16 on the fp8 file: its weights dequantised, the inputs not
# quantised: the run of an fp32 file holding fp8ref's dequantised weights.
deq = []
with h5py.File(f8, "r") as f:
    for g, b, name, shape in stlib.table(CFG):
        ds = f[stlib.h5_path(g, b, name)]
        if is_fp8(g, name):
            x = fp8ref.decode_rows(ds[...].reshape(shape[0], -1), f[ds.name + ".scale"][...])
        else:
            x = (ds[...].astype(np.uint32) << 16).view(np.float32)
        deq.append((stlib.key("official", g, b, name), "F32", shape,
                    np.ascontiguousarray(x, np.float32).tobytes()))
twin_st, twin = os.path.join(WORK, "deq.safetensors"), os.path.join(WORK, "deq-fp32.h5")
stlib.write_st(twin_st, deq)
r = sp("convert", twin_st, "-o", twin, "--dtype", "fp32")
if r.returncode != 0:
    sys.exit(f"FAIL convert of the dequantised twin: {r.stderr[-800:]}")
for name, model, extra in (("fp8-as-bf16", f8, ["--precision", "bf16"]), ("deq-fp32", twin, [])):
    out = os.path.join(WORK, f"run-{name}.h5")
    r = sp(*run, "--model", model, *extra, "-o", out)
    if r.returncode != 0:
        sys.exit(f"FAIL run {name}: {r.stderr[-800:]}")
    with h5py.File(out, "r") as f:
        lat[name] = f["latents"][...]
if lat["fp8-as-bf16"].tobytes() != lat["deq-fp32"].tobytes():
    fail("the fp8 file with --precision bf16 differs from an fp32 file of its dequantised weights")
else:
    print("ok   fp8 file with --precision bf16 (weights dequantised): bit-identical to the run of "
          "an fp32 file holding fp8ref's dequantised weights")
r = sp(*run, "--model", f8, "--precision", "int8", "-o", os.path.join(WORK, "no.h5"))
if r.returncode != 2 or "holds fp8 weights" not in r.stderr:
    fail(f"--precision int8 on an fp8 file not refused: {r.returncode} {r.stderr[-300:]}")
else:
    print("ok   --precision int8 on an fp8 file refused: " + r.stderr.strip().splitlines()[-1][:120])

# ---- 2. init --dtype fp8 ----
ib, i8 = os.path.join(WORK, "init-bf16.h5"), os.path.join(WORK, "init-fp8.h5")
for out, dt in ((ib, "bf16"), (i8, "fp8")):
    r = sp("init", "--arch", "wan2.1-tiny", "--seed", str(SEED), "--dtype", dt, "-q", "-o", out)
    if r.returncode != 0:
        sys.exit(f"FAIL init --dtype {dt}: {r.stderr[-500:]}")
with h5py.File(ib, "r") as f:
    ivals = {stlib.h5_path(g, b, name): (f[stlib.h5_path(g, b, name)][...].astype(np.uint32)
                                         << 16).view(np.float32)
             for g, b, name, _ in stlib.table(dict(CFG, layers=4, text_dim=4096))}
CFG_INIT = dict(CFG, layers=4, text_dim=4096)
saved, CFG = CFG, CFG_INIT
n = check_file(i8, "init --dtype fp8", expect_quantised(
    lambda g, b, name: ivals[stlib.h5_path(g, b, name)]))
CFG = saved
print(f"ok   init --dtype fp8: {n} tensors equal the quantiser of init's bf16 weights")

# ---- 3. ComfyUI fp8 checkpoints kept in fp8 ----
FINITE = np.array([b for b in range(256) if b not in (0x7F, 0xFF)], np.uint8)
for scaled in (False, True):
    label = "fp8_e4m3fn_scaled" if scaled else "fp8_e4m3fn"
    entries, want = [], {}
    for g, b, name, shape in stlib.table(CFG):
        k = stlib.key("comfy", g, b, name)
        if name.endswith(".weight") and len(shape) >= 2:
            q = rng.choice(FINITE, int(np.prod(shape))).astype(np.uint8)
            entries.append((k, "F8_E4M3", shape, q.tobytes()))
            s = np.float32(rng.uniform(1e-4, 4e-3)) if scaled else np.float32(1)
            if scaled:
                entries.append((k[:-len(".weight")] + ".scale_weight", "F32", (), s.tobytes()))
            if is_fp8(g, name):
                want[(g, b, name)] = ("fp8", q.reshape(shape[0], -1),
                                      np.full(shape[0], s, np.float32))
            else:
                want[(g, b, name)] = ("bf16", stlib.bf16_rne(
                    fp8ref.VALUES[q].astype(np.float32) * s))
        else:
            raw = stlib.random_tensor(rng, "BF16", shape)
            entries.append((k, "BF16", shape, raw))
            want[(g, b, name)] = ("bf16", np.frombuffer(raw, "<u2"))
    if scaled:
        entries.append((stlib.COMFY + "scaled_fp8", "F8_E4M3", (0,), b""))
    rng.shuffle(entries)
    csrc, cout = os.path.join(WORK, f"{label}.safetensors"), os.path.join(WORK, f"{label}.h5")
    stlib.write_st(csrc, entries)
    r = sp("convert", csrc, "-o", cout, "--dtype", "fp8")
    if r.returncode != 0 or "kept in fp8" not in r.stderr:
        fail(f"{label} --dtype fp8: exit {r.returncode}: {r.stderr[-800:]}")
        continue
    n = check_file(cout, label, lambda g, b, name, shape: want[(g, b, name)])
    print(f"ok   {label} --dtype fp8: {n} tensors, the blocks' linear weights' bytes kept")


# ---- 4. malformed fp8 files ----
def crcs_in_order(f):
    out = []
    for g, b, name, shape in stlib.table(CFG):
        p = stlib.h5_path(g, b, name)
        out.append(int(f[p].attrs["checksum"]))
        if is_fp8(g, name) and p + ".scale" in f:
            out.append(int(f[p + ".scale"].attrs["checksum"]))
    return out


def rewrite(f, path, data, dtype_attr):
    """Replaces dataset path by data with a consistent checksum."""
    del f[path]
    d = f.create_dataset(path, data=data)
    d.attrs["dtype"] = np.bytes_(dtype_attr)
    d.attrs["checksum"] = np.uint32(h5crc.crc32c(np.ascontiguousarray(data).tobytes()))


W = "/blocks/0001/cross_attn.v.weight"
S = W + ".scale"


def edit_scale(value):
    def e(f):
        s = f[S][...].copy()
        s[3] = value
        rewrite(f, S, s, "fp32")
    return e


CASES = [
    ("scale shape", lambda f: rewrite(f, S, np.ones(CFG["dim"] + 1, np.float32), "fp32"),
     S, "shape"),
    ("scale NaN", edit_scale(np.nan), S, "output channel 3 is nan"),
    ("scale zero", edit_scale(0.0), S, "output channel 3 is 0"),
    ("scale negative", edit_scale(-0.5), S, "output channel 3 is -0.5"),
    ("scale float64", lambda f: rewrite(f, S, f[S][...].astype(np.float64), "fp32"), S,
     "dtype is not fp32"),
    ("weight uint16", lambda f: rewrite(f, W, f[W][...].astype(np.uint16), "fp8_e4m3"), W,
     "dtype is not fp8_e4m3"),
    ("weight bf16 attribute", lambda f: f[W].attrs.modify("dtype", np.bytes_("bf16")), W,
     "dtype is not fp8_e4m3"),
    ("scale missing", lambda f: f.__delitem__(S), S, "dataset is missing"),
    ("scale damaged", lambda f: f[S].__setitem__(5, np.float32(f[S][5] * 2)), S,
     "checksum mismatch"),
]
for what, edit, ds, check in CASES:
    path = os.path.join(WORK, "bad.h5")
    with open(f8, "rb") as a, open(path, "wb") as b:
        b.write(a.read())
    with h5py.File(path, "r+") as f:
        edit(f)
        f.attrs["checksum"] = np.bytes_(h5crc.model_checksum(crcs_in_order(f)))
    r = sp("inspect", "--verify", path)
    lines = [l for l in r.stderr.splitlines() if "error:" in l]
    if r.returncode != 2 or len(lines) != 1 or ds not in lines[0] or check not in lines[0]:
        fail(f"{what}: exit {r.returncode}, {len(lines)} error lines, want '{ds}' and "
             f"'{check}': {r.stderr[-500:]}")
    else:
        print(f"ok   {what}: refused: {lines[0][:150]}")

print(f"fp8 weights: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
