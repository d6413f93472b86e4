#!/usr/bin/env python3
"""init --arch umt5-tiny|umt5-xxl and inspect of text encoders.

usage: init_inspect.py STATICPIPE WORKDIR [SEED]

init of umt5-tiny (fp32, a SentencePiece model of at most 300 pieces
trained here on ASCII words as its tokenizer: it fits the preset's 384
rows) holds
synth:umt5-tiny:SEED's weights: encode on the file and on the synth: spec
(with --tokenizer) give bit-identical contexts; inspect
(--json) reports the arch, preset, config, the parameters and stored bytes
of the config's tensor table written out here, the tokenizer's pieces and
the checksum encode records; inspect --verify passes on the file and
fails (exit 2, naming the dataset) once a weight is changed behind its
checksum; synth:umt5-xxl's parameters match the published table; the
refusals (umt5-xxl without --tokenizer, which has no built-in one;
--layers). Exits 1 on any failure.
"""
import json
import os
import random
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import FAILS, check  # noqa: E402
import spm_parity  # noqa: E402
import sentencepiece as spm  # noqa: E402


def run(args):
    return subprocess.run(args, capture_output=True, text=True)


def params(c):
    d, a, f = c["dim"], c["dim_attn"], c["ffn"]
    layer = 2 * d + 4 * a * d + 3 * f * d + c["buckets"] * c["heads"]
    return c["vocab"] * d + c["layers"] * layer + d


def train_small(rnd, work):
    """A unigram model of at most 300 pieces with T5's special ids, trained
    on random lower-case ASCII words (few characters, so that 300 pieces
    cover them): its path."""
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w") as f:
        for _ in range(1500):
            f.write(" ".join("".join(rnd.choice("abcdefghijklmnopqrstuvwxyz")
                                     for _ in range(rnd.randint(2, 8)))
                             for _ in range(rnd.randint(4, 18))) + "\n")
    prefix = os.path.join(work, "spiece")
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, model_type="unigram",
                                   vocab_size=300, hard_vocab_limit=False, num_threads=1,
                                   minloglevel=2, pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    return prefix + ".model"


def main():
    sp_bin, work, seed = spm_parity.driver_args()
    rnd = random.Random(seed)
    tok = train_small(rnd, work)
    pieces = spm.SentencePieceProcessor(model_file=tok).get_piece_size()
    s = rnd.randrange(1000)
    t5 = os.path.join(work, "tiny.h5")
    r = run([sp_bin, "init", "--arch", "umt5-tiny", "--seed", str(s), "--dtype", "fp32",
             "--tokenizer", tok, "-q", "-o", t5])
    check(r.returncode == 0 and os.path.exists(t5), "init --arch umt5-tiny exits 0 " + r.stderr)
    if r.returncode:
        return 1
    prompt = " ".join(spm_parity.rand_word(rnd) for _ in range(6))
    outs = []
    for i, spec in enumerate((["--t5", t5], ["--t5", "synth:umt5-tiny:%d" % s, "--tokenizer", tok])):
        o = os.path.join(work, "c%d.h5" % i)
        r = run([sp_bin, "encode", *spec, "--prompt", prompt, "-o", o])
        if r.returncode == 0:
            with h5py.File(o, "r") as f:
                outs.append((f["context"][...].tobytes(), f["context_null"][...].tobytes(),
                             f.attrs["encoder_checksum"]))
    check(len(outs) == 2 and outs[0][:2] == outs[1][:2],
          "the init file encodes bit-identically to synth:umt5-tiny:%d" % s)

    c = dict(vocab=384, dim=4096, dim_attn=64, ffn=128, heads=4, layers=2, buckets=32,
             max_dist=128)
    r = run([sp_bin, "inspect", t5, "--json"])
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    want_ck = outs[0][2].decode() if outs and isinstance(outs[0][2], bytes) else (outs[0][2] if outs else None)
    check(j.get("arch") == "umt5-xxl" and j.get("preset") == "umt5-tiny" and j.get("dtype") == "fp32"
          and j.get("config") == c, "inspect --json: arch, preset, dtype, config")
    check(j.get("params") == params(c) and j.get("file_bytes") == 4 * params(c),
          "inspect --json: %s parameters, %s bytes (want %d, %d)"
          % (j.get("params"), j.get("file_bytes"), params(c), 4 * params(c)))
    check(j.get("tokenizer_pieces") == pieces and j.get("tensors") == 2 + 10 * c["layers"],
          "inspect --json: %s tokenizer pieces (want %d), %s tensors"
          % (j.get("tokenizer_pieces"), pieces, j.get("tensors")))
    check(j.get("checksum") == want_ck, "inspect's checksum is the one encode records")
    r = run([sp_bin, "inspect", t5])
    check(r.returncode == 0 and "text encoder" in r.stdout and "%d pieces" % pieces in r.stdout,
          "inspect (table) names a text encoder and its tokenizer")
    r = run([sp_bin, "inspect", "--verify", t5])
    check(r.returncode == 0, "inspect --verify passes on the init file")
    with h5py.File(t5, "r+") as f:
        d = f["encoder"]["blocks.1.ffn.fc1.weight"]
        v = d[0, 0]
        d[0, 0] = v + np.float32(1.0)
    r = run([sp_bin, "inspect", "--verify", t5])
    check(r.returncode == 2 and "blocks.1.ffn.fc1.weight" in r.stderr,
          "inspect --verify: a changed weight is named, exit 2 (%s)" % r.stderr.strip()[-160:])

    xxl = dict(vocab=256384, dim=4096, dim_attn=4096, ffn=10240, heads=64, layers=24, buckets=32)
    r = run([sp_bin, "inspect", "synth:umt5-xxl", "--json"])
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    check(j.get("params") == params(xxl), "synth:umt5-xxl: %s parameters (want %d)"
          % (j.get("params"), params(xxl)))

    bad = os.path.join(work, "bad.h5")
    for what, args, word in (("umt5-xxl, no --tokenizer", ["umt5-xxl"], "--tokenizer"),
                             ("umt5-tiny, --layers",
                              ["umt5-tiny", "--tokenizer", tok, "--layers", "3"], "--layers")):
        r = run([sp_bin, "init", "--arch", *args, "-o", bad])
        errs = [ln for ln in r.stderr.splitlines() if "error" in ln]
        check(r.returncode == 2 and len(errs) == 1 and word in errs[0] and not os.path.exists(bad),
              "init %s: exit 2, one line" % what)
    print("%d failure(s)" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
