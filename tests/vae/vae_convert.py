"""`staticpipe convert`, `init` and `inspect` of Wan VAEs (the decoder, with
or without the encoder), and the VAE model file read back by `staticpipe
decode`.

Random float32 weights of small configs (tests/ref/wan_vae_ref.py and, for
the encoder, wan_vae_enc_ref.py) are written as safetensors in both
layouts: the published WanVAE_ state dict (also ComfyUI's
wan_2.1_vae.safetensors) and diffusers' AutoencoderKLWan, whose key mapping
is written out here from diffusers' module structure (independent of the C
table), keys shuffled, F32 and BF16 inputs, with the whole encoder beside
the decoder (or, for a config of no residual blocks, which no encoder has,
the decoder alone). Each is converted; the file's /decoder and /encoder
datasets must hold exactly the weights; both layouts must give the same
file checksum; the decode of the file must match the float64 reference
decode to relative L2 <= 1e-5. Then: --dtype bf16, inspect and its --verify
on damaged files, the arch lines between DiT and VAE files, a corpus of
malformed checkpoints (exit 2, one line naming the check, no file; a
missing or mis-shaped encoder tensor in either layout among them), and the
synth presets and init (with and without --encoder).

usage: vae_convert.py STATICPIPE WORKDIR  (SP_SEED replays a run)
"""
import json
import os
import re
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import check, finish, rel_l2, seed  # noqa: E402
import wan_vae_ref as R  # noqa: E402
import wan_vae_enc_ref as E  # noqa: E402
import stlib  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
SEED = seed("vae_convert")
rng = np.random.default_rng(SEED)
TOL = 1e-5


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def p(name):
    return os.path.join(WORK, name)


# ---------------------------------------------------------------- layouts

RES_LEAF = {"residual.0.": "norm1.", "residual.2.": "conv1.", "residual.3.": "norm2.",
            "residual.6.": "conv2.", "shortcut.": "conv_shortcut."}


def diffusers_key(cfg, name):
    """AutoencoderKLWan's key of an official decoder key: post_quant_conv is
    conv2; WanDecoder3d has conv_in, mid_block (resnets 0 and 1 around
    attentions 0), up_blocks (per level num_res_blocks + 1 resnets and one
    upsampler, numbered per block), norm_out and conv_out."""
    def res(prefix, leaf):
        for a, b in RES_LEAF.items():
            if leaf.startswith(a):
                return prefix + b + leaf[len(a):]
        raise ValueError(leaf)
    if name.startswith("conv2."):
        return "post_quant_conv." + name[6:]
    if name.startswith("decoder.conv1."):
        return "decoder.conv_in." + name[len("decoder.conv1."):]
    if name.startswith("decoder.head.0."):
        return "decoder.norm_out." + name[len("decoder.head.0."):]
    if name.startswith("decoder.head.2."):
        return "decoder.conv_out." + name[len("decoder.head.2."):]
    m = re.match(r"decoder\.middle\.(\d)\.(.*)$", name)
    if m:
        i, leaf = int(m.group(1)), m.group(2)
        if i == 1:
            return "decoder.mid_block.attentions.0." + leaf
        return res("decoder.mid_block.resnets.%d." % (i // 2), leaf)
    m = re.match(r"decoder\.upsamples\.(\d+)\.(.*)$", name)
    per = cfg.num_res_blocks + 2
    k, leaf = int(m.group(1)), m.group(2)
    block, j = divmod(k, per)
    if j == per - 1:
        return "decoder.up_blocks.%d.upsamplers.0.%s" % (block, leaf)
    return res("decoder.up_blocks.%d.resnets.%d." % (block, j), leaf)


def diffusers_enc_key(name):
    """AutoencoderKLWan's key of an official encoder key: quant_conv is
    conv1; WanEncoder3d has conv_in, down_blocks (the residual blocks and
    resamples numbered across levels, as the published downsamples),
    mid_block (resnets 0 and 1 around attentions 0), norm_out and conv_out;
    a resample keeps its resample.1 and time_conv."""
    def res(prefix, leaf):
        for a, b in RES_LEAF.items():
            if leaf.startswith(a):
                return prefix + b + leaf[len(a):]
        return prefix + leaf  # resample.1.*, time_conv.*
    if name.startswith("conv1."):
        return "quant_conv." + name[6:]
    for a, b in (("encoder.conv1.", "encoder.conv_in."), ("encoder.head.0.", "encoder.norm_out."),
                 ("encoder.head.2.", "encoder.conv_out.")):
        if name.startswith(a):
            return b + name[len(a):]
    m = re.match(r"encoder\.middle\.(\d)\.(.*)$", name)
    if m:
        i, leaf = int(m.group(1)), m.group(2)
        if i == 1:
            return "encoder.mid_block.attentions.0." + leaf
        return res("encoder.mid_block.resnets.%d." % (i // 2), leaf)
    m = re.match(r"encoder\.downsamples\.(\d+)\.(.*)$", name)
    return res("encoder.down_blocks.%s." % m.group(1), m.group(2))


def enc_config(cfg):
    """The encoder of decoder config cfg (the published WanVAE_ builds both
    from one config: the encoder's temporal flags are the decoder's
    reversed), or None when it has none (no residual blocks)."""
    if cfg.num_res_blocks < 1:
        return None
    return E.Config(cfg.dim, cfg.z_dim, cfg.dim_mult, cfg.num_res_blocks,
                    cfg.temporal_upsample[::-1])


def key_of(cfg, style, name):
    if style == "official":
        return name
    return diffusers_key(cfg, name) if name.startswith(("decoder.", "conv2.")) \
        else diffusers_enc_key(name)


def raw(dt, a):
    a = np.asarray(a, np.float32)
    if dt == "F32":
        return a.astype("<f4").tobytes()
    if dt == "F16":
        return a.astype("<f2").tobytes()
    if dt == "BF16":
        with np.errstate(invalid="ignore"):  # non-finite values of the malformed cases
            return stlib.bf16_rne(a).astype("<u2").tobytes()
    raise ValueError(dt)


def as_input(dt, a):
    """The float32 values an input of dtype dt holds for a."""
    return stlib.to_f32(dt, raw(dt, a)).reshape(np.shape(a))


def entries(cfg, sd, style, dt):
    """sd (decoder and encoder weights by official key) as checkpoint
    entries of style, shuffled."""
    e = [(key_of(cfg, style, n), dt, v.shape, raw(dt, v)) for n, v in sd.items()]
    order = rng.permutation(len(e))
    return [e[i] for i in order]


def weights(cfg):
    """Decoder weights and, when cfg has an encoder, the encoder's."""
    sd = {k: v.astype(np.float32) for k, v in R.random_weights(cfg, rng).items()}
    # A wider head, so that part of the video reaches the clamp.
    sd["decoder.head.2.weight"] = (sd["decoder.head.2.weight"] * 2).astype(np.float32)
    ecfg = enc_config(cfg)
    if ecfg:
        sd.update({k: v.astype(np.float32) for k, v in E.random_weights(ecfg, rng).items()})
    return sd


def errors(stderr):
    return [l for l in stderr.splitlines() if "error:" in l]


def convert(out, inputs, extra=()):
    return run([BIN, "convert", *inputs, "-o", out, *extra])


def decode(model, z, name):
    lat, vid = p(name + ".lat.h5"), p(name + ".vid.h5")
    with h5py.File(lat, "w") as f:
        f["latents"] = z
    rc, _, err = run([BIN, "decode", "--vae", model, "--latents", lat, "-o", vid, "-q"])
    if rc != 0:
        return None, err
    with h5py.File(vid, "r") as f:
        return f["video"][()].astype(np.float64), err


def root_attr(path, key):
    with h5py.File(path, "r") as f:
        v = f.attrs[key]
    return v.decode() if isinstance(v, bytes) else str(v)


# ---------------------------------------------------------------- conversions

# The second's decoder widths (32, 32, 16, 16, 8) have the divisor 8, its
# encoder's first width is 4: with the encoder, dim is 4.
CASES = [
    (R.Config(8, 16, (1, 2, 4, 4), 2, (True, True, False)), (3, 3, 5)),
    (R.Config(4, 16, (2, 4, 4, 8), 1, (False, True, True)), (2, 3, 2)),
    (R.Config(6, 16, (2, 3), 0, (True,)), (3, 2, 3)),
]

vae_file = None
for ci, (cfg, (F, H, W)) in enumerate(CASES):
    sd = weights(cfg)
    shapes = R.tensor_shapes(cfg)
    ecfg = enc_config(cfg)
    eshapes = E.tensor_shapes(ecfg) if ecfg else {}
    check(set(shapes) | set(eshapes) == set(sd), "case %d: reference tables and weights agree"
          % ci)
    z = rng.standard_normal((16, F, H, W)).astype(np.float32)
    for dt in ("F32", "BF16"):
        vals = {k: as_input(dt, v) for k, v in sd.items()}
        sums, outs = {}, {}
        for style in ("official", "diffusers"):
            src = p("c%d_%s_%s.safetensors" % (ci, style, dt))
            stlib.write_st(src, entries(cfg, sd, style, dt))
            out = p("c%d_%s_%s.h5" % (ci, style, dt))
            rc, _, err = convert(out, [src])
            what = "case %d %r, %s keys, %s input" % (ci, cfg, style, dt)
            check(rc == 0, what + ": convert exits 0" + ("" if rc == 0 else ": " + err))
            if rc != 0:
                continue
            check("skipped" not in err and ("with the encoder" if ecfg else "the decoder alone")
                  in err, what + ": nothing skipped; one info line says whether the encoder is "
                  "there")
            check(root_attr(out, "arch") == "wan2.1-vae" and root_attr(out, "dtype") == "fp32",
                  what + ": arch wan2.1-vae, dtype fp32 (the VAE's default)")
            with h5py.File(out, "r") as f:
                names = sorted(f["decoder"].keys())
                same = names == sorted(shapes) and all(
                    np.array_equal(f["decoder"][k][()], vals[k]) for k in shapes)
                enames = sorted(f["encoder"].keys()) if "encoder" in f else []
                esame = enames == sorted(eshapes) and all(
                    np.array_equal(f["encoder"][k][()], vals[k]) for k in eshapes)
                eattr = int(f.attrs["encoder"]) if "encoder" in f.attrs else None
                dims = (int(f.attrs["dim"]), [int(x) for x in f.attrs["dim_mult"]])
            check(same, what + ": the file holds exactly the decoder's weights")
            check(not ecfg or dims == (cfg.dim, list(cfg.dim_mult)),
                  what + ": dim and dim_mult %s (the encoder's first width is dim)" % (dims,))
            check(esame and eattr == (1 if ecfg else None),
                  what + (": /encoder holds exactly the encoder's weights, attribute encoder 1"
                          if ecfg else ": no /encoder and no attribute encoder"))
            sums[style] = root_attr(out, "checksum")
            outs[style] = out
        if len(sums) == 2:
            check(sums["official"] == sums["diffusers"],
                  "case %d %s: both layouts give one checksum (%s, %s)"
                  % (ci, dt, sums["official"], sums["diffusers"]))
        ref = R.decode(cfg, {k: vals[k].astype(np.float64) for k in shapes},
                       z.astype(np.float64))
        if ecfg:
            # the converted encoder, through encode --vae, against the float64
            # reference of the weights as the checkpoint holds them
            v = rng.uniform(-1, 1, (3, 5, 16, 24)).astype(np.float32)
            with h5py.File(p("enc_in.h5"), "w") as f:
                f["video"] = v
            eref = E.encode(ecfg, {k: vals[k].astype(np.float64) for k in eshapes},
                            v.astype(np.float64))
            for style, out in outs.items():
                lat = p("c%d_%s_%s.lat_enc.h5" % (ci, style, dt))
                rc, _, err = run([BIN, "encode", "--vae", out, "--video", p("enc_in.h5"), "-o",
                                  lat, "-q"])
                e = float("inf")
                if rc == 0:
                    with h5py.File(lat, "r") as f:
                        got = f["latents"][()].astype(np.float64)
                    e = rel_l2(got, eref) if got.shape == eref.shape else e
                check(e <= TOL, "case %d %s %s: encode T=5 16x24 vs float64 reference: rel L2 "
                      "%.2e%s" % (ci, style, dt, e, "" if rc == 0 else ": " + err))
        for style, out in outs.items():
            got, err = decode(out, z, "c%d_%s_%s" % (ci, style, dt))
            if got is None:
                check(False, "case %d %s %s: decode failed: %s" % (ci, style, dt, err))
                continue
            e = rel_l2(got, ref) if got.shape == ref.shape else float("inf")
            check(e <= TOL, "case %d %s %s: decode F=%d %dx%d -> %s vs float64 reference: "
                  "rel L2 %.2e (%.0f%% clamped)" % (ci, style, dt, F, H, W, got.shape, e,
                                                    100 * np.mean(np.abs(ref) == 1)))
        if ci == 0 and dt == "F32":
            vae_file = outs.get("official")
            # --dtype bf16: the stored values are bf16 rounded to nearest even,
            # and the decode matches the reference of those values.
            out = p("c0_bf16.h5")
            rc, _, err = convert(out, [p("c0_official_F32.safetensors")], ["--dtype", "bf16"])
            check(rc == 0 and root_attr(out, "dtype") == "bf16", "--dtype bf16: converted")
            if rc == 0:
                with h5py.File(out, "r") as f:
                    ok = all(np.array_equal(f["decoder"][k][()], stlib.bf16_rne(sd[k]))
                             for k in shapes) and \
                        all(np.array_equal(f["encoder"][k][()], stlib.bf16_rne(sd[k]))
                            for k in eshapes)
                check(ok, "--dtype bf16: every value (decoder and encoder) is the float32 "
                      "weight rounded to bf16")
                wb = {k: stlib.to_f32("BF16", stlib.bf16_rne(sd[k]).tobytes())
                      .reshape(sd[k].shape).astype(np.float64) for k in shapes}
                got, err = decode(out, z, "c0_bf16")
                refb = R.decode(cfg, wb, z.astype(np.float64))
                check(got is not None and rel_l2(got, refb) <= TOL,
                      "--dtype bf16: decode matches the reference of the bf16 weights")
            # F16 input.
            src = p("c0_f16.safetensors")
            stlib.write_st(src, entries(cfg, sd, "diffusers", "F16"))
            rc, _, err = convert(p("c0_f16.h5"), [src])
            if rc == 0:
                with h5py.File(p("c0_f16.h5"), "r") as f:
                    ok = all(np.array_equal(f["decoder"][k][()], as_input("F16", sd[k]))
                             for k in shapes)
            check(rc == 0 and ok, "F16 input: converted exactly")
            # inspect
            rc, out_txt, err = run([BIN, "inspect", vae_file, "--json"])
            j = json.loads(out_txt) if rc == 0 else {}
            nparams = sum(int(np.prod(s)) for s in shapes.values())
            eparams = sum(int(np.prod(s)) for s in eshapes.values())
            c = j.get("config", {})
            check(rc == 0 and j.get("arch") == "wan2.1-vae" and c.get("dim") == 8 and
                  c.get("dim_mult") == [1, 2, 4, 4] and c.get("num_res_blocks") == 2 and
                  c.get("temporal_up") == [1, 1, 0] and
                  j.get("tensors") == len(shapes) + len(eshapes) and
                  j.get("params") == nparams + eparams and
                  j.get("file_bytes") == 4 * (nparams + eparams) and
                  j.get("encoder") == {"tensors": len(eshapes), "params": eparams} and
                  j.get("level_dims") == [32, 32, 16, 8] and
                  j.get("checksum") == root_attr(vae_file, "checksum"),
                  "inspect --json: arch, config, widths, the encoder (%d tensors, %d "
                  "parameters), %d tensors, %d parameters, bytes, checksum"
                  % (len(eshapes), eparams, len(shapes) + len(eshapes), nparams + eparams))
            rc, out_txt, err = run([BIN, "inspect", vae_file])
            check(rc == 0 and "levels 32, 32, 16, 8" in out_txt and
                  ("%d parameters" % (nparams + eparams)) in out_txt and
                  ("encoder    yes: %d tensors" % len(eshapes)) in out_txt,
                  "inspect: text with widths, parameters and the encoder")
        if ci == 2 and dt == "F32":
            rc, out_txt, err = run([BIN, "inspect", outs.get("official", ""), "--json"])
            j = json.loads(out_txt) if rc == 0 else {}
            check(rc == 0 and "encoder" not in j and j.get("tensors") == len(shapes),
                  "inspect --json of a decoder-only file: no encoder, the decoder's %d tensors"
                  % len(shapes))
            rc, out_txt, err = run([BIN, "inspect", outs.get("official", "")])
            check(rc == 0 and "encoder    none: this file decodes only" in out_txt,
                  "inspect: a decoder-only file says it decodes only")

# ---------------------------------------------------------------- damaged files, archs

if vae_file:
    rc, _, err = run([BIN, "inspect", "--verify", vae_file])
    check(rc == 0 and "every checksum matches" in err, "inspect --verify of a good file")
    bad = p("damaged.h5")
    with open(vae_file, "rb") as f:
        data = bytearray(f.read())
    with h5py.File(vae_file, "r") as f:
        off = f["decoder/decoder.middle.1.to_qkv.weight"].id.get_offset()
    data[off + 5] ^= 0x40
    with open(bad, "wb") as f:
        f.write(data)
    rc, _, err = run([BIN, "inspect", bad])
    check(rc == 0, "inspect without --verify reads metadata only")
    rc, _, err = run([BIN, "inspect", "--verify", bad])
    check(rc == 2 and "/decoder/decoder.middle.1.to_qkv.weight: checksum mismatch" in err,
          "inspect --verify of a damaged dataset exits 2 naming it: " + " | ".join(errors(err)))
    with h5py.File(p("x.lat.h5"), "w") as f:
        f["latents"] = np.zeros((16, 1, 2, 3), np.float32)
    rc, _, err = run([BIN, "decode", "--vae", bad, "--latents", p("x.lat.h5"), "-o", p("x.vid.h5")])
    check(rc != 0 and "checksum mismatch" in err, "the decoder refuses the damaged file")
    # the same in the encoder's group
    bad_e = p("damaged_enc.h5")
    with open(vae_file, "rb") as f:
        data = bytearray(f.read())
    with h5py.File(vae_file, "r") as f:
        off = f["encoder/encoder.middle.1.to_qkv.weight"].id.get_offset()
    data[off + 5] ^= 0x40
    with open(bad_e, "wb") as f:
        f.write(data)
    rc, _, err = run([BIN, "inspect", "--verify", bad_e])
    check(rc == 2 and "/encoder/encoder.middle.1.to_qkv.weight: checksum mismatch" in err,
          "inspect --verify of a damaged encoder dataset exits 2 naming it: " +
          " | ".join(errors(err)))
    with h5py.File(p("x.vid.h5"), "w") as f:
        f["video"] = np.zeros((3, 1, 16, 16), np.float32)
    rc, _, err = run([BIN, "encode", "--vae", bad_e, "--video", p("x.vid.h5"), "-o",
                      p("x.enc.h5")])
    check(rc != 0 and "checksum mismatch" in err and not os.path.exists(p("x.enc.h5")),
          "the encoder refuses the damaged file")
    bad2 = p("badroot.h5")
    with open(bad2, "wb") as f:
        f.write(open(vae_file, "rb").read())
    with h5py.File(bad2, "r+") as f:
        f.attrs["checksum"] = np.bytes_("crc32c:00000000")
    rc, _, err = run([BIN, "inspect", "--verify", bad2])
    check(rc == 2 and "root attribute checksum" in err,
          "inspect --verify of a wrong root checksum exits 2: " + " | ".join(errors(err)))
    with h5py.File(bad2, "r+") as f:
        f.attrs["checksum"] = np.bytes_(root_attr(vae_file, "checksum"))
        f.create_dataset("decoder/extra", data=np.zeros(3, np.float32))
    rc, _, err = run([BIN, "inspect", bad2])
    check(rc == 2 and "/decoder/extra: unexpected object" in err, "an extra dataset is refused")

    dit = p("dit.h5")
    rc, _, err = run([BIN, "init", "--arch", "wan2.1-tiny", "--layers", "1", "-q", "-o", dit])
    check(rc == 0, "init a DiT file")
    rc, _, err = run([BIN, "plan", "--model", vae_file, "--gpu-mem", "8gb"])
    check(rc == 2 and "%s is a wan2.1-vae model (a VAE decoder); this command needs a "
          "wan2.1-t2v DiT" % vae_file in err, "a DiT command given a VAE file: " +
          " | ".join(errors(err)))
    rc, _, err = run([BIN, "decode", "--vae", dit, "--latents", p("x.lat.h5"), "-o", p("x.vid.h5")])
    check(rc != 0 and "%s is a wan2.1-t2v model (a DiT); this command needs a wan2.1-vae VAE "
          "decoder" % dit in err, "the VAE reader given a DiT file: " + " | ".join(errors(err)))

# ---------------------------------------------------------------- malformed checkpoints

cfg = R.Config(4, 16, (1, 2, 4, 4), 1, (True, True, False))
sd = weights(cfg)


def bad_case(name, style, edit, expect, dt="F32"):
    e = entries(cfg, sd, style, dt)
    e = edit(e)
    src, out = p("bad_%s.safetensors" % name), p("bad_%s.h5" % name)
    stlib.write_st(src, e)
    before = set(os.listdir(WORK))
    rc, _, err = convert(out, [src])
    errs = errors(err)
    left = set(os.listdir(WORK)) - before
    ok = rc == 2 and errs and expect in errs[0] and len(errs) <= 2 and not left
    check(ok, "malformed (%s): exit %d, %s" % (name, rc, " | ".join(errs) or "no error line"))


def drop(key):
    return lambda e: [x for x in e if x[0] != key]


def reshape(key):
    def f(e):
        out = []
        for k, dt, s, r in e:
            if k == key:
                s = (s[0] + 1,) + tuple(s[1:])
                r = raw(dt, rng.standard_normal(s))
            out.append((k, dt, s, r))
        return out
    return f


def poison(key, value, dt="F32"):
    def f(e):
        out = []
        for k, d, s, r in e:
            if k == key:
                a = stlib.to_f32(d, r).copy()
                a[len(a) // 2] = value
                r = raw(d, a)
            out.append((k, d, s, r))
        return out
    return f


dk = lambda n: diffusers_key(cfg, n)  # noqa: E731
bad_case("missing", "official", drop("decoder.middle.1.proj.bias"),
         "missing tensor 'decoder.middle.1.proj.bias'")
bad_case("missing_diffusers", "diffusers", drop(dk("decoder.upsamples.3.shortcut.weight")),
         "missing tensor 'decoder.up_blocks.1.resnets.0.conv_shortcut.weight'")
bad_case("shape", "official", reshape("decoder.upsamples.4.residual.2.bias"),
         "tensor 'decoder.upsamples.4.residual.2.bias': shape [17], the inferred config "
         "needs [16]")
bad_case("shape_diffusers", "diffusers", reshape(dk("decoder.middle.1.to_qkv.weight")),
         "tensor 'decoder.mid_block.attentions.0.to_qkv.weight': shape [49, 16, 1, 1], the "
         "inferred config needs [48, 16, 1, 1]")
bad_case("nan", "official", poison("decoder.upsamples.1.residual.6.weight", np.nan),
         "tensor 'decoder.upsamples.1.residual.6.weight': element")
bad_case("inf_bf16", "diffusers", poison(dk("decoder.head.2.bias"), np.inf, "BF16"),
         "tensor 'decoder.conv_out.bias': element 1 is infinite", dt="BF16")
bad_case("extra", "official",
         lambda e: e + [("decoder.upsamples.0.residual.9.weight", "F32", (2,), raw("F32", [1, 2]))],
         "tensor 'decoder.upsamples.0.residual.9.weight': not a tensor of a Wan 2.1 VAE")
DIT_CFG = dict(dim=128, ffn_dim=64, heads=1, layers=1, in_dim=16, out_dim=16, text_dim=16,
               freq_dim=16)
bad_case("dit_mixed", "official",
         lambda e: e + stlib.make_checkpoint(rng, DIT_CFG, "official", "F32"),
         "tensors of a Wan 2.1 DiT")
bad_case("encoder_only", "official",
         lambda e: [x for x in e if x[0].startswith(("encoder.", "conv1."))],
         "holds only the VAE's encoder (%d tensors" % len(E.tensor_shapes(enc_config(cfg))))
bad_case("missing_encoder", "official", drop("encoder.downsamples.4.residual.6.bias"),
         "missing tensor 'encoder.downsamples.4.residual.6.bias'")
bad_case("missing_encoder_diffusers", "diffusers", drop("quant_conv.weight"),
         "missing tensor 'quant_conv.weight'")
bad_case("shape_encoder_diffusers", "diffusers",
         reshape(diffusers_enc_key("encoder.downsamples.1.resample.1.weight")),
         "tensor 'encoder.down_blocks.1.resample.1.weight': shape [5, 4, 3, 3], the inferred "
         "config needs [4, 4, 3, 3]")
# downsamples.1 is the first level's downsample2d: no time_conv
bad_case("encoder_time_conv", "official",
         lambda e: e + [("encoder.downsamples.1.time_conv.weight", "F32", (4, 4, 3, 1, 1),
                         raw("F32", rng.standard_normal((4, 4, 3, 1, 1))))],
         "tensor 'encoder.downsamples.1.time_conv.weight': not a tensor of a Wan 2.1 VAE")
bad_case("dtype", "official",
         lambda e: [(k, "I64", s, stlib.random_tensor(rng, "I64", s)) if k == "conv2.bias"
                    else (k, d, s, r) for k, d, s, r in e],
         "tensor 'conv2.bias': dtype I64 is not supported")

# ---------------------------------------------------------------- synth presets and init

rc, out_txt, _ = run([BIN, "inspect", "--json", "synth:wan2.1-vae"])
j = json.loads(out_txt) if rc == 0 else {}
pub = R.tensor_shapes(R.published_config())
epub = E.tensor_shapes(E.published_config())
ep = sum(int(np.prod(s)) for s in epub.values())
check(j.get("tensors") == len(pub) + len(epub) == 108 + 86 and
      j.get("params") == sum(int(np.prod(s)) for s in pub.values()) + ep and
      j.get("encoder") == {"tensors": 86, "params": ep} and ep == 53596928,
      "synth:wan2.1-vae: %s tensors, %s parameters, the encoder %s, as the references' "
      "published tables" % (j.get("tensors"), j.get("params"), j.get("encoder")))
tiny = R.Config(8, 16, (1, 2, 4, 4), 2, (True, True, False))
rc, out_txt, _ = run([BIN, "inspect", "--json", "synth:wan2.1-vae-tiny:7"])
j = json.loads(out_txt) if rc == 0 else {}
tshapes = R.tensor_shapes(tiny)
etshapes = E.tensor_shapes(enc_config(tiny))
check(j.get("tensors") == len(tshapes) + len(etshapes) and
      j.get("params") == sum(int(np.prod(s)) for s in list(tshapes.values()) +
                             list(etshapes.values())) and
      j.get("config", {}).get("dim") == 8, "synth:wan2.1-vae-tiny: dim 8, the published "
      "structure, with the encoder")
seed = int(rng.integers(0, 1 << 40))
F, H, W = 3, 4, 5
z = rng.standard_normal((16, F, H, W)).astype(np.float32)
spec = "synth:wan2.1-vae-tiny:%d" % seed
v_synth, err = decode(spec, z, "synth")
check(v_synth is not None and v_synth.shape == (3, 1 + 4 * (F - 1), 8 * H, 8 * W),
      "synth tiny: decode gives (3, 1 + 4 (F - 1), 8H, 8W)")
if v_synth is not None:
    clamped = float(np.mean(np.abs(v_synth) == 1.0))
    check(np.all(np.abs(v_synth) <= 1.0) and clamped < 0.2 and float(v_synth.std()) > 0.05,
          "synth tiny: video in [-1, 1], %.1f%% clamped, std %.3f" % (100 * clamped,
                                                                   float(v_synth.std())))
tiny_file = p("tiny.h5")
rc, _, err = run([BIN, "init", "--preset", "wan2.1-vae-tiny", "--seed", str(seed), "-q", "-o",
                  tiny_file])
check(rc == 0 and root_attr(tiny_file, "preset") == "wan2.1-vae-tiny",
      "init --preset wan2.1-vae-tiny writes a VAE file")
if rc == 0:
    v_file, err = decode(tiny_file, z, "tiny")
    check(v_file is not None and v_synth is not None and np.array_equal(v_file, v_synth),
          "init's file decodes bit-identically to its synth: spec")
    rc, _, err = run([BIN, "inspect", "--verify", tiny_file])
    check(rc == 0, "inspect --verify of init's file")
    with h5py.File(tiny_file, "r") as f:
        check("encoder" not in f and "encoder" not in f.attrs,
              "init without --encoder: the decoder alone")
enc_file = p("tiny_enc.h5")
rc, _, err = run([BIN, "init", "--preset", "wan2.1-vae-tiny", "--encoder", "--seed", str(seed),
                  "-q", "-o", enc_file])
check(rc == 0, "init --encoder writes a VAE file" + ("" if rc == 0 else ": " + err))
if rc == 0:
    v_file, err = decode(enc_file, z, "tiny_enc")
    check(v_file is not None and v_synth is not None and np.array_equal(v_file, v_synth),
          "init --encoder's file decodes bit-identically to its synth: spec")
    v = rng.uniform(-1, 1, (3, 5, 16, 16)).astype(np.float32)
    with h5py.File(p("enc_v.h5"), "w") as f:
        f["video"] = v
    lat = []
    for m in (enc_file, spec):
        out = p("enc_%d.h5" % len(lat))
        rc, _, err = run([BIN, "encode", "--vae", m, "--video", p("enc_v.h5"), "-o", out, "-q"])
        with h5py.File(out, "r") if rc == 0 else open(os.devnull) as f:
            lat.append(f["latents"][()] if rc == 0 else None)
    check(len(lat) == 2 and lat[0] is not None and lat[1] is not None and
          np.array_equal(lat[0], lat[1]), "init --encoder's file encodes bit-identically to its "
          "synth: spec")
    with h5py.File(enc_file, "r") as f:
        sd = {k: f["encoder"][k][()].astype(np.float64) for k in f["encoder"]}
    e = rel_l2(lat[0].astype(np.float64), E.encode(enc_config(tiny), sd, v.astype(np.float64))) \
        if lat[0] is not None else float("inf")
    check(e <= TOL, "synth tiny's encoder (init --encoder) against the float64 reference: rel "
          "L2 %.2e" % e)

sys.exit(finish("vae_convert"))
