"""A corpus of malformed checkpoints, made here from a valid one: each must be
refused by `staticpipe convert` with exit 2, no crash (no signal, no
sanitizer report), no output file (nor a temporary one) and an error line
naming the file, the tensor where there is one, and the check.
usage: malformed.py STATICPIPE_BIN WORKDIR"""
import json
import os
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import seed  # noqa: E402
import stlib  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
SEED = seed("malformed")
rng = np.random.default_rng(SEED)
CFG = dict(dim=128, ffn_dim=64, heads=1, layers=3, in_dim=16, out_dim=16, text_dim=16,
           freq_dim=16)
os.makedirs(WORK, exist_ok=True)
BASE = stlib.make_checkpoint(rng, CFG, "official", "F16")
# A tensor in the middle of the data (not first, not last) for the offset cases.
MID = "blocks.1.self_attn.q.weight"


def path(name):
    return os.path.join(WORK, name + ".safetensors")


def good(name, entries=None, meta=None):
    p = path(name)
    stlib.write_st(p, BASE if entries is None else entries, meta)
    return p


def edit(name, fn, entries=None):
    """Writes the base checkpoint after fn(header dict, data) -> (hdr, data)."""
    hdr, data = stlib.layout(BASE if entries is None else entries)
    hdr, data = fn(hdr, data)
    p = path(name)
    stlib.write_raw(p, stlib.header_bytes(hdr) if isinstance(hdr, dict) else hdr, data)
    return p


def raw_header(name, text, data=b""):
    p = path(name)
    stlib.write_raw(p, text, data)
    return p


def with_bytes(name, blob):
    p = path(name)
    with open(p, "wb") as f:
        f.write(blob)
    return p


def set_offsets(hdr, k, b, e):
    hdr[k]["data_offsets"] = [b, e]
    return hdr


def drop(keys):
    return [x for x in BASE if x[0] not in keys]


def serialized_base():
    hdr, data = stlib.layout(BASE)
    return stlib.header_bytes(hdr), data


def dup_key_text(escaped):
    """The header with the first block tensor written twice (the second
    time with its first letter as a \\u escape when escaped)."""
    hdr, data = stlib.layout(BASE)
    text = json.dumps(hdr, separators=(",", ":"))
    k = MID
    entry = json.dumps(hdr[k], separators=(",", ":"))
    k2 = ("\\u%04x" % ord(k[0]) + k[1:]) if escaped else k
    text = text[:-1] + ',"%s":%s}' % (k2, entry)
    return text.encode(), data


def cases():
    hl, data = serialized_base()
    full = struct.pack("<Q", len(hl)) + hl + data
    last = max(stlib.layout(BASE)[0].items(), key=lambda kv: kv[1]["data_offsets"][1]
               if kv[0] != "__metadata__" else -1)[0]
    yield "short_file", lambda: with_bytes("short_file", b"\x10\x00\x00"), "truncated", None
    yield "truncated_data", lambda: with_bytes("truncated_data", full[:-100]), "past the end", last
    yield "header_too_long", lambda: with_bytes(
        "header_too_long", struct.pack("<Q", 200_000_000) + hl + data), "exceeds", None
    yield "header_past_eof", lambda: with_bytes(
        "header_past_eof", struct.pack("<Q", len(full)) + hl + data), "runs past the end", None
    yield "offsets_reversed", lambda: edit("offsets_reversed", lambda h, d: (set_offsets(
        h, MID, h[MID]["data_offsets"][1], h[MID]["data_offsets"][0]), d)), "reversed", MID
    yield "offsets_overlap", lambda: edit("offsets_overlap", lambda h, d: (set_offsets(
        h, MID, h[MID]["data_offsets"][0] - 8, h[MID]["data_offsets"][1] - 8), d)), "overlap", MID
    yield "offsets_past_end", lambda: edit("offsets_past_end", lambda h, d: (set_offsets(
        h, MID, len(d) + 64, len(d) + 64 + h[MID]["data_offsets"][1] - h[MID]["data_offsets"][0]),
        d)), "past the end", MID

    def gap(h, d):
        b = h[MID]["data_offsets"][0]
        for k, e in h.items():
            if e["data_offsets"][0] >= b:
                e["data_offsets"] = [e["data_offsets"][0] + 16, e["data_offsets"][1] + 16]
        return h, d[:b] + bytes(16) + d[b:]
    yield "offsets_gap", lambda: edit("offsets_gap", gap), "gap", MID

    def shape(value):
        def f(h, d):
            h[MID]["shape"] = value
            return h, d
        return f
    yield "shape_overflow", lambda: edit("shape_overflow", shape([1 << 40, 1 << 40])), \
        "overflows", MID
    yield "shape_negative", lambda: edit("shape_negative", shape([-128, -128])), "negative", MID
    yield "shape_float", lambda: edit("shape_float", shape([128.0, 128])), "not an integer", MID
    yield "size_mismatch", lambda: edit("size_mismatch", shape([128, 127])), "size mismatch", MID

    def dtype(value):
        def f(h, d):
            h[MID]["dtype"] = value
            return h, d
        return f
    yield "dtype_unknown", lambda: edit("dtype_unknown", dtype("F33")), "unknown dtype", MID
    yield "duplicate_key", lambda: raw_header("duplicate_key", *dup_key_text(False)), \
        "duplicate key", MID
    yield "duplicate_key_escaped", lambda: raw_header("duplicate_key_escaped",
                                                      *dup_key_text(True)), "duplicate key", MID
    yield "duplicate_field", lambda: raw_header("duplicate_field", hl.replace(
        b'"dtype":"F16"', b'"dtype":"F16","dtype":"F32"', 1), data), "duplicate key", "dtype"
    yield "deep_nesting", lambda: raw_header(
        "deep_nesting", hl.rstrip()[:-1] + b',"x":' + b"[" * 5000 + b"]" * 5000 + b"}",
        data), "nested deeper", None
    yield "non_utf8", lambda: raw_header("non_utf8", hl.replace(
        b'"blocks.0.ffn.0.bias"', b'"blocks.0.ffn.0.bi\xffs"'), data), "UTF-8", None
    yield "overlong_utf8", lambda: raw_header("overlong_utf8", hl.replace(
        b'"blocks.0.ffn.0.bias"', b'"blocks.0.ffn.0.bi\xc0\xafs"'), data), "UTF-8", None
    yield "lone_surrogate", lambda: raw_header("lone_surrogate", hl.replace(
        b'"blocks.0.ffn.0.bias"', b'"blocks.0.ffn.0.bi\\ud800s"'), data), "UTF-8", None
    yield "nul_in_header", lambda: raw_header("nul_in_header", hl.replace(
        b'"blocks.0.ffn.0.bias"', b'"blocks.0.ffn.0.bi\x00s"'), data), "NUL", None
    yield "not_an_object", lambda: raw_header("not_an_object", b"[1, 2, 3]"), \
        "not a JSON object", None
    yield "json_syntax", lambda: raw_header("json_syntax", hl.rstrip()[:-1] + b",}", data), \
        "invalid JSON", None
    yield "trailing_bytes", lambda: with_bytes("trailing_bytes", full + bytes(8)), \
        "file length mismatch", None
    yield "metadata_not_string", lambda: edit("metadata_not_string", lambda h, d: (
        {"__metadata__": {"format": 1}, **h}, d)), "not a string", "format"
    k = "blocks.2.ffn.2.bias"
    yield "missing_tensor", lambda: good("missing_tensor", drop({k})), "missing tensor", k
    extra = "blocks.0.self_attn.extra.weight"
    yield "extra_tensor", lambda: good("extra_tensor", BASE + [(extra, "F16", (4,), bytes(8))]), \
        "not a tensor of a Wan", extra
    yield "block_gap", lambda: good("block_gap", [x for x in BASE if not x[0].startswith(
        "blocks.1.")]), "missing block 1", None
    bad = "blocks.0.cross_attn.k.weight"
    yield "mis_shaped", lambda: good("mis_shaped", [
        (n, dt, (128, 64), bytes(128 * 64 * 2)) if n == bad else (n, dt, s, r)
        for n, dt, s, r in BASE]), "shape [128, 64]", bad
    yield "unsupported_dtype", lambda: good("unsupported_dtype", [
        (n, "I64", s, stlib.random_tensor(rng, "I64", s)) if n == MID else (n, dt, s, r)
        for n, dt, s, r in BASE]), "not supported", MID
    yield "foreign_arch", lambda: good("foreign_arch", [
        ("down_blocks.0.resnets.0.conv1.weight", "F16", (32, 4, 3, 3), bytes(32 * 4 * 9 * 2)),
        ("time_embedding.linear_1.weight", "F16", (64, 32), bytes(64 * 32 * 2))]), \
        "foreign architecture", None
    i2v = [("img_emb.proj.1.weight", "F16", (128, 64), bytes(128 * 64 * 2)),
           ("blocks.0.cross_attn.k_img.weight", "F16", (128, 128), bytes(128 * 128 * 2))]
    yield "i2v_arch", lambda: good("i2v_arch", BASE + i2v), "not a tensor of a Wan", \
        "img_emb.proj.1.weight"
    odd = dict(CFG, dim=192)
    yield "head_dim_not_128", lambda: good("head_dim_not_128", stlib.make_checkpoint(
        rng, odd, "official", "F16")), "head_dim 128", "patch_embedding.weight"


def shard_cases():
    """Cases over several files: (name, inputs, keyword, tensor, file to name)."""
    a = good("dup_a", BASE)
    b = good("dup_b", [x for x in BASE if x[0] == MID])
    yield "duplicate_across_shards", [a, b], "duplicate", MID, "dup_b"
    d = os.path.join(WORK, "idx")
    os.makedirs(d, exist_ok=True)
    stlib.write_st(os.path.join(d, "s1.safetensors"), BASE)
    idx = os.path.join(d, "m.safetensors.index.json")
    with open(idx, "w") as f:
        json.dump({"weight_map": {**{n: "s1.safetensors" for n, _, _, _ in BASE},
                                  MID: "s2.safetensors"}}, f)
    yield "index_missing_shard", [idx], "cannot open", None, "s2.safetensors"
    idx2 = os.path.join(d, "n.safetensors.index.json")
    with open(idx2, "w") as f:
        json.dump({"weight_map": {n: "s1.safetensors" for n, _, _, _ in BASE if n != MID}}, f)
    yield "index_not_listed", [idx2], "not listed", MID, "s1.safetensors"
    idx3 = os.path.join(d, "o.safetensors.index.json")
    with open(idx3, "w") as f:
        json.dump({"weight_map": {MID: "../s1.safetensors"}}, f)
    yield "index_path_escape", [idx3], "plain file name", MID, "o.safetensors.index.json"


failures = []
out_dir = os.path.join(WORK, "out")
os.makedirs(out_dir, exist_ok=True)
out = os.path.join(out_dir, "OUT.h5")


def run_case(name, inputs, keyword, tensor, fname):
    r = subprocess.run([BIN, "convert", *inputs, "-o", out], capture_output=True, text=True,
                       errors="replace")
    err = r.stderr
    problems = []
    if r.returncode != 2:
        problems.append(f"exit {r.returncode}, want 2")
    if "Sanitizer" in err or "runtime error" in err:
        problems.append("sanitizer report")
    if os.listdir(out_dir):
        problems.append(f"left files behind: {os.listdir(out_dir)}")
        for x in os.listdir(out_dir):
            os.remove(os.path.join(out_dir, x))
    lines = [ln for ln in err.splitlines() if keyword in ln]
    if not lines:
        problems.append(f"no error line with {keyword!r}")
    else:
        if fname and not any(fname in ln for ln in lines):
            problems.append(f"the {keyword!r} line does not name the file {fname}")
        if tensor and not any(tensor in ln for ln in lines):
            problems.append(f"the {keyword!r} line does not name {tensor!r}")
    if problems:
        failures.append(name)
        print(f"FAIL {name}: {'; '.join(problems)}\n  stderr: {err.strip()[-1500:]}")
    else:
        print(f"ok   {name}: {lines[0].strip()[:160]}")


n = 0
for name, make, keyword, tensor in cases():
    p = make()
    run_case(name, [p], keyword, tensor, os.path.basename(p))
    n += 1
for name, inputs, keyword, tensor, fname in shard_cases():
    run_case(name, inputs, keyword, tensor, fname)
    n += 1

# A failure leaves an existing output untouched.
good_ck = good("valid", BASE)
r = subprocess.run([BIN, "convert", good_ck, "-o", out, "-q"], capture_output=True, text=True)
if r.returncode != 0:
    failures.append("valid")
    print(f"FAIL valid base checkpoint refused: {r.stderr[-1500:]}")
else:
    before = open(out, "rb").read()
    run = subprocess.run([BIN, "convert", path("missing_tensor"), "-o", out],
                         capture_output=True, text=True)
    if run.returncode != 2 or open(out, "rb").read() != before or len(os.listdir(out_dir)) != 1:
        failures.append("existing_output")
        print("FAIL existing_output: a refused conversion changed the existing OUT.h5")
    else:
        print("ok   existing_output: untouched after a refused conversion")
print(f"malformed: {n} malformed inputs, {len(failures)} failure(s)")
if n < 20:
    failures.append("corpus too small")
sys.exit(1 if failures else 0)
