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
