"""Independent references of the image preparation of Wan 2.2's
image-to-video pipelines (I2V.md "Preparing the image").

Written from the published pipelines and the library code they call, not
from any C code:

- I2V-A14B (Wan-Video/Wan2.2 wan/image2video.py, WanI2V.generate): the
  latent grid from max_area and the aspect ratio, then
  torch.nn.functional.interpolate(mode='bicubic') of the [-1, 1] image
  (PyTorch's upsample_bicubic2d: align_corners False, no antialiasing,
  Keys' cubic with A = -0.75, border indices clamped);
- TI2V-5B (wan/textimage2video.py, WanTI2V.i2v, and wan/utils/utils.py
  best_output_size): the output size, PIL's Image.resize with LANCZOS on the
  8-bit image (Pillow src/libImaging/Resample.c: coefficients in double,
  fixed point with 22 fraction bits, horizontal pass then vertical, each
  rounded and clipped to 8 bits), a centre crop;
- both: torchvision's to_tensor (level / 255 in float32) then
  .sub_(0.5).div_(0.5), in float32.

Images are uint8 arrays (H, W, 3), as PIL's convert("RGB") holds them.
i2v_published_parity.py compares each function with the library itself.

Public entry points:
    to_unit(u8, dtype)                    (3, H, W) float in [-1, 1]
    i2v_grid(h, w, max_area)              (lat_h, lat_w): the published rounding
    bicubic_resize(img, oh, ow)           torch's bicubic, float64
    best_output_size(w, h, dw, dh, area)  (ow, oh)
    pil_resize_lanczos(u8, ow, oh)        uint8 (oh, ow, 3), bit-exact
    ti2v_image(u8, max_area)              resized and centre-cropped uint8
"""

import math

import numpy as np


class RefError(Exception):
    """An image or size the pipeline cannot take."""


# ---------------------------------------------------------------- pixels

def to_unit(u8, dtype=np.float32):
    """TF.to_tensor(img).sub_(0.5).div_(0.5): (H, W, 3) uint8 -> (3, H, W)
    in [-1, 1], each operation rounded in dtype (float32 as published:
    level / 255, minus 0.5, divided by 0.5). Returned as float64."""
    u8 = np.asarray(u8)
    if u8.dtype != np.uint8 or u8.ndim != 3 or u8.shape[2] != 3:
        raise RefError("image must be uint8 (H, W, 3), got %s %s" % (u8.dtype, u8.shape))
    x = u8.transpose(2, 0, 1).astype(dtype)
    x = x / dtype(255)
    x = x - dtype(0.5)
    x = x / dtype(0.5)
    return x.astype(np.float64)


# ---------------------------------------------------------------- I2V-A14B

def i2v_grid(h, w, max_area, vae_stride=8, patch=2):
    """The latent grid of WanI2V.generate for an h x w image:

        lat_h = round(sqrt(max_area * (h / w)) // 8 // 2 * 2)
        lat_w = round(sqrt(max_area / (h / w)) // 8 // 2 * 2)

    in float64 (the ratio h / w, the product or quotient and the square
    root each rounded once). Floor division by powers of two is exact, so
    this is 2 floor(s / 16) with s the rounded square root."""
    if h < 1 or w < 1 or max_area < 1:
        raise RefError("image %dx%d, max_area %d" % (h, w, max_area))
    ar = h / w
    sh = math.sqrt(max_area * ar)
    sw = math.sqrt(max_area / ar)
    lat_h = math.floor(sh / (vae_stride * patch)) * patch
    lat_w = math.floor(sw / (vae_stride * patch)) * patch
    if lat_h < patch or lat_w < patch:
        raise RefError("max_area %d leaves no latent row or column for a %dx%d image"
                       % (max_area, h, w))
    return lat_h, lat_w


CUBIC_A = -0.75


def _cubic_matrix(n_in, n_out):
    """(n_out, n_in) weights of upsample_bicubic2d along one axis: source
    position s = (n_in / n_out) (o + 0.5) - 0.5, i = floor(s), t = s - i;
    taps i - 1 .. i + 2 (clamped to the image) with weights
    k(t + 1), k(t), k(1 - t), k(2 - t) of Keys' kernel, A = -0.75."""
    a = CUBIC_A

    def near(x):    # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):     # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    m = np.zeros((n_out, n_in))
    scale = n_in / n_out
    for o in range(n_out):
        s = scale * (o + 0.5) - 0.5
        i = math.floor(s)
        t = s - i
        for j, wgt in enumerate((far(t + 1), near(t), near(1 - t), far(2 - t))):
            m[o, min(max(i - 1 + j, 0), n_in - 1)] += wgt
    return m


def bicubic_resize(img, oh, ow):
    """F.interpolate(img[None], size=(oh, ow), mode='bicubic') of a
    (C, H, W) float image: separable, no clamping of the result."""
    img = np.asarray(img, dtype=np.float64)
    my = _cubic_matrix(img.shape[1], oh)
    mx = _cubic_matrix(img.shape[2], ow)
    return np.matmul(np.matmul(my, img), mx.T)     # rows, then columns


# ---------------------------------------------------------------- TI2V-5B

def best_output_size(w, h, dw, dh, expected_area):
    """wan/utils/utils.py best_output_size: two candidates, width first
    (ow1 = floor(sqrt(A w / h) / dw) dw, oh1 = floor(A / ow1 / dh) dh) and
    height first (oh2 = floor((A / sqrt(A w / h)) / dh) dh, ow2 =
    floor(A / oh2 / dw) dw), all in float64; the one whose aspect ratio is
    closer to w / h (by max(r / r', r' / r)) wins, height first on a tie."""
    ratio = w / h
    ow = math.sqrt(expected_area * ratio)
    oh = expected_area / ow
    ow1 = int(math.floor(ow / dw) * dw)
    if ow1 < dw:
        raise RefError("expected_area %d too small for a %dx%d image" % (expected_area, w, h))
    oh1 = int(math.floor(expected_area / ow1 / dh) * dh)
    oh2 = int(math.floor(oh / dh) * dh)
    if oh1 < dh or oh2 < dh:
        raise RefError("expected_area %d too small for a %dx%d image" % (expected_area, w, h))
    ow2 = int(math.floor(expected_area / oh2 / dw) * dw)
    if ow2 < dw:
        raise RefError("expected_area %d too small for a %dx%d image" % (expected_area, w, h))
    r1, r2 = ow1 / oh1, ow2 / oh2
    if max(ratio / r1, r1 / ratio) < max(ratio / r2, r2 / ratio):
        return ow1, oh1
    return ow2, oh2


PIL_PRECISION_BITS = 32 - 8 - 2
LANCZOS_SUPPORT = 3.0


def _sinc(x):
    if x == 0.0:
        return 1.0
    x = x * math.pi
    return math.sin(x) / x


def _lanczos(x):
    if -3.0 <= x < 3.0:
        return _sinc(x) * _sinc(x / 3)
    return 0.0


def _pil_coeffs(n_in, n_out):
    """precompute_coeffs + normalize_coeffs_8bpc for LANCZOS: per output
    index, the first input index and the integer weights (sum ~ 2^22)."""
    scale = filterscale = float(n_in) / n_out
    if filterscale < 1.0:
        filterscale = 1.0
    support = LANCZOS_SUPPORT * filterscale
    out = []
    for xx in range(n_out):
        center = (xx + 0.5) * scale
        ss = 1.0 / filterscale
        xmin = max(int(center - support + 0.5), 0)          # C casts truncate
        xmax = min(int(center + support + 0.5), n_in) - xmin
        ws = [_lanczos((x + xmin - center + 0.5) * ss) for x in range(xmax)]
        tot = 0.0
        for wgt in ws:      # summed in order, as the C loop does
            tot += wgt
        ws = [wgt / tot if tot != 0.0 else wgt for wgt in ws]
        ks = [int(-0.5 + wgt * (1 << PIL_PRECISION_BITS)) if wgt < 0
              else int(0.5 + wgt * (1 << PIL_PRECISION_BITS)) for wgt in ws]
        out.append((xmin, np.asarray(ks, dtype=np.int64)))
    return out


def _pil_pass(u8, n_out, axis):
    """One 8-bit pass along axis (0 rows, 1 columns) of (H, W, C) uint8:
    sum of level x weight plus 2^21, shifted right by 22, clipped to 0..255."""
    x = np.moveaxis(np.asarray(u8, dtype=np.int64), axis, 0)
    out = np.empty((n_out,) + x.shape[1:], dtype=np.int64)
    for o, (xmin, ks) in enumerate(_pil_coeffs(x.shape[0], n_out)):
        acc = np.full(x.shape[1:], 1 << (PIL_PRECISION_BITS - 1), dtype=np.int64)
        for j, k in enumerate(ks):
            acc += x[xmin + j] * k
        out[o] = np.clip(acc >> PIL_PRECISION_BITS, 0, 255)
    return np.moveaxis(out, 0, axis).astype(np.uint8)


def pil_resize_lanczos(u8, ow, oh):
    """Image.resize((ow, oh), Image.LANCZOS) of an RGB image: the
    horizontal pass (when the width changes) on every row, then the
    vertical pass (when the height changes); each pass rounds and clips to
    8 bits. The same size returns a copy."""
    u8 = np.asarray(u8, dtype=np.uint8)
    h, w = u8.shape[:2]
    x = u8
    if ow != w:
        x = _pil_pass(x, ow, 1)
    if oh != h:
        x = _pil_pass(x, oh, 0)
    return x.copy()


def ti2v_image(u8, max_area, dw=32, dh=32):
    """WanTI2V.i2v's image: (ow, oh) = best_output_size; scale =
    max(ow / w, oh / h); LANCZOS resize to (round(w scale), round(h scale))
    (Python's round: halves to even); crop the centre ow x oh from
    ((W' - ow) // 2, (H' - oh) // 2). Returns uint8 (oh, ow, 3)."""
    h, w = u8.shape[:2]
    ow, oh = best_output_size(w, h, dw, dh, max_area)
    scale = max(ow / w, oh / h)
    rw, rh = round(w * scale), round(h * scale)
    r = pil_resize_lanczos(u8, rw, rh)
    x1, y1 = (rw - ow) // 2, (rh - oh) // 2
    out = r[y1:y1 + oh, x1:x1 + ow]
    if out.shape[:2] != (oh, ow):
        raise RefError("crop of %dx%d to %dx%d" % (rw, rh, ow, oh))
    return out
