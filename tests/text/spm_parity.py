#!/usr/bin/env python3
"""The C tokenizer against the sentencepiece library, on models trained here.

usage: spm_parity.py TOK_DRIVER WORKDIR [SEED]

Trains small unigram models (sentencepiece's default nmt_nfkc map, and
variants: byte fallback, user-defined and control symbols, case folding,
identity map with the whitespace flags off) on a corpus generated from the
seed, then checks on a corpus of hard strings and random strings that the
driver gives exactly the ids of SentencePieceProcessor.encode, for the
spiece.model and for a tokenizer.json written from the same model the way
Hugging Face's converter writes one. Then Wan's prompt path: the cleaning
against html.unescape and `regex` whitespace handling (Wan's tokenizers.py
without ftfy), EOS appended, truncation at 512 with the dropped count, and
the refusals (invalid UTF-8 with its byte offset). Exits 1 on any mismatch.
"""
import base64
import html
import json
import os
import random
import subprocess
import sys

import regex
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as spm_pb2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import sptest  # noqa: E402

CONTEXT = 512


def rand_word(rng):
    kind = rng.random()
    if kind < 0.45:
        syl = ["ka", "to", "ri", "ne", "sa", "mu", "lo", "vi", "de", "ph", "str", "qu", "an", "el"]
        w = "".join(rng.choice(syl) for _ in range(rng.randint(1, 4)))
        return w.capitalize() if rng.random() < 0.2 else w
    if kind < 0.55:
        return "".join(rng.choice("éèêëàâäôöüûçñßøåæœ") + rng.choice("aeiou") for _ in range(2))
    if kind < 0.70:
        return "".join(chr(rng.randint(0x4E00, 0x4EFF)) for _ in range(rng.randint(1, 3)))
    if kind < 0.78:
        return "".join(chr(rng.randint(0x3041, 0x3093)) for _ in range(rng.randint(1, 4)))
    if kind < 0.85:
        return "".join(chr(rng.randint(0x0430, 0x044F)) for _ in range(rng.randint(2, 6)))
    if kind < 0.92:
        return str(rng.randint(0, 99999))
    return rng.choice([",", ".", "!", "?", "(", ")", "-", "\"", "'", ":", ";", "ｆｕｌｌ", "①", "ﬁ"])


def driver_args():
    """A test driver's arguments (a binary, a work directory, an optional
    seed): the first two and the seed, a fresh one when none is given,
    printed with the SP_SEED that replays the run."""
    seed = sptest.seed(os.path.basename(sys.argv[0]), sys.argv[3] if len(sys.argv) > 3 else None)
    return sys.argv[1], sys.argv[2], seed


def train_t5_model(rng, work, lines, threads):
    """A unigram model of 600 pieces with T5's special ids (pad 0, eos 1,
    unk 2, no bos) trained on a corpus of `lines` random lines written to
    work/corpus.txt: its path prefix (PREFIX.model is the model)."""
    corpus = os.path.join(work, "corpus.txt")
    make_corpus(rng, corpus, lines=lines)
    prefix = os.path.join(work, "spiece")
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, model_type="unigram",
                                   vocab_size=600, hard_vocab_limit=False, num_threads=threads,
                                   minloglevel=2, pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    return prefix


def make_corpus(rng, path, lines=6000):
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(lines):
            f.write(" ".join(rand_word(rng) for _ in range(rng.randint(4, 18))) + "\n")


def hard_strings():
    s = [
        "", " ", "     ", "\t\n\r", "a", "the cat sat on the mat",
        "  leading and trailing spaces  ", "runs   of    spaces\t\tand\ttabs\n\nnewlines",
        "ＦＵＬＬＷＩＤＴＨ　ｌｅｔｔｅｒｓ　１２３！？", "ﬁ ﬂ ﬃ ㎏ ㍿ ① ⑳ Ⅻ ½ ² ℃ ™ ㈱",
        "e\u0301 a\u0308 n\u0303 o\u0302\u0323", "\u0301\u0308 leading combining",
        "한국어 텍스트 \u1100\u1161\u11a8", "北京欢迎你 中华人民共和国 東京都", "日本語のテキスト、カタカナ、ﾊﾝｶｸ",
        "emoji 😀😃🎉 👨\u200d👩\u200d👧 🇯🇵 👍🏽", "\x00\x01\x07\x1b\x7f control", "zero\u200bwidth\u200d\ufeffjoin",
        "\u3000ideographic\u3000space\u00a0nbsp\u2009thin", "▁ already ▁▁ escaped", "<unk> </s> <pad> <s>",
        "a" * 3000, "北" * 1500, "word" * 800, "x y " * 700, "\U0010FFFF \ue000 \ufffe \uffff",
        "Ǆ ǅ ǆ ϒ ϓ ẞ İ ı", "&amp; &lt;tag&gt; &#39;quoted&#39;", "Ω Å K µ ſ",
        "mixed北京words😀and１２３", "a\u0000b", "\u2028line\u2029para\u0085next", "\x1c\x1d\x1e\x1f",
        "extra_id <extra_id_0> cat北京cat", "UPPER lower MiXeD ÀÉÎÕÜ", "…‥‧·•", "①②③④⑤⑥⑦⑧⑨⑩",
    ]
    return s


def random_strings(rng, n):
    ranges = [(0x20, 0x7E), (0x00, 0x1F), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF),
              (0x2000, 0x206F), (0x2100, 0x21FF), (0x2460, 0x24FF), (0x3000, 0x30FF), (0x3200, 0x33FF),
              (0x4E00, 0x4EFF), (0xAC00, 0xAC40), (0xF900, 0xFAFF), (0xFB00, 0xFB4F), (0xFE30, 0xFE6F),
              (0xFF00, 0xFFEF), (0x1D400, 0x1D4FF), (0x1F300, 0x1F6FF), (0xE0000, 0xE007F)]
    out = []
    for _ in range(n):
        chars = []
        for _ in range(rng.randint(0, 40)):
            if rng.random() < 0.3:
                chars.append(" " * rng.randint(1, 3))
            else:
                lo, hi = rng.choice(ranges)
                chars.append(chr(rng.randint(lo, hi)))
        out.append("".join(chars))
    return out


def write_texts(path, texts):
    with open(path, "wb") as f:
        for t in texts:
            b = t if isinstance(t, bytes) else t.encode("utf-8")
            f.write(len(b).to_bytes(4, "little") + b)


def run_driver(driver, args, texts, work):
    path = os.path.join(work, "texts.bin")
    write_texts(path, texts)
    out = subprocess.run([driver] + args + ["--file", path], capture_output=True, check=False)
    if out.returncode != 0:
        sys.exit("FAIL: %s %s exited %d: %s" % (driver, args, out.returncode, out.stderr.decode()))
    lines = out.stdout.decode("utf-8").split("\n")
    if lines[-1] == "":
        lines.pop()
    if len(lines) != len(texts):
        sys.exit("FAIL: driver printed %d lines for %d texts" % (len(lines), len(texts)))
    return lines


def ids_line(ids):
    return " ".join(str(i) for i in ids)


def hf_tokenizer_json(model_path, out_path):
    """tokenizer.json as transformers' SpmConverter writes one for T5."""
    m = spm_pb2.ModelProto()
    with open(model_path, "rb") as f:
        m.ParseFromString(f.read())
    added = [{"id": i, "content": p.piece, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": p.type == 3}
             for i, p in enumerate(m.pieces) if p.type in (2, 3, 4)]
    normalizers = [{"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]
    if m.normalizer_spec.precompiled_charsmap:
        normalizers.insert(0, {"type": "Precompiled", "precompiled_charsmap":
                               base64.b64encode(m.normalizer_spec.precompiled_charsmap).decode()})
    scheme = "always" if m.normalizer_spec.add_dummy_prefix else "never"
    tj = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "WhitespaceSplit"},
            {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme, "split": True}]},
        "post_processor": {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}},
                                                                     {"SpecialToken": {"id": "</s>", "type_id": 0}}]},
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        "model": {"type": "Unigram", "unk_id": m.trainer_spec.unk_id,
                  "vocab": [[p.piece, p.score] for p in m.pieces],
                  "byte_fallback": m.trainer_spec.byte_fallback},
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)


def wan_clean(text):
    """Wan 2.1's whitespace_clean(basic_clean(text)) without ftfy.fix_text."""
    text = html.unescape(html.unescape(text)).strip()
    return regex.sub(r"\s+", " ", text).strip()


def main():
    driver, work, seed = driver_args()
    rng = random.Random(seed)
    corpus = os.path.join(work, "corpus.txt")
    make_corpus(rng, corpus)
    texts = hard_strings() + random_strings(rng, 1500)
    # Sentences of the training distribution too, so real pieces compete.
    with open(corpus, encoding="utf-8") as f:
        texts += [l.rstrip("\n") for l in f][:300]

    t5 = dict(pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    configs = {
        "t5": dict(vocab_size=1000, **t5),
        "bytes": dict(vocab_size=1400, byte_fallback=True, **t5),
        "userdef": dict(vocab_size=800, user_defined_symbols=["<extra_id_0>", "北京", "cat", "▁the"],
                        control_symbols=["<ctl>"]),
        "casefold": dict(vocab_size=900, normalization_rule_name="nmt_nfkc_cf", **t5),
        "identity": dict(vocab_size=700, normalization_rule_name="identity", add_dummy_prefix=False,
                         remove_extra_whitespaces=False, **t5),
    }
    failures = 0
    for name, cfg in configs.items():
        prefix = os.path.join(work, name)
        spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, model_type="unigram",
                                       hard_vocab_limit=False, num_threads=2, minloglevel=2, **cfg)
        sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
        want = [ids_line(sp.encode(t)) for t in texts]
        hfj = prefix + ".tokenizer.json"
        hf_tokenizer_json(prefix + ".model", hfj)
        # tokenizer.json cannot say remove_extra_whitespaces is off (its
        # import assumes it on, as T5 has it): that model is checked from
        # its spiece.model only.
        sources = [("spiece.model", prefix + ".model")]
        if cfg.get("remove_extra_whitespaces", True):
            sources.append(("tokenizer.json", hfj))
        for label, path in sources:
            got = run_driver(driver, [path], texts, work)
            bad = [i for i in range(len(texts)) if got[i] != want[i]]
            for i in bad[:5]:
                print("FAIL %s %s: %r\n  sentencepiece: %s\n  C:             %s" %
                      (name, label, texts[i][:80], want[i][:200], got[i][:200]))
            print("%-9s %-14s vocab %5d: %d/%d texts identical" %
                  (name, label, sp.get_piece_size(), len(texts) - len(bad), len(texts)))
            failures += len(bad)

    # Wan's prompt path on the T5-like model.
    sp = spm.SentencePieceProcessor(model_file=os.path.join(work, "t5.model"))
    prompts = texts + ["&amp;amp; &AMP &ampx; &notit; &#x41;&#65;&#0;&#128;&#xD800;&#x110000; &unknown; &#x;",
                       "&lt;b&gt;bold&lt;/b&gt; &nbsp;&nbsp;spaced&nbsp; &copy 2024 &NotEqualTilde;",
                       "  \x1c padded \u3000\u2003 prompt \x1f ", "a " * 600, "北京" * 400]
    cleaned = run_driver(driver, ["--clean"], prompts, work)
    bad = 0
    for t, c in zip(prompts, cleaned):
        if c != wan_clean(t):
            bad += 1
            if bad <= 5:
                print("FAIL clean %r\n  python: %r\n  C:      %r" % (t[:80], wan_clean(t)[:120], c[:120]))
    print("clean: %d/%d prompts identical" % (len(prompts) - bad, len(prompts)))
    failures += bad
    got = run_driver(driver, ["--prompt", os.path.join(work, "t5.model")], prompts, work)
    bad = 0
    for t, g in zip(prompts, got):
        ids = sp.encode(wan_clean(t))
        keep = ids[:CONTEXT - 1]
        w = ids_line(keep + [1]) + " | dropped %d" % (len(ids) - len(keep))
        if g != w:
            bad += 1
            if bad <= 5:
                print("FAIL prompt %r\n  python: %s\n  C:      %s" % (t[:80], w[:200], g[:200]))
    print("prompt: %d/%d prompts identical (EOS appended, cut at %d)" % (len(prompts) - bad, len(prompts), CONTEXT))
    failures += bad
    if not any(g.endswith("| dropped 0") is False for g in got):
        print("FAIL: no prompt was long enough to be truncated")
        failures += 1

    # Refusals: invalid UTF-8 with its byte offset.
    cases = [(b"abc\xff", 3), (b"ok \xc3\x28", 3), (b"\xed\xa0\x80 surrogate", 0), (b"\xf4\x90\x80\x80", 0),
             (b"trunc\xe2\x82", 5), (b"\xc0\xaf overlong", 0)]
    for data, off in cases:
        for args in (["--prompt", os.path.join(work, "t5.model")], [os.path.join(work, "t5.model")]):
            out = run_driver(driver, args, [data], work)[0]
            if "invalid UTF-8 at byte %d" % off not in out:
                print("FAIL: %r %s: expected 'invalid UTF-8 at byte %d', got %r" % (data, args[0], off, out))
                failures += 1
    print("invalid UTF-8: %d cases checked" % len(cases))
    if failures:
        sys.exit("FAIL: %d mismatches (seed %d)" % (failures, seed))
    print("ok")


if __name__ == "__main__":
    main()
