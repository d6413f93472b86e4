"""Round trip of `staticpipe convert`: checkpoints written here in every key
style and input dtype (and sharded: a list, a directory, an index JSON) are
converted to bf16 and fp32 and read back with h5py; every tensor must equal
its source bit for bit (fp32 out, or bf16 -> bf16) or its round-to-nearest-
even bf16 value, the config attributes must be the generator's, and the
safetensors metadata must come back as root attributes.
usage: roundtrip.py STATICPIPE_BIN WORKDIR"""
import json
import os
import subprocess
import sys
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import FAILS as failures, fail, seed  # noqa: E402
import stlib  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
SEED = seed("roundtrip")
rng = np.random.default_rng(SEED)
CFG = dict(stlib.SMALL)
compared = [0]


def convert(inputs, out, dtype):
    if os.path.exists(out):
        os.remove(out)
    r = subprocess.run([BIN, "convert", *inputs, "-o", out, "--dtype", dtype],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"convert {inputs} --dtype {dtype}: exit {r.returncode}: {r.stderr[-2000:]}")
        return None
    if "MB/s" not in r.stderr:
        fail(f"convert {inputs}: no progress line with a rate on stderr")
    # The model loader's own validation (layout, dtypes, checksums) accepts it.
    v = subprocess.run([BIN, "inspect", "--verify", out], capture_output=True, text=True)
    if v.returncode != 0:
        fail(f"inspect --verify {out}: exit {v.returncode}: {v.stderr[-1000:]}")
    return r


def verify(label, out, style, entries, metadata, out_dtype):
    src = {k: (dt, s, raw) for k, dt, s, raw in entries}
    with h5py.File(out, "r") as f:
        for a in ("dim", "ffn_dim", "heads", "layers", "in_dim", "out_dim", "text_dim",
                  "freq_dim"):
            got = int(np.asarray(f.attrs[a]).reshape(-1)[0])
            if got != CFG[a]:
                fail(f"{label}: attribute {a} = {got}, generator used {CFG[a]}")
        fdt = f.attrs["dtype"]
        fdt = fdt.decode() if isinstance(fdt, bytes) else str(fdt)
        if fdt != out_dtype:
            fail(f"{label}: file dtype {fdt}, asked for {out_dtype}")
        for mk, mv in metadata.items():
            a = f.attrs.get("meta." + mk)
            a = a.decode() if isinstance(a, bytes) else a
            if a != mv:
                fail(f"{label}: metadata {mk!r} came back as {a!r}, not {mv!r}")
        seen = set()
        f.visititems(lambda n, o: seen.add("/" + n) if isinstance(o, h5py.Dataset) else None)
        want = set()
        for g, b, name, shape in stlib.table(CFG):
            p = stlib.h5_path(g, b, name)
            want.add(p)
            if p not in f:
                fail(f"{label}: {p} missing")
                continue
            d = f[p]
            if tuple(d.shape) != tuple(shape):
                fail(f"{label}: {p} shape {d.shape}, want {shape}")
                continue
            dt, _, raw = src[stlib.key(style, g, b, name)]
            x = stlib.to_f32(dt, raw)
            got = d[...].reshape(-1)
            if out_dtype == "fp32":
                ok = d.dtype == np.float32 and np.array_equal(got.view(np.uint32),
                                                               x.view(np.uint32))
            else:
                a = d.attrs.get("dtype")
                a = a.decode() if isinstance(a, bytes) else a
                ref = (np.frombuffer(raw, "<u2") if dt == "BF16" else stlib.bf16_rne(x))
                ok = d.dtype == np.uint16 and a == "bf16" and np.array_equal(got, ref)
            compared[0] += 1
            if not ok:
                fail(f"{label}: {p} values differ from the source ({dt} -> {out_dtype})")
        extra = seen - want
        if extra:
            fail(f"{label}: unexpected datasets {sorted(extra)[:5]}")


os.makedirs(WORK, exist_ok=True)
meta = {"format": "pt", "note": "round trip \u00e9"}
cases = 0
for style in ("official", "diffusers", "comfy"):
    for dt in ("F32", "F16", "BF16"):
        entries = stlib.make_checkpoint(rng, CFG, style, dt)
        rng.shuffle(entries)  # header order must not matter
        src = os.path.join(WORK, f"{style}-{dt}.safetensors")
        stlib.write_st(src, entries, meta)
        for od in ("bf16", "fp32"):
            out = os.path.join(WORK, f"{style}-{dt}-{od}.h5")
            if convert([src], out, od):
                verify(f"{style}/{dt}->{od}", out, style, entries, meta, od)
            cases += 1
            if os.path.exists(out):
                os.remove(out)
        os.remove(src)

# Shards of a mixed-dtype official checkpoint: as a list, a directory and
# an index JSON (whose weight_map says which shard holds which tensor).
entries = stlib.make_checkpoint(rng, CFG, "official", ["F32", "BF16", "F16"])
shard_dir = os.path.join(WORK, "shards")
os.makedirs(shard_dir, exist_ok=True)
names = [f"diffusion_pytorch_model-{i + 1:05d}-of-00003.safetensors" for i in range(3)]
parts = [entries[i::3] for i in range(3)]
wmap = {}
for nm, part in zip(names, parts):
    stlib.write_st(os.path.join(shard_dir, nm), part, {"shard": nm})
    wmap.update({k: nm for k, _, _, _ in part})
index = os.path.join(shard_dir, "diffusion_pytorch_model.safetensors.index.json")
with open(index, "w") as f:
    json.dump({"metadata": {"total_size": 0}, "weight_map": wmap}, f)
# The first shard opened gives a metadata key its value.
for label, inputs, first in (("list", [os.path.join(shard_dir, n) for n in reversed(names)],
                              names[2]),
                             ("directory", [shard_dir], names[0]), ("index", [index], names[0])):
    for od in ("bf16", "fp32"):
        out = os.path.join(WORK, f"shards-{label}-{od}.h5")
        if convert(inputs, out, od):
            verify(f"shards/{label}->{od}", out, "official", entries, {"shard": first}, od)
        cases += 1
        if os.path.exists(out):
            os.remove(out)

# Streaming: a checkpoint of many blocks converts with a peak RSS far below
# its size (tensors go one at a time through a bounded buffer). The peak is
# that of the largest child so far, which includes every conversion above.
big = dict(CFG, layers=48)
src = os.path.join(WORK, "big.safetensors")
bytes_in = 0
with open(src, "wb") as f:
    ents = [(stlib.key("official", g, b, n), "F32", s_, None) for g, b, n, s_ in stlib.table(big)]
    hdr, off = {}, 0
    for k, dt, s_, _ in ents:
        nb = int(np.prod(s_)) * 4
        hdr[k] = {"dtype": dt, "shape": list(s_), "data_offsets": [off, off + nb]}
        off += nb
    h = stlib.header_bytes(hdr)
    f.write(len(h).to_bytes(8, "little") + h)
    for k, dt, s_, _ in ents:  # written tensor by tensor: the test stays small too
        f.write(stlib.random_tensor(rng, "F32", s_))
    bytes_in = f.tell()
out = os.path.join(WORK, "big.h5")
with open(BIN, "rb") as f:
    asan = b"__asan_init" in f.read()
if asan:
    print("roundtrip: memory bound not checked (AddressSanitizer build: shadow memory, quarantine)")
else:
    # VmHWM of the child itself (getrusage of children would count the
    # memory of this Python process that the child shared before exec).
    def peak_rss(args):
        p = subprocess.Popen([BIN] + args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
        hwm = 0
        while p.poll() is None:
            try:
                with open(f"/proc/{p.pid}/status") as st:
                    for ln in st:
                        if ln.startswith("VmHWM:"):
                            hwm = max(hwm, int(ln.split()[1]) * 1024)
            except OSError:
                pass
            time.sleep(0.002)
        return p.returncode, hwm, p.stderr.read().decode(errors="replace")
    # The binary's own resident size (shared libraries: with the CUDA
    # backend, cuBLASLt, cuDNN and NCCL alone bring a couple of hundred MB)
    # is what a command costs before it touches any data; the bound is on
    # what converting adds to it.
    _, base, _ = peak_rss(["inspect", "synth:wan2.1-tiny"])
    rc, hwm, errtxt = peak_rss(["convert", src, "-o", out, "-q"])
    grown = hwm - base
    print(f"roundtrip: {bytes_in / 1e6:.0f} MB checkpoint, peak RSS of convert >= {hwm / 1e6:.0f} MB"
          f" ({grown / 1e6:.0f} MB above the binary's own {base / 1e6:.0f} MB)")
    if rc != 0:
        fail(f"big checkpoint: exit {rc}: {errtxt[-1500:]}")
    elif hwm == 0 or base == 0:
        fail("could not read the peak RSS of convert from /proc")
    elif grown > 0.4 * bytes_in:
        fail(f"convert grew by {grown} bytes, not far below the checkpoint's {bytes_in} bytes")
for x in (src, out):
    if os.path.exists(x):
        os.remove(x)

# The bf16 reference itself, on values with a known answer (ties to even,
# carries into the exponent), so a wrong reference cannot pass silently.
probe = np.array([0x3F808000, 0x3F818000, 0x3F80FFFF, 0x3F7FFFFF, 0xBF808001, 0x7F7FFFFF & 0x7F7F7FFF],
                 np.uint32).view(np.float32)
want = np.array([0x3F80, 0x3F82, 0x3F81, 0x3F80, 0xBF81, 0x7F7F], np.uint16)
if not np.array_equal(stlib.bf16_rne(probe), want):
    fail(f"bf16 reference wrong on probes: {stlib.bf16_rne(probe)} vs {want}")

ntab = len(stlib.table(CFG))
if compared[0] != cases * ntab:
    fail(f"compared {compared[0]} tensors, expected {cases} x {ntab}")
print(f"roundtrip: {cases} conversions, {compared[0]} tensors checked, {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
