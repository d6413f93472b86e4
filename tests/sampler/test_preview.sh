#!/usr/bin/env bash
# The latent preview PNG decoded with Python's standard library only: chunk
# CRCs (zlib.crc32), the zlib stream (zlib.decompress checks Adler-32), the
# five PNG row filters undone as the PNG specification defines them, the
# grid (up to 4 frames evenly spread, first and last included, 2 columns;
# fewer frames: one row) and every pixel of every 8x8 cell against ComfyUI's
# published Wan 2.1 latent_rgb_factors / latent_rgb_factors_bias applied here
# independently.
set -u
: "${SP_SRC:?}" "${SP_BUILD:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python_with 'import zlib' "python3"
writer=""
for c in "$SP_BUILD/tests/sampler_test_preview_png" "$SP_BUILD/sampler_test_preview_png"; do
  [ -x "$c" ] && writer="$c" && break
done
[ -n "$writer" ] || sp_skip "sampler_test_preview_png not built"
sp_work_dir preview
sp_seed
for shape in "6 30 20" "3 9 13" "1 4 4"; do
  set -- $shape
  "$writer" --write "$work/p.png" "$work/lat.f32" "$1" "$2" "$3" "$S" || { bad "write $shape"; continue; }
  if "$PY" - "$work/p.png" "$work/lat.f32" "$1" "$2" "$3" <<'PYEOF'; then ok "preview of $shape"; else bad "preview of $shape"; fi
import struct, sys, zlib
png, raw, F, H, W = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
factors = [  # ComfyUI comfy/latent_formats.py, Wan21.latent_rgb_factors
    [-0.1299, -0.1692, 0.2932], [0.0671, 0.0406, 0.0442], [0.3568, 0.2548, 0.1747],
    [0.0372, 0.2344, 0.1420], [0.0313, 0.0189, -0.0328], [0.0296, -0.0956, -0.0665],
    [-0.3477, -0.4059, -0.2925], [0.0166, 0.1902, 0.1975], [-0.0412, 0.0267, -0.1364],
    [-0.1293, 0.0740, 0.1636], [0.0680, 0.3019, 0.1128], [0.0032, 0.0581, 0.0639],
    [-0.1251, 0.0927, 0.1699], [0.0060, -0.0633, 0.0005], [0.3477, 0.2275, 0.2950],
    [0.1984, 0.0913, 0.1861]]
bias = [-0.1835, -0.0868, -0.3360]  # Wan21.latent_rgb_factors_bias
S = 8
tiles = min(F, 4)
cols = tiles if tiles < 4 else 2
rows = (tiles + cols - 1) // cols
frames = [0] if tiles == 1 else [int(k * (F - 1) / (tiles - 1) + 0.5) for k in range(tiles)]

data = open(png, "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "bad signature"
pos, chunks = 8, []
while pos < len(data):
    (n,) = struct.unpack(">I", data[pos:pos + 4])
    typ, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
    (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
    assert zlib.crc32(typ + body) == crc, f"bad CRC in {typ}"
    chunks.append((typ, body))
    pos += 12 + n
assert pos == len(data), "trailing bytes"
types = [t for t, _ in chunks]
assert types[0] == b"IHDR" and types[-1] == b"IEND", types
w, h, depth, ctype, comp, filt, inter = struct.unpack(">IIBBBBB", chunks[0][1])
assert (w, h) == (cols * W * S, rows * H * S), f"size {w}x{h}, want {cols * W * S}x{rows * H * S}"
assert (depth, ctype, comp, filt, inter) == (8, 2, 0, 0, 0)
z = zlib.decompress(b"".join(b for t, b in chunks if t == b"IDAT"))
stride = 3 * w
assert len(z) == h * (1 + stride), "wrong pixel byte count"

def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c

img, prev = [], bytearray(stride)
for y in range(h):
    ft, line = z[y * (1 + stride)], bytearray(z[y * (1 + stride) + 1:(y + 1) * (1 + stride)])
    for i in range(stride):
        a = line[i - 3] if i >= 3 else 0
        b, c = prev[i], prev[i - 3] if i >= 3 else 0
        pred = [0, a, b, (a + b) // 2, paeth(a, b, c)][ft]
        line[i] = (line[i] + pred) & 255
    img.append(bytes(line))
    prev = line

lat = struct.unpack(f"<{16 * F * H * W}f", open(raw, "rb").read())
plane = F * H * W
def want(f, y, x):
    out = []
    for k in range(3):
        v = bias[k]
        for c in range(16):
            v += lat[c * plane + (f * H + y) * W + x] * factors[c][k]
        u = (v + 1.0) / 2.0
        out.append(0 if not u > 0 else 255 if u >= 1 else int(u * 255.0))
    return bytes(out)
bad = clipped = 0
for t, f in enumerate(frames):
    y0, x0 = (t // cols) * H * S, (t % cols) * W * S
    for y in range(H):
        for x in range(W):
            exp = want(f, y, x)
            clipped += (0 in exp) or (255 in exp)
            for dy in range(S):
                row = img[y0 + y * S + dy]
                for dx in range(S):
                    p = 3 * (x0 + x * S + dx)
                    bad += row[p:p + 3] != exp
assert bad == 0, f"{bad} pixels differ"
assert F < 6 or clipped > 0, "no pixel reached the clamp: the test does not exercise it"
print(f"preview {w}x{h}: frames {frames} ok ({clipped} clipped cells)")
PYEOF
done
exit $fail
