#!/usr/bin/env bash
# The latent preview PNG decoded with Python's standard library only: chunk
# CRCs (zlib.crc32), the zlib stream (zlib.decompress checks Adler-32), the
# image size (F*W by H) and every pixel against ComfyUI's published Wan 2.1
# latent_rgb_factors / latent_rgb_factors_bias applied here independently.
# The image is large enough (over 65535 raw bytes) to need several stored
# deflate blocks.
set -euo pipefail
. "$SP_SRC/tests/common/script.sh"
command -v python3 >/dev/null || sp_skip "python3 not found"
writer=""
for c in "$SP_BUILD/tests/sampler_test_preview_png" "$SP_BUILD/sampler_test_preview_png"; do
  [ -x "$c" ] && writer="$c" && break
done
[ -n "$writer" ] || sp_skip "sampler_test_preview_png not built"

sp_work_dir sampler-preview
tmp=$work
seed=${SP_SEED:-$(date +%s%N)}
echo "seed $seed (replay with SP_SEED=$seed)"
F=4 H=30 W=200
"$writer" --write "$tmp/p.png" "$tmp/lat.f32" $F $H $W "$seed"

python3 - "$tmp/p.png" "$tmp/lat.f32" $F $H $W <<'EOF'
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
assert (w, h) == (F * W, H), f"size {w}x{h}, want {F * W}x{H}"
assert (depth, ctype, comp, filt, inter) == (8, 2, 0, 0, 0)
pix = zlib.decompress(b"".join(b for t, b in chunks if t == b"IDAT"))
row = 1 + 3 * w
assert len(pix) == h * row, "wrong pixel byte count"

vals = open(raw, "rb").read()
lat = struct.unpack(f"<{16 * F * H * W}f", vals)
plane = F * H * W
def want(f, y, x):
    out = []
    for k in range(3):
        v = bias[k]
        for c in range(16):
            v += lat[c * plane + (f * H + y) * W + x] * factors[c][k]
        u = (v + 1.0) / 2.0
        out.append(0 if not u > 0 else 255 if u >= 1 else int(u * 255.0))
    return out
bad = clipped = 0
for y in range(H):
    assert pix[y * row] == 0, "row filter is not 0"
    for f in range(F):
        for x in range(W):
            p = y * row + 1 + 3 * (f * W + x)
            got, exp = list(pix[p:p + 3]), want(f, y, x)
            bad += got != exp
            clipped += (0 in exp) or (255 in exp)
assert bad == 0, f"{bad} pixels differ"
assert clipped > 0, "no pixel reached the clamp: the test does not exercise it"
print(f"preview {w}x{h} ok ({len(types)} chunks, {clipped} clipped pixels)")
EOF
