"""An fp8 e4m3 quantiser written from the OCP 8-bit Floating Point
Specification (OFP8, rev. 1.0), format E4M3: 1 sign bit, 4 exponent bits of
bias 7, 3 mantissa bits; exponent 0 is subnormal (m/8 x 2^-6); S.1111.111
is NaN; there are no infinities; the largest finite value is 448
(S.1111.110). Conversion rounds to the nearest representable value, a tie
to the one whose mantissa's last bit is 0, and saturates (a magnitude
beyond 448 becomes 448).

The scaling is MODEL.md "fp8 weights": per row (a weight's output channel,
an activation's token), amax = max |x|, the stored byte e4m3(x * m) with
m = float32(448 / amax) and the row's scale float32(amax / 448); an
all-zero row has m = scale = 1. Products and quotients are float32 as the
spec says. Nothing here is taken from the C code; the value table is built
from the bit fields and compared by distance in float64 (exact)."""
import numpy as np


def _value(b):
    s, e, m = b >> 7, (b >> 3) & 15, b & 7
    if e == 15 and m == 7:
        return float("nan")
    v = (m / 8.0) * 2.0 ** -6 if e == 0 else (1.0 + m / 8.0) * 2.0 ** (e - 7)
    return -v if s else v


VALUES = np.array([_value(b) for b in range(256)], np.float64)
# The definition's landmarks.
assert VALUES[0x7E] == 448.0 and VALUES[0x01] == 2.0 ** -9 and VALUES[0x38] == 1.0
assert VALUES[0x08] == 2.0 ** -6 and np.isnan(VALUES[0x7F]) and np.isnan(VALUES[0xFF])
_POS = VALUES[:0x7F]  # codes 0x00 .. 0x7E: the non-negative finite values, increasing
assert np.all(np.diff(_POS) > 0)


def encode(y):
    """float32 array -> e4m3 codes (uint8), nearest, ties to even, saturating."""
    y = np.asarray(y, np.float32)
    a = np.abs(y.astype(np.float64))
    lo = np.clip(np.searchsorted(_POS, a, side="right") - 1, 0, 0x7E)  # value <= a
    hi = np.minimum(lo + 1, 0x7E)
    dlo, dhi = a - _POS[lo], _POS[hi] - a
    take_hi = (dhi < dlo) | ((dhi == dlo) & (lo % 2 == 1))
    code = np.where(a >= 448.0, 0x7E, np.where(take_hi, hi, lo)).astype(np.uint8)
    return code | np.where(np.signbit(y), 0x80, 0).astype(np.uint8)


def quantise_rows(x):
    """x (rows, cols) float32 -> (codes (rows, cols) uint8, scale (rows) float32)."""
    x = np.asarray(x, np.float32).reshape(x.shape[0], -1)
    amax = np.max(np.abs(x), axis=1)
    pos = amax > 0
    safe = np.where(pos, amax, np.float32(1))
    mul = np.where(pos, np.float32(448) / safe, np.float32(1)).astype(np.float32)
    scale = np.where(pos, safe / np.float32(448), np.float32(1)).astype(np.float32)
    return encode((x * mul[:, None]).astype(np.float32)), scale


def decode_rows(q, scale):
    """The dequantised rows: float32(value x scale), one rounding."""
    return (VALUES[q].astype(np.float32) * scale[:, None]).astype(np.float32)


def self_test():
    # Ties go to the even code: 1.0625 between 1 (0x38) and 1.125 (0x39) to 1;
    # 1.1875 to 1.25 (0x3A); 2^-10 between 0 and 2^-9 to 0; 3 x 2^-10 to 2^-8 (0x02).
    t = encode(np.array([1.0625, 1.1875, 500.0, -1e9, 2.0 ** -10, 3 * 2.0 ** -10, -0.0],
                        np.float32))
    assert list(t) == [0x38, 0x3A, 0x7E, 0xFE, 0x00, 0x02, 0x80], [hex(v) for v in t]
    q, s = quantise_rows(np.array([[0.0, 0.0], [1.0, -2.0]], np.float32))
    assert s[0] == 1 and list(q[0]) == [0, 0] and VALUES[q[1, 1]] == -448.0


self_test()
