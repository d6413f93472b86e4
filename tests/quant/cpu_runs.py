"""Runs of quantized model files on the CPU backend (MODEL.md "int8 weights",
"GGUF weights"), 2 UniPC steps with CFG on small DiTs:

  int8  1. init --dtype int8: every block linear weight's codes and scales
           equal the int8 rule computed here from its definition (scale
           amax / 127 and codes rint(x x 127 / amax) clamped to +-127, each
           product rounded to float32 once) of init's bf16 weights; the rest
           keeps its bf16 bits.
        2. The int8 file (precision int8: the linear layers' inputs quantised
           per token) and the bf16 file run with --precision int8 give
           bit-identical latents; both differ from the bf16 run.
        3. The int8 file with --precision bf16 (codes dequantised, inputs as
           they are) equals the run of an fp32 file of its dequantised
           weights (code x scale, numpy), bit for bit.
  GGUF  4. A GGUF of every block format (gguflib.py, gguf-py) converted with
           --dtype fp32 runs bit-identically to the fp32 file of gguf-py's
           dequantised weights; with the default (the rest bf16) it runs too.
  ranks 5. The int8 file, the GGUF-converted files: 2 and 3 pipeline ranks
           (mpirun) bit-identical to 1.
  Q8_0  6. init --dtype q8_0 and convert --dtype q8_0 (of a BF16 checkpoint):
           every block linear weight's bytes equal gguf-py's Q8_0
           quantisation of the bf16 weights (gguf.quants.quantize); the run
           of the init file bit-identical to the fp32 file of gguf-py's
           dequantisation of those bytes.

    cpu_runs.py STATICPIPE_BIN WORK_DIR"""
import os
import sys

import h5py
import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import check, finish, rel_l2, run, seed  # noqa: E402
import stlib  # noqa: E402
import gguflib  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quantref import int8_rows  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
SEED = seed("quantized CPU runs")
rng = np.random.default_rng(SEED)
TINY = dict(stlib.SMALL, layers=4, text_dim=4096)  # wan2.1-tiny's tables
LINEARS = set(stlib.LINEARS)  # the linear layers int8 and GGUF files store quantised


def bf16_values(ds):
    return (ds[...].astype(np.uint32) << 16).view(np.float32)


def latents(model, out, extra=(), ranks=1):
    cond = os.path.join(WORK, "cond.h5")
    if not os.path.exists(cond):
        with h5py.File(cond, "w") as f:
            f["context"] = rng.standard_normal((7, 4096)).astype(np.float32)
            f["context_null"] = rng.standard_normal((5, 4096)).astype(np.float32)
    run([BIN, "run", "--model", model, "--cond", cond, "--frames", "5", "--size", "32x48",
         "--steps", "2", "--seed", str(SEED), "--no-preview", "-q", *extra, "-o", out],
        ranks=ranks)
    with h5py.File(out, "r") as f:
        return f["latents"][...]


def check_int8():
    b16, i8 = os.path.join(WORK, "bf16.h5"), os.path.join(WORK, "int8.h5")
    for path, dt in ((b16, "bf16"), (i8, "int8")):
        run([BIN, "init", "--arch", "wan2.1-tiny", "--seed", str(SEED), "--dtype", dt, "-q",
             "-o", path])
    bad, deq = 0, []
    with h5py.File(b16, "r") as fb, h5py.File(i8, "r") as fq:
        for g, b, name, shape in stlib.table(TINY):
            p = stlib.h5_path(g, b, name)
            x = bf16_values(fb[p]).reshape(shape[0], -1)
            if g == "block" and name in LINEARS:
                q, s = int8_rows(x)
                ok = (fq[p].attrs["dtype"] in (b"int8", "int8")
                      and np.array_equal(fq[p][...].view(np.int8).reshape(q.shape), q)
                      and np.array_equal(fq[p + ".scale"][...].view(np.uint32), s.view(np.uint32)))
                vals = (q.astype(np.float32) * s[:, None]).astype(np.float32)
            else:
                ok = np.array_equal(fq[p][...], fb[p][...])
                vals = x
            bad += not ok
            deq.append((stlib.key("official", g, b, name), "F32", shape,
                        np.ascontiguousarray(vals, np.float32).tobytes()))
    check(bad == 0, "init --dtype int8: codes and scales of the int8 rule, the rest bf16 "
          f"({bad} tensors differ)")
    lat = {"int8": latents(i8, os.path.join(WORK, "r-int8.h5")),
           "bf16-int8": latents(b16, os.path.join(WORK, "r-b16i8.h5"), ["--precision", "int8"]),
           "bf16": latents(b16, os.path.join(WORK, "r-b16.h5"))}
    check(lat["int8"].tobytes() == lat["bf16-int8"].tobytes(),
          "the int8 file and the bf16 file with --precision int8: bit-identical latents")
    rel = rel_l2(lat["int8"], lat["bf16"])
    check(0 < rel < 0.1, f"int8 against bf16 (2 steps, random weights): relative L2 {rel:.3e}")
    st, twin = os.path.join(WORK, "deq.safetensors"), os.path.join(WORK, "deq-fp32.h5")
    stlib.write_st(st, deq)
    run([BIN, "convert", st, "-o", twin, "--dtype", "fp32", "-q"])
    a = latents(i8, os.path.join(WORK, "r-int8-bf16.h5"), ["--precision", "bf16"])
    t = latents(twin, os.path.join(WORK, "r-twin.h5"))
    check(a.tobytes() == t.tobytes(), "the int8 file with --precision bf16: bit-identical to the "
          "fp32 file of its dequantised weights")
    for n in (2, 3):
        r = latents(i8, os.path.join(WORK, f"r-int8-{n}.h5"), ranks=n)
        check(r.tobytes() == lat["int8"].tobytes(), f"int8 file, {n} ranks: bit-identical to 1")


def check_gguf():
    m = gguflib.Model(rng, gguflib.BLOCK_TYPES + [gguflib.T.F16], dict(gguflib.CFG, text_dim=4096, layers=4))
    g = os.path.join(WORK, "m.gguf")
    gguflib.write_gguf(g, m)
    q32, qb, twin = (os.path.join(WORK, n) for n in ("q32.h5", "qb16.h5", "gtwin.h5"))
    run([BIN, "convert", g, "-o", q32, "--dtype", "fp32", "-q"])
    run([BIN, "convert", g, "-o", qb, "-q"])
    gguflib.write_twin(BIN, m, twin)
    a = latents(q32, os.path.join(WORK, "r-q32.h5"))
    t = latents(twin, os.path.join(WORK, "r-gtwin.h5"))
    check(a.tobytes() == t.tobytes(), "GGUF converted (--dtype fp32): bit-identical to the fp32 "
          "file of gguf-py's dequantised weights")
    b = latents(qb, os.path.join(WORK, "r-qb.h5"))
    print(f"     GGUF converted with the rest bf16 against the fp32 one: relative L2 "
          f"{rel_l2(b, a):.3e}")
    for path, base, label in ((q32, a, "quant-fp32"), (qb, b, "quant")):
        for n in (2, 3):
            r = latents(path, os.path.join(WORK, f"r-{label}-{n}.h5"), ranks=n)
            check(r.tobytes() == base.tobytes(), f"GGUF-converted ({label}), {n} ranks: "
                  "bit-identical to 1")


def check_q8_0():
    from gguf import GGMLQuantizationType as T
    import gguf
    b16, q8 = os.path.join(WORK, "bf16.h5"), os.path.join(WORK, "q8.h5")
    run([BIN, "init", "--arch", "wan2.1-tiny", "--seed", str(SEED), "--dtype", "q8_0", "-q",
         "-o", q8])
    vals = {}
    with h5py.File(b16, "r") as fb:
        for g, b, name, shape in stlib.table(TINY):
            vals[(g, b, name)] = bf16_values(fb[stlib.h5_path(g, b, name)]).reshape(shape)
    st = os.path.join(WORK, "b16.safetensors")
    stlib.write_st(st, [(stlib.key("official", g, b, n), "BF16", v.shape,
                         stlib.bf16_rne(v.reshape(-1)).tobytes()) for (g, b, n), v in vals.items()])
    cq8 = os.path.join(WORK, "cq8.h5")
    run([BIN, "convert", st, "-o", cq8, "--dtype", "q8_0", "-q"])
    deq = []
    for path, label in ((q8, "init --dtype q8_0"), (cq8, "convert --dtype q8_0")):
        bad = 0
        with h5py.File(path, "r") as f:
            for (g, b, name), v in vals.items():
                ds = f[stlib.h5_path(g, b, name)]
                if g == "block" and name in LINEARS:
                    want = gguf.quants.quantize(v.reshape(v.shape[0], -1), T.Q8_0)
                    bad += not (ds.attrs["dtype"] in (b"q8_0", "q8_0")
                                and np.array_equal(ds[...], want))
                    x = gguf.quants.dequantize(want, T.Q8_0).reshape(v.shape)
                else:
                    x = v
                if path == q8:
                    deq.append((stlib.key("official", g, b, name), "F32", v.shape,
                                np.ascontiguousarray(x, np.float32).tobytes()))
        check(bad == 0, f"{label}: every linear weight gguf-py's Q8_0 of the bf16 weights "
              f"({bad} differ)")
    st2, twin = os.path.join(WORK, "q8deq.safetensors"), os.path.join(WORK, "q8twin.h5")
    stlib.write_st(st2, deq)
    run([BIN, "convert", st2, "-o", twin, "--dtype", "fp32", "-q"])
    a = latents(q8, os.path.join(WORK, "r-q8.h5"))
    t = latents(twin, os.path.join(WORK, "r-q8twin.h5"))
    check(a.tobytes() == t.tobytes(), "init --dtype q8_0: run bit-identical to the fp32 file of "
          "gguf-py's dequantised weights")


def main():
    os.makedirs(WORK, exist_ok=True)
    check_int8()
    check_gguf()
    check_q8_0()
    return finish("quantized CPU runs")


if __name__ == "__main__":
    sys.exit(main())
