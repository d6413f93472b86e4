"""Makes the input of test_video_files.sh and checks what io_video_write
wrote from it, with tools that share no code with the writers: ffprobe and
the ffmpeg binary for the video files, h5py for .h5, and a PNG reader
written here from the PNG specification (zlib + the five row filters).

  check_video.py gen IN.h5 T H W SEED
      a moving pattern: per channel a plane over the image that runs past
      [-1, 1] (so clamping shows), and a square of a random colour per frame
      that moves a few pixels a frame
  check_video.py video FILE IN.h5 FPS CODEC CODEC_MAE
      ffprobe: codec, width, height, pix_fmt, r_frame_rate, frame count,
      each frame's time i / FPS; decoded to rgb24 by the ffmpeg binary, the
      mean absolute error against the expected 8-bit levels is at most what
      4:2:0 alone costs (yuv420_floor) plus CODEC_MAE levels, and frames
      off by one are not within that bound
  check_video.py png DIR IN.h5       every frame equals the expected levels
  check_video.py h5 FILE IN.h5 FPS   dataset video equals clamp(IN), attributes

Expected levels: round((clamp(v, -1, 1) + 1) * 127.5), halves up
(ranks/nets/wan_vae/VAE.md "Pixels"), in float64 from IN's float32 values.
Prints one line per check; exits 1 when one fails."""
import json
import os
import subprocess
import sys
import zlib

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import FAILS as failures, check  # noqa: E402


def read_input(path):
    with h5py.File(path, "r") as f:
        return f["video"][()]  # (3, T, H, W) float32


def expected_levels(v):
    """(3, T, H, W) float32 -> (T, H, W, 3) uint8."""
    x = (np.clip(v.astype(np.float64), -1.0, 1.0) + 1.0) * 127.5
    return np.floor(x + 0.5).astype(np.uint8).transpose(1, 2, 3, 0)


def gen(out, T, H, W, seed):
    r = np.random.default_rng(seed)
    yy, xx = np.meshgrid(np.linspace(-1, 1, H), np.linspace(-1, 1, W), indexing="ij")
    v = np.empty((3, T, H, W), np.float64)
    for c in range(3):
        a, b, d = r.uniform(-0.4, 0.4), r.uniform(-0.9, 0.9), r.uniform(-0.9, 0.9)
        v[c] = (a + b * xx + d * yy)[None]
    s = max(2, min(H, W) // 3)
    for t in range(T):
        y0, x0 = (3 * t) % (H - s + 1), (4 * t) % (W - s + 1)
        v[:, t, y0:y0 + s, x0:x0 + s] = r.uniform(-1, 1, 3)[:, None, None]
    with h5py.File(out, "w") as f:
        f["video"] = v.astype(np.float32)


def ffprobe(path, entries, extra=()):
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", *extra,
                          "-show_entries", entries, "-of", "json", path],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def decode_rgb(path, T, H, W):
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-f", "rawvideo",
                          "-pix_fmt", "rgb24", "-"], check=True, capture_output=True).stdout
    got = np.frombuffer(raw, np.uint8)
    if got.size != T * H * W * 3:
        return None
    return got.reshape(T, H, W, 3)


def yuv420_floor(want):
    """The error 4:2:0 alone makes: the expected (T, H, W, 3) frames through
    yuv420p and back by the ffmpeg binary, no codec. Sharp colour edges
    (the square) lose half their chroma resolution, so on small frames this
    is a few levels, whatever the codec does."""
    T, H, W, _ = want.shape
    raw = ["-f", "rawvideo", "-s", f"{W}x{H}"]
    yuv = subprocess.run(["ffmpeg", "-v", "error", *raw, "-pix_fmt", "rgb24", "-i", "-",
                          "-pix_fmt", "yuv420p", "-f", "rawvideo", "-"], input=want.tobytes(),
                         check=True, capture_output=True).stdout
    back = subprocess.run(["ffmpeg", "-v", "error", *raw, "-pix_fmt", "yuv420p", "-i", "-",
                           "-pix_fmt", "rgb24", "-f", "rawvideo", "-"], input=yuv,
                          check=True, capture_output=True).stdout
    back = np.frombuffer(back, np.uint8).reshape(want.shape)
    return float(np.abs(back.astype(np.int32) - want.astype(np.int32)).mean())


def video(path, inp, fps, codec, tol):
    v = read_input(inp)
    _, T, H, W = v.shape
    name = os.path.basename(path)
    s = ffprobe(path, "stream=codec_name,width,height,r_frame_rate,pix_fmt,nb_read_frames",
                ["-count_frames"])["streams"][0]
    check(s["codec_name"] == codec, f"{name}: codec {s['codec_name']}, expected {codec}")
    check((s["width"], s["height"]) == (W, H), f"{name}: {s['width']}x{s['height']}, expected {W}x{H}")
    check(s["pix_fmt"] == "yuv420p", f"{name}: pix_fmt {s['pix_fmt']}")
    num, den = (int(x) for x in s["r_frame_rate"].split("/"))
    check(num * 1000 == round(fps * 1000) * den, f"{name}: r_frame_rate {s['r_frame_rate']}, expected {fps}")
    check(int(s["nb_read_frames"]) == T, f"{name}: {s['nb_read_frames']} frames, expected {T}")
    fr = ffprobe(path, "frame=best_effort_timestamp_time")["frames"]
    times = [float(f["best_effort_timestamp_time"]) for f in fr]
    err = max((abs(t - i / fps) for i, t in enumerate(times)), default=1e9)
    # Matroska and WebM keep milliseconds: a time is off by at most 0.5 ms.
    check(len(times) == T and err <= 0.0006, f"{name}: frame times i/{fps} within {err:.2g} s")
    got = decode_rgb(path, T, H, W)
    check(got is not None, f"{name}: decodes to {T} frames of {W}x{H} rgb24")
    if got is None:
        return
    want8 = expected_levels(v)
    want = want8.astype(np.int32)
    bound = yuv420_floor(want8) + tol
    mae = np.abs(got.astype(np.int32) - want).mean()
    check(mae <= bound, f"{name}: mean absolute error {mae:.3f} levels <= {bound:.3f}")
    # The bound must be able to fail: the frames one step out of order.
    shifted = np.abs(got[1:].astype(np.int32) - want[:-1]).mean()
    check(shifted > bound + 2, f"{name}: frames shifted by one differ by {shifted:.3f} levels > {bound + 2:.3f}")


def png_read(path):
    """8-bit RGB non-interlaced PNG -> (H, W, 3) uint8, from the PNG spec."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG signature")
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        crc = int.from_bytes(data[pos + 8 + n:pos + 12 + n], "big")
        if zlib.crc32(kind + body) != crc:
            raise ValueError(f"bad CRC in chunk {kind}")
        if kind == b"IHDR":
            hdr = body
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        pos += 12 + n
    W, H = int.from_bytes(hdr[0:4], "big"), int.from_bytes(hdr[4:8], "big")
    if hdr[8:13] != bytes([8, 2, 0, 0, 0]):
        raise ValueError(f"not 8-bit RGB non-interlaced: {list(hdr[8:13])}")
    raw, bpp, stride = zlib.decompress(idat), 3, 3 * W
    out = np.zeros((H, stride), np.int32)
    prev = np.zeros(stride, np.int32)
    for y in range(H):
        f = raw[y * (stride + 1)]
        line = np.frombuffer(raw, np.uint8, stride, y * (stride + 1) + 1).astype(np.int32)
        cur = np.zeros(stride, np.int32)
        for i in range(stride):
            a = cur[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 0:
                p = 0
            elif f == 1:
                p = a
            elif f == 2:
                p = b
            elif f == 3:
                p = (a + b) // 2
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                p = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            else:
                raise ValueError(f"row {y}: filter {f}")
            cur[i] = (line[i] + p) & 255
        out[y], prev = cur, cur
    return out.reshape(H, W, 3).astype(np.uint8)


def png(d, inp):
    want = expected_levels(read_input(inp))
    T = want.shape[0]
    names = sorted(os.listdir(d))
    check(names == [f"frame_{t:05d}.png" for t in range(T)], f"{d}: {len(names)} files frame_00000.png ...")
    for t in range(T):
        try:
            got = png_read(os.path.join(d, f"frame_{t:05d}.png"))
        except (OSError, ValueError) as e:
            check(False, f"frame {t}: {e}")
            continue
        check(got.shape == want[t].shape and np.array_equal(got, want[t]),
              f"{d}: frame {t} equals the expected levels exactly")


def h5(path, inp, fps):
    v = read_input(inp)
    with h5py.File(path, "r") as f:
        d = f["video"]
        check(d.dtype == np.float32 and d.shape == v.shape, f"{path}: video {d.dtype} {d.shape}")
        check(np.array_equal(d[()], np.clip(v, -1, 1)), f"{path}: video equals clamp(input) exactly")
        check(float(f.attrs.get("fps", np.nan)) == fps, f"{path}: fps attribute {fps}")
        check(int(f.attrs.get("frames", -1)) == v.shape[1], f"{path}: frames attribute {v.shape[1]}")


def main(a):
    if a[0] == "gen":
        gen(a[1], int(a[2]), int(a[3]), int(a[4]), int(a[5]))
        return 0
    if a[0] == "video":
        video(a[1], a[2], float(a[3]), a[4], float(a[5]))
    elif a[0] == "png":
        png(a[1], a[2])
    elif a[0] == "h5":
        h5(a[1], a[2], float(a[3]))
    else:
        print(f"unknown command {a[0]}")
        return 2
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
