"""The int8 rule of MODEL.md "int8 weights", written from its definition
(not from the C code): per row, amax = max |x|; m = 127 / amax and
s = amax / 127, each rounded to float32 (1 for an all-zero row); codes
rint(float32(x x m)), ties to even, clamped to +-127."""
import numpy as np


def int8_rows(x):
    """x (rows, cols) -> (codes int8 (rows, cols), scales float32 (rows))."""
    x = np.asarray(x, np.float32)
    amax = np.max(np.abs(x), axis=1)
    pos = amax > 0
    safe = np.where(pos, amax, np.float32(1)).astype(np.float32)
    mul = np.where(pos, np.float32(127) / safe, np.float32(1)).astype(np.float32)
    scale = np.where(pos, safe / np.float32(127), np.float32(1)).astype(np.float32)
    q = np.clip(np.rint((x * mul[:, None]).astype(np.float32)), -127, 127).astype(np.int8)
    return q, scale
