"""`staticpipe encode --vae`: images and videos to latents through the Wan 2.1
VAE encoder, checked against independent references.

- The whole path: a VAE file with the encoder (init --encoder), a random
  video as .h5 and an image as PNG; the latents against the float64 numpy
  reference (tests/ref/wan_vae_enc_ref.py) of the file's own weights
  (read back with h5py) and of the input taken to [-1, 1] as published
  (tests/ref/image_ref.py to_unit): relative L2 <= 1e-5; the output's
  shape, dataset and attributes; reruns bit-identical; the latents decode
  to the input's size.
- Images: PNGs of every colour type and depth staticpipe takes (RGB, RGBA,
  grey 1/2/4/8-bit, grey + alpha, palette with transparency, interlaced;
  the plain 8-bit ones written by sptest.png_encode, the others here with
  zlib), each encoded bit-identically to the .h5 of the 8-bit RGB PIL's
  convert("RGB") gives (written out here from PIL's documented rules);
  JPEGs (colour and greyscale, made by cjpeg) bit-identically to the .h5
  of djpeg's RGB (the same library decodes both).
- Videos: an .mp4 (H.264, yuv420p, made by the ffmpeg CLI) bit-identically
  to the .h5 of the RGB the ffmpeg CLI decodes (the same libraries convert
  both); an .mkv of lossless RGB (FFV1) to the frames it was made from;
  --frames N takes the first N frames.
- Refusals, each exit 2 with one line naming the file and the check, and
  no output: a VAE without the encoder, sizes not multiples of 8, frame
  counts other than 1 + 4k (the message names --frames), values outside
  [-1, 1], 4 channels, 16-bit PNG, a file that is neither PNG nor JPEG,
  --image with --video, --frames with --image, --t5 with --vae.

usage: vae_encode.py STATICPIPE WORKDIR   (SP_SEED replays a run)
"""
import os
import shutil
import struct
import subprocess
import sys
import zlib

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import check, finish, png_encode, png_write, rel_l2, seed  # noqa: E402
import image_ref as I  # noqa: E402
import wan_vae_enc_ref as E  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
SEED = seed("vae_encode")
rng = np.random.default_rng(SEED)
TOL = 1e-5


def p(name):
    return os.path.join(WORK, name)


def run(args):
    r = subprocess.run([BIN] + args, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def encode(vae, flag, src, out, extra=()):
    rc, _, err = run(["encode", "--vae", vae, flag, src, "-o", out, "-q", *extra])
    return rc, err


def latents(path):
    with h5py.File(path, "r") as f:
        return f["latents"][()]


def write_video_h5(path, v):
    with h5py.File(path, "w") as f:
        f["video"] = np.asarray(v, np.float32)


def unit_video(frames_u8):
    """(T, H, W, 3) uint8 -> (3, T, H, W) float32 in [-1, 1] as published."""
    return np.stack([I.to_unit(f) for f in frames_u8], axis=1).astype(np.float32)


# ---------------------------------------------------------------- PNG writer

def png_bytes(rows, w, h, depth, ctype, plte=None, trns=None, interlace=0):
    """A PNG of already-packed scanlines (filter 0 each), for what
    sptest.png_encode does not write: depths other than 8, palettes,
    interlacing. For interlace 1, rows is the list of the 7 Adam7 passes'
    packed scanlines."""
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    raw = b"".join(b"\x00" + r for r in rows)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0,
                                                              interlace))
    if plte is not None:
        out += chunk(b"PLTE", plte.astype(np.uint8).tobytes())
    if trns is not None:
        out += chunk(b"tRNS", trns)
    return out + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def pack_bits(vals, depth):
    """One scanline of depth-bit samples, most significant first."""
    per = 8 // depth
    out = bytearray()
    for i in range(0, len(vals), per):
        b = 0
        for k in range(per):
            v = int(vals[i + k]) if i + k < len(vals) else 0
            b |= v << (8 - depth * (k + 1))
        out.append(b)
    return bytes(out)


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2)]  # (x0, y0, dx, dy)


def png_cases(h, w):
    """(name, file bytes, the 8-bit RGB PIL's convert('RGB') gives)."""
    cases = []
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    cases.append(("rgb", png_encode(rgb), rgb))
    alpha = rng.integers(0, 256, (h, w, 1), dtype=np.uint8)
    rgba = np.concatenate([rgb, alpha], axis=2)
    cases.append(("rgba", png_encode(rgba), rgb))
    grey = rng.integers(0, 256, (h, w), dtype=np.uint8)
    g3 = np.repeat(grey[:, :, None], 3, axis=2)
    cases.append(("grey8", png_encode(grey), g3))
    ga = np.stack([grey, alpha[:, :, 0]], axis=2)
    cases.append(("grey_alpha", png_encode(ga), g3))
    for depth in (1, 2, 4):
        g = rng.integers(0, 1 << depth, (h, w))
        scaled = (g * (255 // ((1 << depth) - 1))).astype(np.uint8)  # PIL's L from 1/2/4 bits
        cases.append(("grey%d" % depth, png_bytes([pack_bits(r, depth) for r in g], w, h, depth, 0),
                      np.repeat(scaled[:, :, None], 3, axis=2)))
    plte = rng.integers(0, 256, (16, 3))
    idx = rng.integers(0, 16, (h, w))
    cases.append(("palette_trns", png_bytes([pack_bits(r, 4) for r in idx], w, h, 4, 3, plte=plte,
                                            trns=bytes(range(0, 160, 10))),
                  plte[idx].astype(np.uint8)))
    passes = []
    for x0, y0, dx, dy in ADAM7:
        sub = rgb[y0::dy, x0::dx]
        if sub.shape[0] and sub.shape[1]:
            passes += [r.tobytes() for r in sub]
    cases.append(("interlaced", png_bytes(passes, w, h, 8, 2, interlace=1), rgb))
    return cases


# ---------------------------------------------------------------- the whole path

def whole_path(vae, sd, cfg):
    H, W, T = 24, 40, 9
    v = rng.uniform(-1, 1, (3, T, H, W)).astype(np.float32)
    write_video_h5(p("v.h5"), v)
    rc, err = encode(vae, "--video", p("v.h5"), p("lv.h5"))
    check(rc == 0, "encode --video v.h5 exits 0" + ("" if rc == 0 else ": " + err))
    if rc != 0:
        return
    got = latents(p("lv.h5"))
    ref = E.encode(cfg, sd, v.astype(np.float64))
    check(got.shape == ref.shape == (16, 3, H // 8, W // 8) and got.dtype == np.float32,
          "video latents [16, 3, %d, %d] float32 (got %s)" % (H // 8, W // 8, got.shape))
    e = rel_l2(got.astype(np.float64), ref)
    check(e <= TOL, "video (T=9, %dx%d) against the float64 reference: rel L2 %.2e" % (H, W, e))
    with h5py.File(p("lv.h5"), "r") as f:
        a = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
    check(a.get("source_frames") == T and a.get("height") == H and a.get("width") == W and
          a.get("vae") == vae and str(a.get("vae_checksum", "")).startswith("crc32c:") and
          a.get("vae_precision") == "fp32 (cpu)",
          "attributes: source, frames, size, the VAE and its checksum, precision (%s)" % a)
    rc, _ = encode(vae, "--video", p("v.h5"), p("lv2.h5"))
    check(rc == 0 and np.array_equal(latents(p("lv2.h5")), got), "a rerun gives the same bits")
    rc, _, err = run(["decode", "--vae", vae, "--latents", p("lv.h5"), "-o", p("rec.h5"), "-q"])
    with h5py.File(p("rec.h5"), "r") if rc == 0 else open(os.devnull) as f:
        shape = f["video"].shape if rc == 0 else None
    check(shape == (3, T, H, W), "the latents decode to the input's shape %s" % (shape,))
    # an image, through the PNG reader
    u8 = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    png_write(p("img.png"), u8)
    rc, err = encode(vae, "--image", p("img.png"), p("li.h5"))
    ok = rc == 0
    if ok:
        ref = E.encode(cfg, sd, I.to_unit(u8)[:, None])
        e = rel_l2(latents(p("li.h5")).astype(np.float64), ref)
        ok = e <= TOL
    check(ok, "image %dx%d against the float64 reference of to_unit: %s"
          % (H, W, ("rel L2 %.2e" % e) if rc == 0 else err))


# ---------------------------------------------------------------- readers

def same_as_h5(vae, flag, src, frames_u8, what, extra=()):
    """src encodes to the bits of the .h5 of frames_u8 ((T, H, W, 3) uint8)."""
    write_video_h5(p("want.h5"), unit_video(frames_u8))
    rc1, err1 = encode(vae, flag, src, p("got.h5"), extra)
    rc2, err2 = encode(vae, "--video", p("want.h5"), p("want_l.h5"))
    ok = rc1 == 0 and rc2 == 0 and np.array_equal(latents(p("got.h5")), latents(p("want_l.h5")))
    check(ok, "%s: latents bit-identical to the .h5 of the expected RGB%s"
          % (what, "" if rc1 == 0 else ": " + err1.strip().splitlines()[-1]))


def images(vae):
    for name, data, rgb in png_cases(16, 24):
        with open(p(name + ".png"), "wb") as f:
            f.write(data)
        same_as_h5(vae, "--image", p(name + ".png"), rgb[None], "PNG " + name)
    if not shutil.which("cjpeg") or not shutil.which("djpeg"):
        check(False, "cjpeg and djpeg (libjpeg-turbo-progs) are needed for the JPEG checks")
        return
    for name, mode in (("colour", "P6"), ("grey", "P5")):
        c = 3 if mode == "P6" else 1
        img = rng.integers(0, 256, (16, 24, c), dtype=np.uint8)
        img[:, :12] = 128  # a flat part too
        with open(p(name + ".pnm"), "wb") as f:
            f.write(b"%s\n24 16\n255\n" % mode.encode() + img.tobytes())
        subprocess.run(["cjpeg", "-quality", "85", "-outfile", p(name + ".jpg"), p(name + ".pnm")],
                       check=True)
        subprocess.run(["djpeg", "-ppm", "-outfile", p(name + ".ppm"), p(name + ".jpg")],
                       check=True)
        with open(p(name + ".ppm"), "rb") as f:  # P6 (colour) or P5 (grey): 24 16 255
            ref = np.frombuffer(f.read()[-16 * 24 * c:], np.uint8).reshape(16, 24, c)
        ref = np.repeat(ref, 3 // c, axis=2)  # grey replicated, as convert("RGB") does
        same_as_h5(vae, "--image", p(name + ".jpg"), ref[None], "JPEG " + name + " (djpeg's RGB)")


def videos(vae):
    if not shutil.which("ffmpeg"):
        check(False, "the ffmpeg CLI is needed for the video checks")
        return
    T, H, W = 11, 16, 24
    x = np.linspace(0, 255, W)[None, None, :, None]
    frames = (x * np.ones((T, H, W, 3)) ).astype(np.uint8) ^ rng.integers(0, 48, (T, H, W, 3),
                                                                        dtype=np.uint8)
    frames.tofile(p("frames.rgb"))
    ff = ["ffmpeg", "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s",
          "%dx%d" % (W, H), "-r", "16", "-i", p("frames.rgb")]
    subprocess.run(ff + ["-c:v", "libx264", "-pix_fmt", "yuv420p", p("clip.mp4")], check=True)
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-i", p("clip.mp4"), "-f", "rawvideo",
                    "-pix_fmt", "rgb24", "-sws_flags", "bicubic+accurate_rnd+full_chroma_int",
                    p("dec.rgb")], check=True)
    dec = np.fromfile(p("dec.rgb"), np.uint8).reshape(T, H, W, 3)
    same_as_h5(vae, "--video", p("clip.mp4"), dec[:9], "mp4 (H.264 yuv420p), --frames 9",
               ["--frames", "9"])
    subprocess.run(ff + ["-c:v", "ffv1", "-pix_fmt", "bgr0", p("clip.mkv")], check=True)
    same_as_h5(vae, "--video", p("clip.mkv"), frames[:5], "mkv (lossless RGB), --frames 5",
               ["--frames", "5"])
    write_video_h5(p("v11.h5"), unit_video(frames))
    same_as_h5(vae, "--video", p("v11.h5"), frames[:9], ".h5 of 11 frames, --frames 9",
               ["--frames", "9"])
    refused(vae, "mp4 of 11 frames", ["--video", p("clip.mp4")], "pass --frames 9")


# ---------------------------------------------------------------- refusals

def refused(vae, name, args, needle):
    out = p("refused.h5")
    rc, _, err = run(["encode", "--vae", vae, *args, "-o", out, "-q"])
    lines = [l for l in err.splitlines() if "error:" in l]
    check(rc == 2 and lines and needle in lines[0] and not os.path.exists(out),
          "refused (%s): exit %d, %s" % (name, rc, " | ".join(lines) or "no error line"))


def refusals(vae):
    rc, _, _ = run(["init", "--arch", "wan2.1-vae-tiny", "--seed", "3", "-q", "-o", p("dec.h5")])
    check(rc == 0, "init a decoder-only VAE")
    write_video_h5(p("ok.h5"), rng.uniform(-1, 1, (3, 1, 16, 16)))
    refused(p("dec.h5"), "a VAE without the encoder", ["--video", p("ok.h5")],
            "holds only the decoder")
    write_video_h5(p("odd.h5"), rng.uniform(-1, 1, (3, 1, 20, 16)))
    refused(vae, "20 rows", ["--video", p("odd.h5")], "multiples of 8")
    refused("synth:wan2.2-vae-tiny", "a Wan 2.2 VAE", ["--video", p("ok.h5")],
            "a Wan 2.2 VAE; encode --vae runs the Wan 2.1 VAE's encoder")
    write_video_h5(p("t6.h5"), rng.uniform(-1, 1, (3, 6, 16, 16)))
    refused(vae, "6 frames", ["--video", p("t6.h5")], "pass --frames 5")
    refused(vae, "--frames 9 of 6", ["--video", p("t6.h5"), "--frames", "9"],
            "--frames asks for 9")
    refused(vae, "--frames 6", ["--video", p("t6.h5"), "--frames", "6"], "1 + 4k")
    big = rng.uniform(-1, 1, (3, 1, 16, 16)).astype(np.float32)
    big[1, 0, 3, 4] = 1.5
    write_video_h5(p("big.h5"), big)
    refused(vae, "a value of 1.5", ["--video", p("big.h5")], "values in [-1, 1]")
    write_video_h5(p("c4.h5"), rng.uniform(-1, 1, (4, 1, 16, 16)))
    refused(vae, "4 channels", ["--video", p("c4.h5")], "[3, T, H, W]")
    with open(p("deep.png"), "wb") as f:
        rows = [rng.integers(0, 1 << 16, 16 * 3).astype(">u2").tobytes() for _ in range(16)]
        f.write(png_bytes(rows, 16, 16, 16, 2))
    refused(vae, "16-bit PNG", ["--image", p("deep.png")], "8-bit images only")
    with open(p("text.png"), "w") as f:
        f.write("not an image\n")
    refused(vae, "a text file", ["--image", p("text.png")], "neither a PNG nor a JPEG")
    with open(p("trunc.png"), "wb") as f:
        f.write(png_cases(16, 16)[0][1][:60])
    refused(vae, "a truncated PNG", ["--image", p("trunc.png")], "not a readable PNG")
    refused(vae, "--image and --video", ["--image", p("rgb.png"), "--video", p("ok.h5")],
            "exactly one of --image and --video")
    refused(vae, "--frames with --image", ["--image", p("rgb.png"), "--frames", "5"],
            "--frames takes frames of a --video")
    # the command line's rules, as every command keeps them (launch/cli.c)
    refused(vae, "--image twice", ["--image", p("rgb.png"), "--image", p("rgb.png")],
            "--image is given twice")
    refused(vae, "a misspelt option", ["--imgae", p("rgb.png")], "did you mean --image?")
    for bad in ("0x5", "+5", " 5", "5.0"):
        refused(vae, "--frames '%s'" % bad, ["--video", p("ok.h5"), "--frames", bad],
                "is not an integer")
    # a FIFO is refused, never read (it would block): by the path check
    # and by the readers themselves (io/file_read.h)
    os.mkfifo(p("fifo.png"))
    os.mkfifo(p("fifo.mp4"))
    for flag, f in (("--image", "fifo.png"), ("--video", "fifo.mp4")):
        out = p("refused.h5")
        try:
            r = subprocess.run([BIN, "encode", "--vae", vae, flag, p(f), "-o", out, "-q"],
                               capture_output=True, text=True, timeout=60)
            ok = r.returncode == 2 and "is a FIFO" in r.stderr and not os.path.exists(out)
            what = "exit %d, %s" % (r.returncode, r.stderr.strip())
        except subprocess.TimeoutExpired:
            ok, what = False, "blocked for 60 s"
        check(ok, "%s a FIFO: refused (%s)" % (flag, what))
    rc, _, err = run(["encode", "--vae", vae, "--t5", "x.h5", "--image", p("rgb.png"), "-o",
                      p("x.h5")])
    check(rc == 2 and "one encoder per call" in err, "--t5 with --vae refused: %d" % rc)
    rc, out, _ = run(["encode", "--help"])
    check(rc == 0 and "--t5" in out and "--vae" in out, "encode --help names both encoders")
    rc, out, _ = run(["encode", "--vae", vae, "--help"])
    check(rc == 0 and "--image" in out and "--frames" in out, "encode --vae --help: its options")


def main():
    os.makedirs(WORK, exist_ok=True)
    vae = p("vae.h5")
    rc, _, err = run(["init", "--arch", "wan2.1-vae-tiny", "--encoder", "--seed",
                      str(int(rng.integers(0, 1 << 30))), "-q", "-o", vae])
    check(rc == 0, "init --encoder" + ("" if rc == 0 else ": " + err))
    if rc != 0:
        return 1
    cfg = E.Config(8, 16, (1, 2, 4, 4), 2, (False, True, True))
    with h5py.File(vae, "r") as f:
        sd = {k: f["encoder"][k][()].astype(np.float64) for k in f["encoder"]}
        check(int(f.attrs["encoder"]) == 1 and set(sd) == set(E.tensor_shapes(cfg)),
              "init --encoder: attribute encoder 1, /encoder holds the reference's table")
    whole_path(vae, sd, cfg)
    images(vae)
    videos(vae)
    refusals(vae)
    return finish("vae_encode")


if __name__ == "__main__":
    sys.exit(main())
