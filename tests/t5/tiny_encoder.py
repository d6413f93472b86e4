#!/usr/bin/env python3
"""The built-in tiny text encoder: umt5-tiny and its tokenizer.

usage: tiny_encoder.py STATICPIPE TOK_DRIVER WORKDIR [SEED]

`init --arch umt5-tiny` without --tokenizer writes a file whose tokenizer
is ranks/text/tiny/spiece-tiny.model: its pieces, scores and types equal
the sentencepiece library's reading of that file, and Wan's prompt ids
through the file's tokenizer and through synth:umt5-tiny's (tok_driver
--prompt) equal the library's ids of Wan's cleaned text, cut to 511 and
EOS appended, on a few prompts (words of the training corpus, unknown
characters, HTML entities, one longer than 512 tokens). `encode` on the
file (fp32) matches the float64 numpy reference (tests/ref/umt5_ref.py)
on the library's ids within 1e-5 relative L2, the prompt and Wan's
negative prompt, at the width 4096 that wan2.1-tiny and wan2.2-tiny take
as text_dim (inspect --json of both); synth:umt5-tiny:SEED encodes
bit-identically to the file. inspect counts the preset's parameters as the
tensor table written out here gives them (6,836,480; UMT5.md "Config")
and 320 tokenizer pieces, stored or built in, fewer than the 384 rows.
Exits 1 on any failure.
"""
import json
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from sptest import FAILS, SRC, check, rel_l2  # noqa: E402
import sptest  # noqa: E402
import spm_parity  # noqa: E402
import umt5_ref  # noqa: E402
from encode_prompt import WAN_NEG_PROMPT, TEXT_LEN  # noqa: E402
import sentencepiece as spm  # noqa: E402
from sentencepiece import sentencepiece_model_pb2 as spm_pb  # noqa: E402

TINY = os.path.join(SRC, "ranks", "text", "tiny", "spiece-tiny.model")
PROMPTS = [
    "a red fox running in the snow, cinematic, detailed.",
    "  Two  tigers\tdancing together, neon lighting,   golden colors.  ",
    "close up of a frozen robot &amp; a tiny dragon, &lt;slow motion&gt;",
    "北京 😀 Ωmega ÀÉÎ zebra-42 (surreal!)",
    " ".join(["the ancient lighthouse glowing near the harbor at dusk"] * 70),  # > 512 tokens
]


def run(args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True)


def wan_ids(sp, text):
    """Wan's prompt ids from the library: cleaned, cut to TEXT_LEN - 1, EOS."""
    ids = sp.encode(spm_parity.wan_clean(text))
    return ids[:TEXT_LEN - 1] + [sp.eos_id()]


def params(c):
    d, a, f = c["dim"], c["dim_attn"], c["ffn"]
    layer = 2 * d + 4 * a * d + 3 * f * d + c["buckets"] * c["heads"]
    return c["vocab"] * d + c["layers"] * layer + d


def main():
    sp_bin, driver, work = sys.argv[1], sys.argv[2], sys.argv[3]
    seed = sptest.seed(os.path.basename(sys.argv[0]), sys.argv[4] if len(sys.argv) > 4 else None)
    s = seed % 1000
    sp = spm.SentencePieceProcessor(model_file=TINY)
    proto = spm_pb.ModelProto()
    with open(TINY, "rb") as f:
        proto.ParseFromString(f.read())

    t5 = os.path.join(work, "t5.h5")
    r = run([sp_bin, "init", "--arch", "umt5-tiny", "--seed", s, "--dtype", "fp32", "-q", "-o", t5])
    check(r.returncode == 0 and os.path.exists(t5),
          "init --arch umt5-tiny without --tokenizer exits 0 " + r.stderr.strip())
    if r.returncode:
        return 1

    # ---- the stored tokenizer is spiece-tiny.model, as the library reads it
    with h5py.File(t5, "r") as f:
        g = f["tokenizer"]
        blob, off = g["piece_bytes"][...].tobytes(), g["piece_offsets"][...]
        pieces = [blob[off[i]:off[i + 1]].decode() for i in range(len(off) - 1)]
        scores, types = g["scores"][...], g["types"][...]
        ids = {k: int(g.attrs[k]) for k in ("unk_id", "eos_id", "pad_id", "bos_id")}
        has_map = "charsmap" in g
    n = sp.get_piece_size()
    check(pieces == [sp.id_to_piece(i) for i in range(n)],
          "the file's %d pieces are spiece-tiny.model's %d" % (len(pieces), n))
    check(np.array_equal(scores, np.array([p.score for p in proto.pieces], np.float32))
          and list(types) == [p.type for p in proto.pieces],
          "the file's scores and types are spiece-tiny.model's")
    check(ids == {"unk_id": sp.unk_id(), "eos_id": sp.eos_id(), "pad_id": sp.pad_id(),
                  "bos_id": sp.bos_id()} and not has_map,
          "special ids %s as the library's; no normalisation map (identity)" % ids)

    # ---- Wan's prompt ids: the file's and synth:'s tokenizer against the library
    for spec in (t5, "synth:umt5-tiny:%d" % s):
        got = spm_parity.run_driver(driver, ["--prompt", spec], PROMPTS, work)
        want = ["%s | dropped %d" % (spm_parity.ids_line(wan_ids(sp, p)),
                                     max(0, len(sp.encode(spm_parity.wan_clean(p))) - TEXT_LEN + 1))
                for p in PROMPTS]
        bad = [i for i in range(len(PROMPTS)) if got[i] != want[i]]
        check(not bad, "%s: Wan's prompt ids equal the sentencepiece library's on %d prompts%s"
              % ("the init file" if spec == t5 else spec, len(PROMPTS),
                 "" if not bad else " (prompt %d: %s against %s)" % (bad[0], got[bad[0]][:80],
                                                                    want[bad[0]][:80])))

    # ---- encode against the numpy reference, at the DiT's text width
    with h5py.File(t5, "r") as f:
        w = {k: f["encoder"][k][...].astype(np.float64) for k in f["encoder"]}
    conds = []
    for k, spec in enumerate((t5, "synth:umt5-tiny:%d" % s)):
        out = os.path.join(work, "c%d.h5" % k)
        r = run([sp_bin, "encode", "--t5", spec, "--prompt", PROMPTS[0], "-o", out])
        if r.returncode == 0:
            with h5py.File(out, "r") as f:
                conds.append((f["context"][...], f["context_null"][...]))
    check(len(conds) == 2, "encode on the file and on synth:umt5-tiny:%d exit 0" % s)
    if len(conds) == 2:
        e = rel_l2(conds[0][0], umt5_ref.encode(w, wan_ids(sp, PROMPTS[0])))
        en = rel_l2(conds[0][1], umt5_ref.encode(w, wan_ids(sp, WAN_NEG_PROMPT)))
        check(conds[0][0].shape == (len(wan_ids(sp, PROMPTS[0])), 4096) and e <= 1e-5
              and en <= 1e-5,
              "encode %s against the float64 reference: rel L2 %.2e, negative %.2e (<= 1e-5)"
              % (conds[0][0].shape, e, en))
        check(all(a.tobytes() == b.tobytes() for a, b in zip(conds[0], conds[1])),
              "synth:umt5-tiny:%d encodes bit-identically to its init file" % s)

    # ---- the widths agree; the counts
    for dit in ("synth:wan2.1-tiny", "synth:wan2.2-tiny"):
        r = run([sp_bin, "inspect", dit, "--json"])
        td = json.loads(r.stdout)["config"]["text_dim"] if r.returncode == 0 else None
        check(td == 4096, "%s takes text_dim %s, umt5-tiny's width" % (dit, td))
    for spec, how in ((t5, "stored"), ("synth:umt5-tiny", "built in")):
        r = run([sp_bin, "inspect", spec, "--json"])
        j = json.loads(r.stdout) if r.returncode == 0 else {}
        c = j.get("config", {})
        check(c.get("dim") == 4096 and j.get("params") == params(c) == 6836480
              and j.get("tokenizer_pieces") == n == 320 < c.get("vocab", 0),
              "inspect %s: width %s, %s parameters (want 6836480), %s tokenizer pieces (%s) "
              "within %s rows" % (spec, c.get("dim"), j.get("params"), j.get("tokenizer_pieces"),
                                  how, c.get("vocab")))
        r = run([sp_bin, "inspect", spec])
        check(r.returncode == 0 and "320 pieces (%s)" % how in r.stdout,
              "inspect %s says its tokenizer is %s" % (spec, how))
    print("%d failure(s)" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
