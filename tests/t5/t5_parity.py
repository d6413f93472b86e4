#!/usr/bin/env python3
"""The UMT5 text encoder end to end: convert of three key forms, encode,
against the float64 numpy reference (tests/ref/umt5_ref.py).

usage: t5_parity.py STATICPIPE WORKDIR [SEED]

Trains a small unigram SentencePiece model, draws random encoder weights at
small widths, writes them as safetensors in transformers' UMT5EncoderModel
keys (F32, sharded with an index, the tied embed_tokens copy included),
ComfyUI's fp16 form, ComfyUI's scaled fp8 form (e4m3fn encoded here, one
tensor in e5m2, a scale_weight per tensor, the scaled_fp8 marker and a
spiece_model tensor)
and Wan's own keys; converts each and checks every stored weight bit for
bit against the numpy conversion (fp8: the float32 product code value x
scale), the same weights in two key forms giving the same checksum; then
`staticpipe encode` (tokenizer from the file) against umt5_ref.encode on
the sentencepiece library's ids, relative L2 <= 1e-5 (STYLE.md 9), rerun
and thread counts bit-identical, and the refusals (empty prompt, invalid
UTF-8 with its line and byte offset, a long prompt's dropped tokens, a
damaged, truncated or foreign model file, a checkpoint missing a tensor
or a tokenizer). Exits 1 on any failure.
"""
import json
import os
import random
import shutil
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import sptest  # noqa: E402
from sptest import SRC, check, finish, rel_l2  # noqa: E402
import umt5_ref  # noqa: E402
import stlib  # noqa: E402
import spm_parity  # noqa: E402
import sentencepiece as spm  # noqa: E402
from encode_prompt import WAN_NEG_PROMPT, TEXT_LEN  # noqa: E402

def run(args, env=None, want_rc=0):
    return sptest.run(args, expect=want_rc, env=env, fatal=False)


# ------------------------------------------------------------ weights and key forms

LEAF = [  # Wan's leaf, transformers' leaf
    ("norm1.weight", "layer.0.layer_norm.weight"),
    ("attn.q.weight", "layer.0.SelfAttention.q.weight"),
    ("attn.k.weight", "layer.0.SelfAttention.k.weight"),
    ("attn.v.weight", "layer.0.SelfAttention.v.weight"),
    ("attn.o.weight", "layer.0.SelfAttention.o.weight"),
    ("pos_embedding.embedding.weight", "layer.0.SelfAttention.relative_attention_bias.weight"),
    ("norm2.weight", "layer.1.layer_norm.weight"),
    ("ffn.gate.0.weight", "layer.1.DenseReluDense.wi_0.weight"),
    ("ffn.fc1.weight", "layer.1.DenseReluDense.wi_1.weight"),
    ("ffn.fc2.weight", "layer.1.DenseReluDense.wo.weight"),
]


def hf_key(wan):
    if wan == "token_embedding.weight":
        return "shared.weight"
    if wan == "norm.weight":
        return "encoder.final_layer_norm.weight"
    _, b, leaf = wan.split(".", 2)
    return "encoder.block.%s.%s" % (b, dict(LEAF)[leaf])


def make_weights(rng, c):
    D, A, F, H, B = c["dim"], c["dim_attn"], c["ffn"], c["heads"], c["buckets"]
    hd = A // H
    n = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    w = {"token_embedding.weight": n(c["vocab"], D), "norm.weight": 1 + 0.1 * n(D)}
    for b in range(c["layers"]):
        p = "blocks.%d." % b
        w[p + "norm1.weight"] = 1 + 0.1 * n(D)
        w[p + "attn.q.weight"] = n(A, D) / np.float32(np.sqrt(D * hd))
        w[p + "attn.k.weight"] = n(A, D) / np.float32(np.sqrt(D))
        w[p + "attn.v.weight"] = n(A, D) / np.float32(np.sqrt(D))
        w[p + "attn.o.weight"] = n(D, A) / np.float32(np.sqrt(A))
        w[p + "pos_embedding.embedding.weight"] = 0.5 * n(B, H)
        w[p + "norm2.weight"] = 1 + 0.1 * n(D)
        w[p + "ffn.gate.0.weight"] = n(F, D) / np.float32(np.sqrt(D))
        w[p + "ffn.fc1.weight"] = n(F, D) / np.float32(np.sqrt(D))
        w[p + "ffn.fc2.weight"] = n(D, F) / np.float32(np.sqrt(F))
    return {k: v.astype(np.float32) for k, v in w.items()}


def e4m3fn_table():
    """float32 value of every e4m3fn code 0..255 (NaN for S.1111.111)."""
    v = np.empty(256, np.float32)
    for code in range(256):
        s, e, m = code >> 7, (code >> 3) & 15, code & 7
        if e == 15 and m == 7:
            x = np.nan
        elif e == 0:
            x = m / 8.0 * 2.0 ** -6
        else:
            x = (1 + m / 8.0) * 2.0 ** (e - 7)
        v[code] = -x if s else x
    return v


def e4m3fn_encode(x):
    """Nearest e4m3fn code of each float32 x (|x| <= 448), ties to the even code."""
    table = e4m3fn_table()[:127].astype(np.float64)          # codes 0..126, increasing
    a = np.abs(x.astype(np.float64)).ravel()
    hi = np.clip(np.searchsorted(table, a), 1, 126)
    lo = hi - 1
    dlo, dhi = a - table[lo], table[hi] - a
    code = np.where((dhi < dlo) | ((dhi == dlo) & (hi % 2 == 0)), hi, lo)
    code = code.astype(np.uint8) | np.where(x.ravel() < 0, 0x80, 0).astype(np.uint8)
    return code.reshape(x.shape)


def form_entries(w, form, spm_bytes):
    """[(key, dtype, shape, raw)] of one key form, and the float32 weights
    (Wan keys) a conversion of it must store."""
    ent, want = [], {}
    for k, v in w.items():
        if form == "wan":
            ent.append((k, "F32", v.shape, v.astype("<f4").tobytes()))
            want[k] = v
        elif form == "hf":
            ent.append((hf_key(k), "F32", v.shape, v.astype("<f4").tobytes()))
            want[k] = v
        elif form == "fp16":
            h = v.astype("<f2")
            ent.append((hf_key(k), "F16", v.shape, h.tobytes()))
            want[k] = h.astype(np.float32)
        elif form == "fp8":
            if k == "blocks.0.ffn.fc2.weight":  # one e5m2 tensor: an IEEE half's top byte
                scale = np.float32(np.max(np.abs(v)) / 4096.0)
                h = (v / scale).astype("<f2").view(np.uint16).astype(np.uint32)
                code = ((h + 0x7F + ((h >> 8) & 1)) >> 8).astype(np.uint8)  # nearest, ties even
                ent.append((hf_key(k), "F8_E5M2", v.shape, code.tobytes()))
                sk = hf_key(k)[:-len(".weight")] + ".scale_weight"
                ent.append((sk, "F32", (), np.array(scale, "<f4").tobytes()))
                deq = (code.astype(np.uint16) << 8).view(np.float16).astype(np.float32)
                want[k] = deq * scale
            elif v.ndim == 2 and ("attn." in k or "ffn." in k):
                scale = np.float32(np.max(np.abs(v)) / 448.0)
                code = e4m3fn_encode(v / scale)
                ent.append((hf_key(k), "F8_E4M3", v.shape, code.tobytes()))
                sk = hf_key(k)[:-len(".weight")] + ".scale_weight"
                ent.append((sk, "F32", (), np.array(scale, "<f4").tobytes()))
                want[k] = e4m3fn_table()[code] * scale              # float32 product
            else:
                h = v.astype("<f2")
                ent.append((hf_key(k), "F16", v.shape, h.tobytes()))
                want[k] = h.astype(np.float32)
    if form == "hf":  # the tied copy transformers may save beside shared.weight
        e = w["token_embedding.weight"]
        ent.append(("encoder.embed_tokens.weight", "F32", e.shape, e.astype("<f4").tobytes()))
    if form == "fp8":
        ent.append(("scaled_fp8", "F8_E4M3", (0,), b""))
        ent.append(("spiece_model", "U8", (len(spm_bytes),), spm_bytes))
    return ent, want


def write_form(work, ent, form):
    """One file, or for 'hf' two shards and an index, as sharded checkpoints ship."""
    if form != "hf":
        path = os.path.join(work, "%s.safetensors" % form)
        stlib.write_st(path, ent)
        return [path]
    d = os.path.join(work, "hf")
    os.makedirs(d, exist_ok=True)
    half = len(ent) // 2
    wm = {}
    for i, part in enumerate((ent[:half], ent[half:])):
        name = "model-%05d-of-00002.safetensors" % (i + 1)
        stlib.write_st(os.path.join(d, name), part)
        wm.update({k: name for k, _, _, _ in part})
    idx = os.path.join(d, "model.safetensors.index.json")
    with open(idx, "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)
    return [idx]


def stored(h5path):
    """{Wan key: array as stored}, the root attributes."""
    with h5py.File(h5path, "r") as f:
        attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in f.attrs.items()}
        return {k: f["encoder"][k][...] for k in f["encoder"]}, attrs


# ------------------------------------------------------------ encode checks

def ref_ids(sp, text, eos=1):
    ids = sp.encode(spm_parity.wan_clean(text))
    return ids[:TEXT_LEN - 1] + [eos], max(0, len(ids) - (TEXT_LEN - 1))


def main():
    sp_bin, work, seed = spm_parity.driver_args()
    rnd = random.Random(seed)
    rng = np.random.default_rng(seed)
    umt5_ref.selftest()  # the reference's own checks first (buckets by hand, padding)

    prefix = spm_parity.train_t5_model(rnd, work, lines=3000, threads=2)
    corpus = os.path.join(work, "corpus.txt")  # its training text
    spm_path = prefix + ".model"
    sp = spm.SentencePieceProcessor(model_file=spm_path)
    tj_path = prefix + ".tokenizer.json"
    spm_parity.hf_tokenizer_json(spm_path, tj_path)
    with open(spm_path, "rb") as f:
        spm_bytes = f.read()

    c = dict(vocab=sp.get_piece_size() + 11, dim=64, dim_attn=64, ffn=96, heads=4, layers=3,
             buckets=32)
    w = make_weights(rng, c)

    # ---- convert: every form, every stored bit
    files = {}
    for form, tok, dtype in (("hf", spm_path, "fp32"), ("fp16", tj_path, "fp32"),
                             ("fp8", None, "fp32"), ("wan", spm_path, "fp32"),
                             ("wan", spm_path, "bf16")):
        ent, want = form_entries(w, form, spm_bytes)
        src = write_form(work, ent, form)
        out = os.path.join(work, "%s-%s.h5" % (form, dtype))
        args = [sp_bin, "convert", *src, "-o", out, "--dtype", dtype]
        if tok:
            args += ["--tokenizer", tok]
        r = run(args)
        check(r.returncode == 0, "convert %s (%s) exits 0" % (form, dtype))
        if r.returncode:
            continue
        files[(form, dtype)] = out
        got, attrs = stored(out)
        check(sorted(got) == sorted(want), "convert %s: the tensors stored are the table's" % form)
        bad = []
        for k, v in want.items():
            g = got.get(k)
            ref = stlib.bf16_rne(v) if dtype == "bf16" else v.astype(np.float32)
            if g is None or g.shape != ref.shape or not np.array_equal(g.view(ref.dtype), ref):
                bad.append(k)
        check(not bad, "convert %s (%s): every weight bit-exact against numpy%s"
              % (form, dtype, "" if not bad else ": " + ", ".join(bad[:5])))
        check(attrs.get("arch") == "umt5-xxl", "convert %s: arch umt5-xxl" % form)
        with h5py.File(out, "r") as f:
            t = f["tokenizer"]
            pieces = int(t["scores"].shape[0])
        check(pieces == sp.get_piece_size(), "convert %s: tokenizer of %d pieces stored" % (form, pieces))
    if ("hf", "fp32") in files and ("wan", "fp32") in files:
        a = stored(files[("hf", "fp32")])[1]["checksum"]
        b = stored(files[("wan", "fp32")])[1]["checksum"]
        check(a == b, "transformers and Wan keys of the same weights: same checksum (%s)" % a)

    model = files.get(("hf", "fp32"))
    if not model:
        return
    w64 = {k: v.astype(np.float64) for k, v in w.items()}

    # ---- encode: --prompts against the reference, the negative prompt included
    with open(corpus, encoding="utf-8") as f:
        lines = [l.strip() for l in f if l.strip()]
    # Over 512 tokens within run's 4095 bytes (a longer text is refused).
    long_prompt = ""
    while len((long_prompt + " " + lines[0]).encode()) < 4000:
        long_prompt = (long_prompt + " " + rnd.choice(lines)).strip()
    long_prompt = long_prompt.encode()[:4000].decode("utf-8", "ignore").strip()
    prompts = [rnd.choice(lines), "  a &amp; b\tc  " + rnd.choice(lines), "北京 " + rnd.choice(lines),
               long_prompt, "x"]
    pfile = os.path.join(work, "prompts.txt")
    with open(pfile, "w", encoding="utf-8") as f:
        f.write(prompts[0] + "\n\n" + "\n".join(prompts[1:]) + "\n")
    outdir = os.path.join(work, "conds")
    r = run([sp_bin, "encode", "--t5", model, "--prompts", pfile, "-o", outdir])
    check(r.returncode == 0, "encode --prompts exits 0")
    _, dropped = ref_ids(sp, long_prompt)
    check(dropped > 0 and ("%d tokens dropped" % dropped) in r.stderr,
          "the long prompt's warning says %d tokens were dropped" % dropped)
    neg_ids, _ = ref_ids(sp, WAN_NEG_PROMPT)
    neg_ref = umt5_ref.encode(w64, neg_ids)
    for i, p in enumerate(prompts):
        path = os.path.join(outdir, "cond_%05d.h5" % i)
        if not os.path.exists(path):
            check(False, "encode wrote %s" % path)
            continue
        ids, _ = ref_ids(sp, p)
        ref = umt5_ref.encode(w64, ids)
        with h5py.File(path, "r") as f:
            ctx, null = f["context"][...], f["context_null"][...]
            negp = f.attrs["negative_prompt"]
            negp = negp.decode() if isinstance(negp, bytes) else negp
        e = rel_l2(ctx, ref) if ctx.shape == ref.shape else float("inf")
        check(ctx.dtype == np.float32 and e <= 1e-5,
              "prompt %d (%d tokens): context %s against the reference, rel L2 %.2e"
              % (i, len(ids), ctx.shape, e))
        en = rel_l2(null, neg_ref) if null.shape == neg_ref.shape else float("inf")
        check(en <= 1e-5, "prompt %d: context_null (Wan's negative prompt) rel L2 %.2e" % (i, en))
        check(negp == WAN_NEG_PROMPT, "prompt %d: the default negative is Wan's (encode_prompt.py's)" % i)

    # ---- the fp8 file (tokenizer from its spiece_model tensor), one prompt
    if ("fp8", "fp32") in files:
        _, want8 = form_entries(w, "fp8", spm_bytes)
        out = os.path.join(work, "fp8.cond.h5")
        r = run([sp_bin, "encode", "--t5", files[("fp8", "fp32")], "--prompt", prompts[2],
                 "--negative", prompts[0], "-o", out])
        ids, _ = ref_ids(sp, prompts[2])
        ref = umt5_ref.encode({k: v.astype(np.float64) for k, v in want8.items()}, ids)
        ok = r.returncode == 0
        if ok:
            with h5py.File(out, "r") as f:
                e = rel_l2(f["context"][...], ref)
                en = rel_l2(f["context_null"][...],
                            umt5_ref.encode({k: v.astype(np.float64) for k, v in want8.items()},
                                            ref_ids(sp, prompts[0])[0]))
            ok = e <= 1e-5 and en <= 1e-5
            print("     fp8 model: rel L2 %.2e, negative %.2e" % (e, en))
        check(ok, "encode on the dequantised fp8 model matches the reference")

    # ---- a Wan-wide encoder (dim 4096, dim_attn 64 != dim): its cond file
    # against the reference, and run --cond reads it
    cw = dict(c, dim=4096, dim_attn=64, heads=4, ffn=32, layers=1)
    ww = make_weights(rng, cw)
    ent, _ = form_entries(ww, "wan", spm_bytes)
    wide_st = os.path.join(work, "wide.safetensors")
    stlib.write_st(wide_st, ent)
    wide = os.path.join(work, "wide.h5")
    r = run([sp_bin, "convert", wide_st, "--tokenizer", spm_path, "--dtype", "fp32", "-o", wide])
    cond = os.path.join(work, "wide.cond.h5")
    if r.returncode == 0:
        r = run([sp_bin, "encode", "--t5", wide, "--prompt", prompts[0], "-o", cond])
    ok = r.returncode == 0
    if ok:
        w64w = {k: v.astype(np.float64) for k, v in ww.items()}
        with h5py.File(cond, "r") as f:
            e = rel_l2(f["context"][...], umt5_ref.encode(w64w, ref_ids(sp, prompts[0])[0]))
            en = rel_l2(f["context_null"][...], umt5_ref.encode(w64w, neg_ids))
        print("     dim 4096 encoder: rel L2 %.2e, negative %.2e" % (e, en))
        ok = e <= 1e-5 and en <= 1e-5
    check(ok, "a dim-4096 encoder (dim_attn 64) matches the reference")
    if ok:
        lat = os.path.join(work, "lat.h5")
        r = run([sp_bin, "run", "--model", "synth:wan2.1-tiny", "--cond", cond, "--frames", "5",
                 "--size", "32x32", "--steps", "1", "--cfg", "5", "--no-preview", "-q", "-o", lat])
        check(r.returncode == 0 and os.path.exists(lat), "run --cond reads encode's file (with CFG)")

    # ---- reruns and thread counts: bit-identical
    outs = []
    for k, threads in enumerate(("1", "3", "1")):
        out = os.path.join(work, "det%d.h5" % k)
        r = run([sp_bin, "encode", "--t5", model, "--prompt", prompts[1], "-o", out],
                env={"OMP_NUM_THREADS": threads})
        if r.returncode == 0:
            with h5py.File(out, "r") as f:
                outs.append((f["context"][...].tobytes(), f["context_null"][...].tobytes()))
    check(len(outs) == 3 and outs[0] == outs[1] == outs[2],
          "encode bit-identical for 1 and 3 threads and a rerun")

    # ---- synth: specs and tokenizers: synth:umt5-tiny's built-in one, the same
    # model given with --tokenizer (the same context), one larger than its
    # vocabulary (refused), and an encoder without one
    tiny_model = os.path.join(SRC, "ranks", "text", "tiny", "spiece-tiny.model")
    tiny_n = len(ref_ids(spm.SentencePieceProcessor(model_file=tiny_model), prompts[0])[0])
    ctxs = []
    for k, extra in enumerate(([], ["--tokenizer", tiny_model])):
        out = os.path.join(work, "synth%d.h5" % k)
        r = run([sp_bin, "encode", "--t5", "synth:umt5-tiny:3", *extra, "--prompt", prompts[0],
                 "--no-negative", "-o", out])
        if r.returncode == 0:
            with h5py.File(out, "r") as f:
                ctx = f["context"][...]
                if ctx.shape == (tiny_n, 4096) and np.isfinite(ctx).all() \
                        and "context_null" not in f:
                    ctxs.append(ctx.tobytes())
    check(len(ctxs) == 2 and ctxs[0] == ctxs[1],
          "encode on synth:umt5-tiny (%d tokens, width 4096, --no-negative): its built-in "
          "tokenizer and --tokenizer spiece-tiny.model give the same context" % tiny_n)
    out = os.path.join(work, "synth_big.h5")
    r = run([sp_bin, "encode", "--t5", "synth:umt5-tiny:3", "--tokenizer", spm_path, "--prompt",
             prompts[0], "-o", out], want_rc=2)
    check(sp.get_piece_size() > 384 and r.returncode == 2 and "vocabulary" in r.stderr
          and not os.path.exists(out),
          "--tokenizer of %d pieces on synth:umt5-tiny (384 rows) refused" % sp.get_piece_size())
    r = run([sp_bin, "encode", "--t5", "synth:umt5-xxl", "--prompt", "a", "-o", out], want_rc=2)
    check(r.returncode == 2 and "tokenizer" in r.stderr,
          "synth:umt5-xxl (no built-in tokenizer) without --tokenizer refused")

    # ---- refusals
    bad_out = os.path.join(work, "bad.h5")
    r = run([sp_bin, "encode", "--t5", model, "--prompt", " \t ", "-o", bad_out], want_rc=2)
    check(r.returncode == 2 and "empty" in r.stderr and not os.path.exists(bad_out),
          "an empty prompt is refused, saying so")
    badp = os.path.join(work, "badutf8.txt")
    with open(badp, "wb") as f:
        f.write(b"a good line\nabc\xffdef\n")
    r = run([sp_bin, "encode", "--t5", model, "--prompts", badp, "-o", os.path.join(work, "bd")],
            want_rc=2)
    check(r.returncode == 2 and "badutf8.txt:2" in r.stderr and "byte 3" in r.stderr
          and not os.path.exists(os.path.join(work, "bd")),
          "invalid UTF-8 refused with its line and byte offset, no output directory left")
    damaged = os.path.join(work, "damaged.h5")
    shutil.copy(model, damaged)
    with h5py.File(damaged, "r") as f:
        off = f["encoder"]["blocks.1.attn.k.weight"].id.get_offset()
    with open(damaged, "r+b") as f:
        f.seek(off + 10)
        b = f.read(1)
        f.seek(off + 10)
        f.write(bytes([b[0] ^ 0x40]))
    r = run([sp_bin, "encode", "--t5", damaged, "--prompt", "a", "-o", bad_out], want_rc=2)
    check(r.returncode == 2 and "blocks.1.attn.k.weight" in r.stderr and "checksum" in r.stderr,
          "a damaged weight is refused, naming the dataset")
    trunc = os.path.join(work, "trunc.h5")
    with open(model, "rb") as f, open(trunc, "wb") as g:
        g.write(f.read(os.path.getsize(model) // 2))
    r = run([sp_bin, "encode", "--t5", trunc, "--prompt", "a", "-o", bad_out], want_rc=2)
    check(r.returncode == 2 and trunc in r.stderr, "a truncated model file is refused")
    for what, edit, want in (
            ("an extra dataset", lambda f: f["encoder"].create_dataset("extra", data=np.zeros(3)),
             "extra"),
            ("a config that cannot be", lambda f: f.attrs.modify("heads", np.int64(3)), "heads"),
            ("a missing tokenizer", lambda f: f.__delitem__("tokenizer"), "tokenizer")):
        bad_model = os.path.join(work, "edited.h5")
        shutil.copy(model, bad_model)
        with h5py.File(bad_model, "r+") as f:
            edit(f)
        r = run([sp_bin, "encode", "--t5", bad_model, "--prompt", "a", "-o", bad_out], want_rc=2)
        check(r.returncode == 2 and want in r.stderr and not os.path.exists(bad_out),
              "a model file with %s is refused, naming it" % what)
    vae = os.path.join(work, "vae.h5")
    run([sp_bin, "init", "--preset", "wan2.1-vae-tiny", "-o", vae])
    r = run([sp_bin, "encode", "--t5", vae, "--prompt", "a", "-o", bad_out], want_rc=2)
    check(r.returncode == 2 and "wan2.1-vae" in r.stderr and "umt5-xxl" in r.stderr,
          "a VAE file given as --t5 is named for what it is")
    ent, _ = form_entries(w, "wan", spm_bytes)
    miss = os.path.join(work, "missing.safetensors")
    stlib.write_st(miss, [e for e in ent if e[0] != "blocks.2.ffn.fc1.weight"])
    r = run([sp_bin, "convert", miss, "--tokenizer", spm_path, "-o", bad_out], want_rc=2)
    check(r.returncode == 2 and "blocks.2.ffn.fc1.weight" in r.stderr and not os.path.exists(bad_out),
          "convert names a missing tensor and writes nothing")
    r = run([sp_bin, "convert", miss.replace("missing", "wan"), "-o", bad_out], want_rc=2)
    check(r.returncode == 2 and "--tokenizer" in r.stderr, "convert without a tokenizer says --tokenizer")


if __name__ == "__main__":
    main()
    sys.exit(finish("t5_parity"))
