"""`staticpipe convert`, `inspect` and `decode` of Wan 2.2 VAE checkpoints,
and the model file read back by the encoder's API.

Random float32 weights of a small config (tests/ref/wan_vae22_ref.py, both
parts) are written as safetensors in both layouts: the published
Wan2_2_VAE state dict (ComfyUI's wan2.2_vae.safetensors keeps its keys) and
diffusers' AutoencoderKLWan with is_residual, whose key mapping is written
out here from diffusers' module structure (independent of the C tables),
keys shuffled, F32 and BF16 inputs. Each is converted; the file's datasets
must hold exactly the weights; both layouts must give the same file
checksum; `decode` of the file must match the float64 reference decode and
the encoder's API (test_vae22_driver encode-file) the reference encode, to
relative L2 <= 1e-5. Then --dtype bf16, inspect and --verify, and malformed
checkpoints (exit 2, one line naming the tensor, no file).

usage: vae22_convert.py STATICPIPE DRIVER WORKDIR  (SP_SEED replays a run)
"""
import os
import re
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import FAILS, check, rel_l2, seed  # noqa: E402
import stlib  # noqa: E402
import wan_vae22_ref as R  # noqa: E402

BIN, DRIVER, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
SEED = seed("vae22_convert")
rng = np.random.default_rng(SEED)
TOL = 1e-5
CFG = R.Config(8, 8, 48, (1, 2, 4, 4), 2, (False, True, True))  # the wan2.2-vae-tiny preset


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def p(name):
    return os.path.join(WORK, name)


# ---------------------------------------------------------------- diffusers' keys

RES_LEAF = {"residual.0.": "norm1.", "residual.2.": "conv1.", "residual.3.": "norm2.",
            "residual.6.": "conv2.", "shortcut.": "conv_shortcut."}


def res_key(prefix, leaf):
    for a, b in RES_LEAF.items():
        if leaf.startswith(a):
            return prefix + b + leaf[len(a):]
    raise ValueError(leaf)


def diffusers_key(cfg, name):
    """AutoencoderKLWan(is_residual=True)'s key of an official key:
    quant_conv / post_quant_conv are conv1 / conv2; each part has conv_in,
    mid_block (resnets 0 and 1 around attentions 0), norm_out, conv_out;
    WanResidualDownBlock holds resnets (num_res_blocks) and a downsampler,
    WanResidualUpBlock resnets (num_res_blocks + 1) and an upsampler (its
    shortcuts have no weights)."""
    for a, b in (("conv1.", "quant_conv."), ("conv2.", "post_quant_conv.")):
        if name.startswith(a):
            return b + name[len(a):]
    part, rest = name.split(".", 1)
    for a, b in (("conv1.", "conv_in."), ("head.0.", "norm_out."), ("head.2.", "conv_out.")):
        if rest.startswith(a):
            return "%s.%s%s" % (part, b, rest[len(a):])
    m = re.match(r"middle\.(\d)\.(.*)$", rest)
    if m:
        i, leaf = int(m.group(1)), m.group(2)
        if i == 1:
            return "%s.mid_block.attentions.0.%s" % (part, leaf)
        return res_key("%s.mid_block.resnets.%d." % (part, i // 2), leaf)
    m = re.match(r"(down|up)samples\.(\d+)\.(down|up)samples\.(\d+)\.(.*)$", rest)
    kind, level, j, leaf = m.group(1), int(m.group(2)), int(m.group(4)), m.group(5)
    n_res = cfg.num_res_blocks + (1 if kind == "up" else 0)
    block = "%s.%s_blocks.%d." % (part, kind, level)
    if j == n_res:
        return block + ("downsampler." if kind == "down" else "upsampler.") + leaf
    return res_key(block + "resnets.%d." % j, leaf)


# ---------------------------------------------------------------- checkpoints

def weights():
    sd = {}
    for part in ("decoder", "encoder"):
        for k, v in R.random_weights(CFG, rng, part).items():
            sd[k] = v.astype(np.float32)
    sd["decoder.head.2.weight"] = sd["decoder.head.2.weight"] * np.float32(2)
    return sd


def write_ckpt(path, sd, layout, dtype="F32", drop=(), reshape=None, extra=()):
    entries = []
    for k, v in sd.items():
        if k in drop:
            continue
        v = reshape(k, v) if reshape else v
        key = diffusers_key(CFG, k) if layout == "diffusers" else k
        raw = (stlib.bf16_rne(v).tobytes() if dtype == "BF16" else v.astype("<f4").tobytes())
        entries.append((key, dtype, v.shape, raw))
    entries += list(extra)
    order = rng.permutation(len(entries))
    stlib.write_st(path, [entries[i] for i in order])


def bf16_values(v):
    return (stlib.bf16_rne(v).astype(np.uint32) << 16).view(np.float32)


def file_weights(path):
    out = {}
    with h5py.File(path, "r") as f:
        for g in ("decoder", "encoder"):
            for k, d in f[g].items():
                out[k] = d[()].astype(np.float32) if d.dtype != np.uint16 else \
                    (d[()].astype(np.uint32) << 16).view(np.float32)
    return out


def checksum(path):
    rc, out, _ = run([BIN, "inspect", path, "--json"])
    m = re.search(r'"checksum":"([^"]+)"', out.replace(" ", ""))
    return m.group(1) if rc == 0 and m else None


def converted(name, sd, layout, dtype="F32", args=()):
    src, out = p(name + ".safetensors"), p(name + ".h5")
    write_ckpt(src, sd, layout, dtype)
    rc, _, err = run([BIN, "convert", src, "-o", out, "-q"] + list(args))
    check(rc == 0, "convert %s (%s, %s): exit %d: %s" % (name, layout, dtype, rc,
                                                           err.strip()[-300:]))
    return out


# ---------------------------------------------------------------- the checks

def check_layouts(sd):
    a = converted("official", sd, "official")
    b = converted("diffusers", sd, "diffusers")
    got = file_weights(a)
    same = set(got) == set(sd) and all(np.array_equal(got[k], sd[k]) for k in sd)
    check(same, "official: the file holds exactly the checkpoint's %d tensors" % len(sd))
    check(checksum(a) is not None and checksum(a) == checksum(b),
          "official and diffusers keys give the same file (checksum %s)" % checksum(a))
    c = converted("bf16in", sd, "official", "BF16")
    got = file_weights(c)
    check(all(np.array_equal(got[k], bf16_values(sd[k])) for k in sd),
          "BF16 input: the file holds its values widened exactly")
    d = converted("bf16out", sd, "official", "F32", ("--dtype", "bf16"))
    rc, out, _ = run([BIN, "inspect", d])
    got = file_weights(d)
    check(rc == 0 and "dtype      bf16" in out and
          all(np.array_equal(got[k], bf16_values(sd[k])) for k in sd),
          "--dtype bf16: every value rounded to nearest even")
    rc, out, err = run([BIN, "inspect", "--verify", a])
    check(rc == 0 and "wan2.2-vae" in out and "preset wan2.2-vae-tiny" in out,
          "inspect --verify of the file: %s" % (out + err).strip()[-200:])
    return a


def check_decode_encode(path, sd):
    ref = {k: v.astype(np.float64) for k, v in sd.items()}
    z = rng.standard_normal((48, 2, 3, 2)).astype(np.float32)
    with h5py.File(p("lat.h5"), "w") as f:
        f["latents"] = z
    rc, _, err = run([BIN, "decode", "--vae", path, "--latents", p("lat.h5"), "-o", p("v.h5"),
                      "--quiet"])
    if check(rc == 0, "decode with the converted file: exit %d %s" % (rc, err.strip()[-200:])):
        with h5py.File(p("v.h5"), "r") as f:
            got = f["video"][()].astype(np.float64)
        want = R.decode(CFG, {k: v for k, v in ref.items() if not k.startswith(("enc", "conv1"))},
                        z.astype(np.float64))
        err = rel_l2(got, want) if got.shape == want.shape else float("inf")
        check(err <= TOL, "decode of the file: %s, rel L2 %.2e against the reference"
              % (got.shape, err))
    x = rng.uniform(-1, 1, (3, 5, 32, 16)).astype(np.float32)
    with h5py.File(p("video.h5"), "w") as f:
        f["video"] = x
    rc, _, err = run([DRIVER, "encode-file", path, p("video.h5"), p("z.h5")])
    if check(rc == 0, "encode with the file: exit %d %s" % (rc, err.strip()[-200:])):
        with h5py.File(p("z.h5"), "r") as f:
            got = f["latents"][()].astype(np.float64)
        want = R.encode(CFG, {k: v for k, v in ref.items() if k.startswith(("enc", "conv1"))},
                        x.astype(np.float64))
        err = rel_l2(got, want) if got.shape == want.shape else float("inf")
        check(err <= TOL, "encode of the file: %s, rel L2 %.2e against the reference"
              % (got.shape, err))


def refused(name, needle, sd, layout="official", **kw):
    src, out = p(name + ".safetensors"), p(name + ".h5")
    write_ckpt(src, sd, layout, **kw)
    rc, _, err = run([BIN, "convert", src, "-o", out, "-q"])
    check(rc == 2 and needle in err and not os.path.exists(out),
          "%s refused (exit 2, '%s', no file): exit %d, %s" % (name, needle, rc,
                                                              err.strip()[-300:]))


def check_refusals(sd):
    refused("missing", "missing tensor 'encoder.head.0.gamma'", sd, drop=("encoder.head.0.gamma",))
    refused("missing_diffusers", "missing tensor 'decoder.up_blocks.1.upsampler.time_conv.bias'",
            sd, layout="diffusers", drop=("decoder.upsamples.1.upsamples.3.time_conv.bias",))
    shape = lambda k, v: v[:, :-1] if k == "decoder.middle.1.proj.weight" else v  # noqa: E731
    refused("shape", "tensor 'decoder.middle.1.proj.weight': shape [32, 31, 1, 1]", sd,
            reshape=shape)
    dit = [("blocks.0.self_attn.q.weight", "F32", (4, 4), np.zeros(16, "<f4").tobytes())]
    refused("dit", "tensors of a Wan DiT", sd, extra=dit)
    src = p("official.safetensors")
    for d in ("fp8", "int8", "q8_0"):
        rc, _, err = run([BIN, "convert", src, "-o", p(d + ".h5"), "--dtype", d])
        want = "--dtype %s: only a DiT has %s weights" % (d, d)
        check(rc == 2 and not os.path.exists(p(d + ".h5")) and want in err,
              "--dtype %s of a VAE refused naming it: exit %d, %s" % (d, rc, err.strip()[-160:]))


def main():
    sd = weights()
    path = check_layouts(sd)
    check_decode_encode(path, sd)
    check_refusals(sd)
    if FAILS:
        print("vae22_convert: %d check(s) failed (seed %d)" % (len(FAILS), SEED))
        return 1
    print("vae22_convert: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
