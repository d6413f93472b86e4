"""CRC-32C and the model checksum of a staticpipe model file, for tests that
edit a file and must keep it consistent (or break exactly one thing).
Written from the definitions (CRC-32C: reflected polynomial 0x82F63B78;
the model checksum: MODEL.md "Model file"), not from the C code."""
import struct

import numpy as np

_TABLE = np.zeros(256, np.uint32)
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _TABLE[_i] = _c
_TABLE = [int(x) for x in _TABLE]


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in bytes(data):
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # the published check value


def model_checksum(crcs):
    """'crc32c:XXXXXXXX' of the datasets' CRCs in table order."""
    return "crc32c:%08x" % crc32c(b"".join(struct.pack("<I", int(c)) for c in crcs))


def rewrite(f, path, data):
    """Replaces dataset path of the open h5py file f by data (its shape and
    its dtype attribute kept) with a checksum attribute that matches it."""
    dt = f[path].attrs["dtype"]
    shape = f[path].shape
    del f[path]
    data = np.ascontiguousarray(data)
    d = f.create_dataset(path, data=data.reshape(shape))
    d.attrs["dtype"] = dt
    d.attrs["checksum"] = np.uint32(crc32c(data.tobytes()))


def replace_scaled(template, out, paths, weights, quantise):
    """A copy of model file template whose scaled datasets (codes and
    NAME.scale: fp8, int8) at weights' keys are quantise(x) -> (codes,
    scales) of weights {path: float32 (out, in)}, its model checksum made
    again over paths (every dataset path in table order, a scaled one's
    scale right after it)."""
    import h5py
    with open(template, "rb") as s, open(out, "wb") as d:
        d.write(s.read())
    with h5py.File(out, "r+") as f:
        for p, x in weights.items():
            q, scale = quantise(x)
            rewrite(f, p, q)
            rewrite(f, p + ".scale", scale)
        crcs = []
        for p in paths:
            crcs.append(int(f[p].attrs["checksum"]))
            if p + ".scale" in f:
                crcs.append(int(f[p + ".scale"].attrs["checksum"]))
        f.attrs["checksum"] = np.bytes_(model_checksum(crcs))
