#!/usr/bin/env python3
"""run --t5 T5 --prompt P against encode --prompt P then run --cond.

usage: run_prompt.py STATICPIPE WORKDIR [SEED]

Trains a small SentencePiece model, draws a random encoder of width 4096
(the tiny DiT's text_dim; dim_attn 64, one layer) and converts it. Then:
`run --t5 --prompt P` gives latents bit-identical to `encode --prompt P -o
c.h5` then `run --cond c.h5` (the reference is the one-process cond run),
under one process and `mpirun -np 2`, with Wan's negative prompt, with
--negative and with --cfg 1, and the same with synth:umt5-tiny (the
built-in tiny encoder, its tokenizer inside, no file at all); a --jobs file mixing prompt= lines (quoted,
with a quote, a '#' and a negative inside) and a cond= line gives each
line's separate result, and a line whose prompt is blank after Wan's
cleaning fails alone; bad input (--prompt without --t5, --t5 with --cond,
an empty or blank prompt, an encoder without a tokenizer (synth:umt5-xxl)
or of another width) exits 2 with one error line before any work. Exits 1 on a failure.
"""
import json
import os
import random
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import sptest  # noqa: E402
from sptest import FAILS, check  # noqa: E402
import spm_parity  # noqa: E402
import stlib  # noqa: E402
import t5_parity  # noqa: E402
import sentencepiece as spm  # noqa: E402

# SP_DEVICE=cuda (tests/gpu/test_gpu_prompt.sh): encode and run on the GPU,
# where run --prompt encodes as encode --device cuda does.
DEV = ["--device", os.environ.get("SP_DEVICE", "cpu")]
RUN = ["--model", "synth:wan2.1-tiny", "--frames", "5", "--size", "32x32", "--steps", "2",
       "--no-preview", "-q", *DEV]


def run(args, want_rc=0, mpi=0):
    return sptest.run(args, expect=want_rc, ranks=mpi or 1, fatal=False)


def latents(path):
    if not os.path.exists(path):
        return None
    with h5py.File(path, "r") as f:
        return f["latents"][...].tobytes()


def make_encoder(sp_bin, work, rnd, rng, dim, name):
    c = dict(vocab=SP_PIECES[0] + 11, dim=dim, dim_attn=64, ffn=32, heads=4, layers=1,
             buckets=32)
    ent, _ = t5_parity.form_entries(t5_parity.make_weights(rng, c), "wan", b"")
    st = os.path.join(work, name + ".safetensors")
    stlib.write_st(st, ent)
    out = os.path.join(work, name + ".h5")
    r = run([sp_bin, "convert", st, "--tokenizer", SPM[0], "-o", out])
    return out if r.returncode == 0 else None


SP_PIECES, SPM = [0], [""]


def main():
    sp_bin, work, seed = spm_parity.driver_args()
    rnd = random.Random(seed)
    rng = np.random.default_rng(seed)
    prefix = spm_parity.train_t5_model(rnd, work, lines=1500, threads=1)
    SPM[0] = prefix + ".model"
    SP_PIECES[0] = spm.SentencePieceProcessor(model_file=SPM[0]).get_piece_size()
    t5 = make_encoder(sp_bin, work, rnd, rng, 4096, "t5")
    check(t5 is not None, "convert a width-4096 encoder")
    if not t5:
        return 1
    words = [spm_parity.rand_word(rnd) for _ in range(12)]
    prompt = " ".join(words[:8])
    negative = " ".join(words[8:])
    p = lambda name: os.path.join(work, name)  # noqa: E731

    # ---- the reference: encode, then run --cond (one process)
    cases = [("cfg", ["--cfg", "5"], [], []),
             ("neg", ["--cfg", "5"], ["--negative", negative], ["--negative", negative]),
             ("cfg1", ["--cfg", "1"], ["--no-negative"], [])]
    for name, cfg, enc_extra, run_extra in cases:
        cond = p(name + ".cond.h5")
        r = run([sp_bin, "encode", *DEV, "--t5", t5, "--prompt", prompt, *enc_extra, "-o", cond])
        ref = p(name + ".ref.h5")
        if r.returncode == 0:
            run([sp_bin, "run", *RUN, *cfg, "--cond", cond, "-o", ref])
        want = latents(ref)
        check(want is not None, "%s: encode then run --cond" % name)
        for np_ in (0, 2):
            out = p("%s.prompt%d.h5" % (name, np_))
            r = run([sp_bin, "run", *RUN, *cfg, "--t5", t5, "--prompt", prompt, *run_extra,
                     "-o", out], mpi=np_)
            got = latents(out)
            check(r.returncode == 0 and got is not None and got == want,
                  "%s: run --t5 --prompt (%s) bit-identical to encode + run --cond"
                  % (name, "mpirun -np 2" if np_ else "one process"))

    # ---- the built-in tiny encoder: synth:umt5-tiny carries its tokenizer and
    # encodes to the tiny DiT's width, so a prompt needs no file at all
    tiny = "synth:umt5-tiny:%d" % rnd.randrange(1000)
    tcond, tref = p("tiny.cond.h5"), p("tiny.ref.h5")
    r = run([sp_bin, "encode", *DEV, "--t5", tiny, "--prompt", prompt, "-o", tcond])
    if r.returncode == 0:
        run([sp_bin, "run", *RUN, "--cfg", "5", "--cond", tcond, "-o", tref])
    want = latents(tref)
    check(want is not None, "%s: encode (its built-in tokenizer) then run --cond" % tiny)
    for np_ in (0, 2):
        out = p("tiny.prompt%d.h5" % np_)
        r = run([sp_bin, "run", *RUN, "--cfg", "5", "--t5", tiny, "--prompt", prompt, "-o", out],
                mpi=np_)
        got = latents(out)
        check(r.returncode == 0 and got is not None and got == want,
              "%s: run --t5 --prompt (%s) bit-identical to encode + run --cond"
              % (tiny, "mpirun -np 2" if np_ else "one process"))

    # ---- --jobs: prompt= lines (quoted), a cond= line, a blank prompt
    tricky = 'say "hi" # not a comment ' + words[0]
    tcond = p("tricky.cond.h5")
    run([sp_bin, "encode", *DEV, "--t5", t5, "--prompt", tricky, "-o", tcond])
    tref = p("tricky.ref.h5")
    run([sp_bin, "run", *RUN, "--cond", tcond, "-o", tref])
    jobs = p("jobs.txt")
    def esc(text):  # a jobs line's quoted value: \ and " escaped
        return text.replace("\\", "\\\\").replace('"', '\\"')
    with open(jobs, "w") as f:
        f.write('prompt="%s" out=%s   # the first\n' % (esc(tricky), p("j1.h5")))
        f.write("cond=%s out=%s\n" % (p("cfg.cond.h5"), p("j2.h5")))
        f.write('prompt="   " out=%s\n' % p("j3.h5"))
        f.write('prompt="%s" negative="%s" out=%s\n' % (esc(prompt), esc(negative), p("j4.h5")))
        f.write('prompt="%s" cfg=1 out=%s\n' % (esc(prompt), p("j5.h5")))
    for np_ in (0, 2):
        for k in range(1, 6):
            if os.path.exists(p("j%d.h5" % k)):
                os.remove(p("j%d.h5" % k))
        r = run([sp_bin, "run", *RUN, "--t5", t5, "--jobs", jobs, "--json"], want_rc=None,
                mpi=np_)
        how = "mpirun -np 2" if np_ else "one process"
        done = {}
        for ln in r.stdout.splitlines():
            j = json.loads(ln).get("job")
            if j:
                done[j["line"]] = j
        check(done.get(1, {}).get("prompt") == tricky and
              done.get(4, {}).get("prompt") == prompt and
              done.get(4, {}).get("negative") == negative and
              "prompt" not in done.get(2, {"prompt": 1}),
              "--jobs --json (%s): a prompt line's JSON echoes its prompt and negative" % how)
        check(r.returncode != 0 and "jobs.txt:3" in r.stderr and not os.path.exists(p("j3.h5")),
              "--jobs (%s): the blank prompt's line fails alone, named" % how)
        check(latents(p("j1.h5")) == latents(tref) and latents(tref) is not None,
              "--jobs (%s): a quoted prompt= (a quote and '#' inside) equals its own runs" % how)
        check(latents(p("j2.h5")) == latents(p("cfg.ref.h5")),
              "--jobs (%s): a cond= line beside prompt= lines" % how)
        check(latents(p("j4.h5")) == latents(p("neg.ref.h5")),
              "--jobs (%s): prompt= with negative=" % how)
        check(latents(p("j5.h5")) == latents(p("cfg1.ref.h5")),
              "--jobs (%s): prompt= with cfg=1" % how)

    # ---- bad input: exit 2, one error line, nothing written, before any work
    narrow = make_encoder(sp_bin, work, rnd, rng, 64, "narrow")
    out = p("bad.h5")
    bad = [("--prompt without --t5", ["--prompt", prompt], "--t5"),
           ("--t5 with --cond", ["--t5", t5, "--cond", p("cfg.cond.h5"), "--prompt", prompt],
            "--cond"),
           ("--t5 with --cond only", ["--t5", t5, "--cond", p("cfg.cond.h5")], "--cond"),
           ("an empty --prompt", ["--t5", t5, "--prompt", ""], "empty"),
           ("a blank --prompt", ["--t5", t5, "--prompt", "  \t "], "empty"),
           ("--negative without --prompt", ["--cond", p("cfg.cond.h5"), "--negative", "x"],
            "--negative"),
           ("an encoder without a tokenizer", ["--t5", "synth:umt5-xxl", "--prompt", prompt],
            "tokenizer"),
           ("an encoder of another width", ["--t5", narrow or "missing.h5", "--prompt", prompt],
            "text_dim"),
           ("a missing --t5 file", ["--t5", p("nope.h5"), "--prompt", prompt], "nope.h5")]
    for what, args, word in bad:
        r = run([sp_bin, "run", *RUN, *args, "-o", out], want_rc=None)
        errs = [ln for ln in r.stderr.splitlines() if "error" in ln.lower()]
        check(r.returncode == 2 and len(errs) == 1 and word in errs[0] and
              not os.path.exists(out) and "loading" not in r.stderr,
              "%s: exit 2, one line naming %s, nothing written (%s)"
              % (what, word, errs[0].strip() if errs else "no error line"))
    print("%d failure(s)" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
