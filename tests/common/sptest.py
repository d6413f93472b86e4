"""The Python test helpers' shared module: every tests/*/*.py that checks
something imports it (`sys.path` gets tests/common first; the script tests'
preamble, tests/common/script.sh, also puts tests/common on PYTHONPATH, so
inline Python in a script test imports it as it is).

Importing it puts the test folders that hold shared libraries on sys.path:
tests/convert (stlib), tests/lora (loralib), tests/ref (the numpy
references), tests/text (spm_parity), tests/fp8 (fp8ref), tests/common
(h5crc) and launch/ (encode_prompt).

  seed(name, given=None)   the run's seed: `given` (a replay value passed on
                           the command line) when set, else SP_SEED, else a
                           fresh one; printed as "NAME: seed N (replay with
                           SP_SEED=N)". Returns the int.
  check(cond, what)        one check: prints "ok   WHAT" or "FAIL WHAT",
                           records a failure in FAILS; returns cond.
  fail(what)               check(False, what).
  require(cond, failure)   a check whose message says what went wrong:
                           prints "FAIL FAILURE" and records it only when
                           cond is false; returns cond.
  FAILS                    the failed checks' messages, in order.
  finish(name)             prints "NAME: all checks passed" or "NAME: N
                           check(s) failed"; returns the exit status (0/1).
  rel_l2(a, b)             ||a - b|| / ||b|| in float64: the relative L2
                           error of the tolerance table (STYLE.md 9).
  same(a, b)               two arrays with the same shape and the same bytes.
  read(path, name)         one dataset of an HDF5 file (default "latents").
  run(args, expect=0, ranks=1, env=None, fatal=True)
                           runs a command (under `mpirun -np RANKS` when
                           RANKS > 1; env: variables added to the
                           environment), output captured as text. An exit
                           status other than `expect` (None: any) prints the
                           command and its stderr's end, then ends the test
                           (fatal) or returns the result. Under the
                           sanitizers (ASAN_OPTIONS set), mpirun's ranks skip
                           the leak check: Open MPI's own allocations would
                           be reported at exit.
  png_encode(pixels)       the bytes of an 8-bit PNG of a uint8 array: (H, W)
                           grey, (H, W, 2) grey + alpha, (H, W, 3) RGB or
                           (H, W, 4) RGBA; not interlaced, filter 0 on every
                           row, one IDAT chunk. Tests of the PNG reader's
                           other depths, palettes and interlacing write
                           their own (tests/vae/vae_encode.py).
  png_write(path, pixels)  png_encode(pixels) written to path.
"""
import os
import struct
import subprocess
import sys
import time
import zlib

import numpy as np

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.dirname(_TESTS)
for _d in (os.path.join(SRC, "launch"),
           *(os.path.join(_TESTS, d) for d in ("fp8", "text", "ref", "lora", "convert", "common"))):
    if _d not in sys.path:
        sys.path.insert(0, _d)

FAILS = []


def seed(name, given=None):
    if given not in (None, ""):
        s = int(given)
    elif os.environ.get("SP_SEED"):
        s = int(os.environ["SP_SEED"])
    else:
        s = time.time_ns() % (1 << 31)
    print(f"{name}: seed {s} (replay with SP_SEED={s})", flush=True)
    return s


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + str(what), flush=True)
    if not cond:
        FAILS.append(what)
    return cond


def fail(what):
    check(False, what)


def require(cond, failure):
    if not cond:
        fail(failure)
    return cond


def finish(name):
    if FAILS:
        print(f"{name}: {len(FAILS)} check(s) failed")
        return 1
    print(f"{name}: all checks passed")
    return 0


def rel_l2(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def same(a, b):
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def read(path, name="latents"):
    import h5py
    with h5py.File(path, "r") as f:
        return f[name][...]


def run(args, expect=0, ranks=1, env=None, fatal=True):
    args = [str(a) for a in args]
    cmd = (["mpirun", "-np", str(ranks)] if ranks > 1 else []) + args
    env = {**os.environ, **(env or {})}
    if ranks > 1 and "ASAN_OPTIONS" in env:
        env["ASAN_OPTIONS"] += ":detect_leaks=0"
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if expect is not None and p.returncode != expect:
        print(f"command: {' '.join(cmd)}\nexit {p.returncode}, expected {expect}\n"
              f"{p.stdout[-1500:]}{p.stderr[-3000:]}", flush=True)
        if fatal:
            raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}, expected {expect}")
    return p


_PNG_COLOUR_TYPE = {1: 0, 2: 4, 3: 2, 4: 6}  # samples a pixel -> IHDR colour type


def _png_chunk(kind, data):
    return (struct.pack(">I", len(data)) + kind + data +
            struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def png_encode(pixels):
    a = np.asarray(pixels)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] not in _PNG_COLOUR_TYPE:
        raise ValueError(f"png_encode takes uint8 (H, W) or (H, W, 1-4), not {a.dtype} {a.shape}")
    h, w, c = a.shape
    raw = b"".join(b"\x00" + a[y].tobytes() for y in range(h))
    ihdr = struct.pack(">IIBBBBB", w, h, 8, _PNG_COLOUR_TYPE[c], 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr) +
            _png_chunk(b"IDAT", zlib.compress(raw)) + _png_chunk(b"IEND", b""))


def png_write(path, pixels):
    with open(path, "wb") as f:
        f.write(png_encode(pixels))
