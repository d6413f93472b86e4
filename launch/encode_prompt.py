#!/usr/bin/env python3
"""Make a `--cond` file for `staticpipe run` from a text prompt.

    python3 launch/encode_prompt.py --prompt "a red fox in the snow" -o cond.h5
    staticpipe run --model wan14b.h5 --cond cond.h5 ... -o latents.h5

Encodes the prompt (and the negative prompt, for classifier-free guidance)
with the UMT5-XXL text encoder that Wan 2.1 uses, the way the published
pipeline does it (wan/modules/t5.py, wan/text2video.py):

  * text cleaned (ftfy.fix_text when installed, HTML unescaped twice,
    whitespace runs collapsed), tokenized with the google/umt5-xxl tokenizer
    with its end-of-sequence token, padded/truncated to 512 tokens with an
    attention mask;
  * the encoder runs in bf16 (the published t5_dtype; --dtype fp32 for more
    precision) over the masked 512-token sequence;
  * the output is trimmed to the real tokens (L = tokens of the prompt
    including the end token, at most 512), as the published pipeline does;
    the engine zero-pads it to 512 rows itself.

Output (HDF5, written to a temporary file in the same folder, then renamed):
  context       float32 [L, 4096]       the prompt
  context_null  float32 [L_neg, 4096]   the negative prompt (absent with
                                        --no-negative; `run --cfg 1` needs none)
  root attributes: prompt, negative_prompt, encoder, encoder_dtype, tokens,
                   tokens_null

--encoder accepts:
  * a Wan 2.1 checkpoint folder (holding models_t5_umt5-xxl-enc-bf16.pth and
    the tokenizer in google/umt5-xxl/), or that .pth file itself;
  * a transformers UMT5EncoderModel folder (config.json + weights), or a
    diffusers Wan folder (text_encoder/ + tokenizer/);
  * a Hugging Face hub id of any of these (downloaded with huggingface_hub);
    the default, Wan-AI/Wan2.1-T2V-14B, is the published Wan 2.1 repository
    (the 1.3B repository holds the same text encoder).
The tokenizer comes from the same place when it has one, else from
--tokenizer (default google/umt5-xxl).

Needs: torch, transformers (tokenizer, and the encoder class for transformers
folders), sentencepiece, h5py, numpy; huggingface_hub for hub ids; ftfy
optional. `--help` works without any of them. Exit status: 0 done, 2 bad
arguments or input, 1 failure while loading or encoding.
"""

import argparse
import html
import os
import re
import sys

from atomic_write import atomic_path

WAN_T5_FILE = "models_t5_umt5-xxl-enc-bf16.pth"
WAN_TOKENIZER_SUBDIR = "google/umt5-xxl"
DEFAULT_ENCODER = "Wan-AI/Wan2.1-T2V-14B"
DEFAULT_TOKENIZER = "google/umt5-xxl"
TEXT_LEN = 512            # Wan 2.1 text_len
TEXT_DIM = 4096           # Wan 2.1 text_dim (UMT5-XXL d_model)
# Wan 2.1's default negative prompt (wan/configs/shared_config.py,
# sample_neg_prompt), used by the published pipeline when none is given.
WAN_NEG_PROMPT = (
    "色调艳丽，过曝，静态，细节模糊不清，字幕，风格，作品，画作，画面，静止，整体发灰，"
    "最差质量，低质量，JPEG压缩残留，丑陋的，残缺的，多余的手指，画得不好的手部，"
    "画得不好的脸部，畸形的，毁容的，形态畸形的肢体，手指融合，静止不动的画面，"
    "杂乱的背景，三条腿，背景人很多，倒着走")

EXIT_RUNTIME = 1
EXIT_INPUT = 2


class InputError(Exception):
    """Bad arguments or input files: exit 2."""


class RuntimeFailure(Exception):
    """Loading or running the encoder failed: exit 1."""


def log(msg):
    print("encode_prompt: " + msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------ text

def clean_text(text):
    """The published 'whitespace' cleaning: ftfy fix, HTML unescape twice,
    whitespace runs to one space, stripped."""
    try:
        import ftfy
        text = ftfy.fix_text(text)
    except ImportError:
        pass  # ftfy only repairs mojibake; plain text is unchanged by it
    text = html.unescape(html.unescape(text)).strip()
    return re.sub(r"\s+", " ", text).strip()


# ------------------------------------------------------------ output

def write_cond(path, context, context_null, attrs):
    """Write context (L, 4096) and optional context_null as float32 into
    `path` atomically: a temporary file beside it, then os.replace."""
    import numpy as np
    import h5py
    arrays = {"context": context}
    if context_null is not None:
        arrays["context_null"] = context_null
    for name, a in arrays.items():
        if a.ndim != 2 or not (1 <= a.shape[0] <= TEXT_LEN) or a.shape[1] != TEXT_DIM:
            raise RuntimeFailure("%s has shape %s, expected (L, %d) with 1 <= L <= %d"
                                 % (name, a.shape, TEXT_DIM, TEXT_LEN))
        if not np.isfinite(a).all():
            raise RuntimeFailure("%s holds non-finite values (encoder overflow?)" % name)
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        for name, a in arrays.items():
            f.create_dataset(name, data=np.ascontiguousarray(a, dtype=np.float32))
        for k, v in attrs.items():
            f.attrs[k] = v


# ------------------------------------------------------------ the Wan-layout encoder

def make_wan_t5(torch):
    """The UMT5 encoder in the layout of Wan's models_t5_umt5-xxl-enc-bf16.pth
    (keys token_embedding.weight, blocks.N.{norm1,attn.{q,k,v,o},norm2,
    ffn.{gate.0,fc1,fc2},pos_embedding.embedding}.weight, norm.weight): T5
    pre-norm blocks without biases, unscaled attention with a per-layer
    bidirectional relative-position bias (32 buckets, max distance 128), and
    a GELU(tanh)-gated feed-forward."""
    import math
    nn = torch.nn
    F = torch.nn.functional

    class Norm(nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x):  # x (B, L, D); statistics in fp32
            x = x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
            if self.weight.dtype in (torch.float16, torch.bfloat16):
                x = x.type_as(self.weight)
            return self.weight * x

    class RelPosBias(nn.Module):
        def __init__(self, buckets, heads, max_dist=128):
            super().__init__()
            self.buckets, self.max_dist = buckets, max_dist
            self.embedding = nn.Embedding(buckets, heads)

        def forward(self, n):
            dev = self.embedding.weight.device
            rel = torch.arange(n, device=dev)[None, :] - torch.arange(n, device=dev)[:, None]
            half = self.buckets // 2          # bidirectional: half per sign
            bucket = (rel > 0).long() * half
            rel = rel.abs()
            exact = half // 2                 # small distances get a bucket each
            far = exact + (torch.log(rel.float().clamp(min=1) / exact)
                           / math.log(self.max_dist / exact) * (half - exact)).long()
            far = far.clamp(max=half - 1)
            bucket = bucket + torch.where(rel < exact, rel, far)
            return self.embedding(bucket).permute(2, 0, 1).unsqueeze(0)  # (1, H, n, n)

    class Attention(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.heads = heads
            self.q = nn.Linear(dim, dim, bias=False)
            self.k = nn.Linear(dim, dim, bias=False)
            self.v = nn.Linear(dim, dim, bias=False)
            self.o = nn.Linear(dim, dim, bias=False)

        def forward(self, x, mask, bias):
            # x (B, L, D); mask (B, L) 1 = token; bias (1, H, L, L)
            b, n, d = x.shape
            h = self.heads

            def split(t):
                return t.view(b, n, h, d // h).transpose(1, 2)   # (B, H, L, hd)
            q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
            bias = bias.to(x.dtype).expand(b, -1, -1, -1).clone()
            bias.masked_fill_(mask[:, None, None, :] == 0, torch.finfo(x.dtype).min)
            s = q @ k.transpose(-1, -2) + bias                   # T5: no 1/sqrt(hd)
            p = F.softmax(s.float(), dim=-1).type_as(s)
            return self.o((p @ v).transpose(1, 2).reshape(b, n, d))

    class FeedForward(nn.Module):
        def __init__(self, dim, ffn):
            super().__init__()
            self.gate = nn.Sequential(nn.Linear(dim, ffn, bias=False), nn.GELU(approximate="tanh"))
            self.fc1 = nn.Linear(dim, ffn, bias=False)
            self.fc2 = nn.Linear(ffn, dim, bias=False)

        def forward(self, x):
            return self.fc2(self.fc1(x) * self.gate(x))

    class Block(nn.Module):
        def __init__(self, dim, ffn, heads, buckets):
            super().__init__()
            self.norm1 = Norm(dim)
            self.attn = Attention(dim, heads)
            self.norm2 = Norm(dim)
            self.ffn = FeedForward(dim, ffn)
            self.pos_embedding = RelPosBias(buckets, heads)

        def forward(self, x, mask):
            x = x + self.attn(self.norm1(x), mask, self.pos_embedding(x.shape[1]))
            return x + self.ffn(self.norm2(x))

    class Encoder(nn.Module):
        def __init__(self, vocab, dim, ffn, heads, layers, buckets):
            super().__init__()
            self.token_embedding = nn.Embedding(vocab, dim)
            self.blocks = nn.ModuleList([Block(dim, ffn, heads, buckets) for _ in range(layers)])
            self.norm = Norm(dim)

        def forward(self, ids, mask):  # ids, mask (B, L) -> (B, L, D)
            x = self.token_embedding(ids)
            for blk in self.blocks:
                x = blk(x, mask)
            return self.norm(x)

    return Encoder


def load_wan_t5(torch, path, dtype, device):
    """Build the encoder from the shapes in a Wan-layout state dict and load
    it strictly (every key present, none left over)."""
    try:
        try:
            sd = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError:  # an old non-zip .pth cannot be memory-mapped
            sd = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise RuntimeFailure("cannot read %s: %s" % (path, exc))
    if not isinstance(sd, dict) or "token_embedding.weight" not in sd:
        raise InputError("%s is not a Wan UMT5 encoder checkpoint (no token_embedding.weight); "
                         "for a transformers model pass its folder instead" % path)
    try:
        vocab, dim = sd["token_embedding.weight"].shape
        layers = 1 + max(int(k.split(".")[1]) for k in sd if k.startswith("blocks."))
        ffn = sd["blocks.0.ffn.fc1.weight"].shape[0]
        buckets, heads = sd["blocks.0.pos_embedding.embedding.weight"].shape
    except (KeyError, ValueError) as exc:
        raise InputError("%s: unexpected Wan UMT5 layout (%s)" % (path, exc))
    if dim % heads:
        raise InputError("%s: dim %d is not a multiple of heads %d" % (path, dim, heads))
    Encoder = make_wan_t5(torch)
    with torch.device("meta"):
        model = Encoder(vocab, dim, ffn, heads, layers, buckets)
    try:
        model.load_state_dict(sd, strict=True, assign=True)
    except RuntimeError as exc:
        raise InputError("%s: keys or shapes do not match the Wan UMT5 encoder: %s"
                         % (path, str(exc)[:500]))
    log("loaded %s: %d layers, dim %d, ffn %d, %d heads" % (path, layers, dim, ffn, heads))
    return model.to(device=device, dtype=dtype).eval().requires_grad_(False)


# ------------------------------------------------------------ resolving --encoder

def _has_tokenizer(d):
    return any(os.path.isfile(os.path.join(d, f)) for f in
               ("tokenizer.json", "spiece.model", "tokenizer_config.json"))


def resolve_encoder(spec, tokenizer):
    """-> dict(kind='wan', path=..., tok=(src, subfolder)) or
          dict(kind='hf', src=..., sub=..., tok=(src, subfolder))."""
    default_tok = (tokenizer or DEFAULT_TOKENIZER, None)
    if os.path.isfile(spec):
        sib = os.path.join(os.path.dirname(os.path.abspath(spec)), WAN_TOKENIZER_SUBDIR)
        tok = (sib, None) if tokenizer is None and _has_tokenizer(sib) else default_tok
        return dict(kind="wan", path=spec, tok=tok)
    if os.path.isdir(spec):
        if os.path.isfile(os.path.join(spec, WAN_T5_FILE)):
            sib = os.path.join(spec, WAN_TOKENIZER_SUBDIR)
            tok = (sib, None) if tokenizer is None and _has_tokenizer(sib) else default_tok
            return dict(kind="wan", path=os.path.join(spec, WAN_T5_FILE), tok=tok)
        if os.path.isfile(os.path.join(spec, "text_encoder", "config.json")):
            tk = os.path.join(spec, "tokenizer")
            tok = (tk, None) if tokenizer is None and _has_tokenizer(tk) else default_tok
            return dict(kind="hf", src=spec, sub="text_encoder", tok=tok)
        if os.path.isfile(os.path.join(spec, "config.json")):
            tok = (spec, None) if tokenizer is None and _has_tokenizer(spec) else default_tok
            return dict(kind="hf", src=spec, sub=None, tok=tok)
        raise InputError("--encoder %s: folder holds neither %s, text_encoder/config.json "
                         "nor config.json" % (spec, WAN_T5_FILE))
    if spec.startswith((".", "/", "~")) or spec.count("/") != 1:
        raise InputError("--encoder %s: no such file or folder (and not a hub id owner/name)"
                         % spec)
    return resolve_hub(spec, tokenizer, default_tok)


def resolve_hub(repo, tokenizer, default_tok):
    try:
        import huggingface_hub as hub
    except ImportError:
        raise InputError("--encoder %s looks like a hub id, but huggingface_hub is not "
                         "installed (pip install huggingface_hub) - or pass a local path" % repo)
    try:
        files = set(hub.list_repo_files(repo))
    except Exception as exc:
        raise RuntimeFailure("cannot list hub repository %s: %s" % (repo, exc))
    try:
        if WAN_T5_FILE in files:
            log("downloading %s from %s (about 11 GB, cached afterwards)" % (WAN_T5_FILE, repo))
            path = hub.hf_hub_download(repo, WAN_T5_FILE)
            tok = default_tok
            if tokenizer is None and any(f.startswith(WAN_TOKENIZER_SUBDIR + "/") for f in files):
                root = hub.snapshot_download(repo, allow_patterns=[WAN_TOKENIZER_SUBDIR + "/*"])
                tok = (os.path.join(root, WAN_TOKENIZER_SUBDIR), None)
            return dict(kind="wan", path=path, tok=tok)
    except Exception as exc:
        raise RuntimeFailure("cannot download from %s: %s" % (repo, exc))
    if "text_encoder/config.json" in files:
        tok = ((repo, "tokenizer") if tokenizer is None and
               any(f.startswith("tokenizer/") for f in files) else default_tok)
        return dict(kind="hf", src=repo, sub="text_encoder", tok=tok)
    if "config.json" in files:
        has_tok = any(f in files for f in ("tokenizer.json", "spiece.model", "tokenizer_config.json"))
        tok = (repo, None) if tokenizer is None and has_tok else default_tok
        return dict(kind="hf", src=repo, sub=None, tok=tok)
    raise InputError("--encoder %s: hub repository has neither %s, text_encoder/ nor config.json"
                     % (repo, WAN_T5_FILE))


# ------------------------------------------------------------ encoding

class Encoder:
    def __init__(self, torch, where, dtype, device):
        self.torch = torch
        self.device = device
        try:
            from transformers import AutoTokenizer
        except ImportError:
            raise InputError("transformers is not installed (pip install transformers sentencepiece)")
        src, sub = where["tok"]
        try:
            kw = {"subfolder": sub} if sub else {}
            self.tokenizer = AutoTokenizer.from_pretrained(src, **kw)
        except Exception as exc:
            raise RuntimeFailure("cannot load the tokenizer from %s%s: %s"
                                 % (src, "/" + sub if sub else "", exc))
        if where["kind"] == "wan":
            self.kind = "wan"
            self.model = load_wan_t5(torch, where["path"], dtype, device)
            self.name = where["path"]
        else:
            self.kind = "hf"
            try:
                from transformers import UMT5EncoderModel
                kw = {"subfolder": where["sub"]} if where["sub"] else {}
                self.model = UMT5EncoderModel.from_pretrained(where["src"], torch_dtype=dtype, **kw)
            except Exception as exc:
                raise RuntimeFailure("cannot load a UMT5EncoderModel from %s: %s"
                                     % (where["src"], exc))
            self.model = self.model.to(device).eval().requires_grad_(False)
            self.name = where["src"] + ("/" + where["sub"] if where["sub"] else "")

    def __call__(self, text):
        """-> (float32 numpy (L, D), L, untruncated token count)."""
        torch = self.torch
        text = clean_text(text)
        full = len(self.tokenizer(text, add_special_tokens=True)["input_ids"])
        tk = self.tokenizer([text], padding="max_length", truncation=True, max_length=TEXT_LEN,
                            add_special_tokens=True, return_tensors="pt")
        ids = tk["input_ids"].to(self.device)            # (1, 512)
        mask = tk["attention_mask"].to(self.device)      # (1, 512)
        n = int(mask.sum())
        with torch.no_grad():
            if self.kind == "wan":
                out = self.model(ids, mask)
            else:
                out = self.model(input_ids=ids, attention_mask=mask).last_hidden_state
        ctx = out[0, :n].float().cpu().numpy()           # (L, D): real tokens only
        return ctx, n, full


# ------------------------------------------------------------ CLI

def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="encode_prompt.py",
        description="Encode a prompt (and the negative prompt) with Wan 2.1's UMT5-XXL text "
                    "encoder into a --cond file for `staticpipe run`: float32 datasets "
                    "context [L,4096] and context_null [L_neg,4096], L = real tokens "
                    "(at most 512), as the published Wan pipeline trims them.",
        epilog="--encoder takes a Wan checkpoint folder or its %s, a transformers "
               "UMT5EncoderModel folder, a diffusers Wan folder (text_encoder/, tokenizer/), "
               "or a hub id of one of these. Needs torch, transformers, sentencepiece, h5py "
               "(huggingface_hub for hub ids). Exit 0 ok, 2 bad input, 1 failure."
               % WAN_T5_FILE)
    ap.add_argument("-p", "--prompt", required=True, help="the prompt")
    ap.add_argument("-n", "--negative", default=None,
                    help="negative prompt for CFG (default, or when empty: Wan 2.1's "
                         "sample_neg_prompt, as the published pipeline does)")
    ap.add_argument("--no-negative", action="store_true",
                    help="write no context_null (for `staticpipe run --cfg 1`)")
    ap.add_argument("-e", "--encoder", default=DEFAULT_ENCODER,
                    help="text encoder: path or hub id (default: %(default)s)")
    ap.add_argument("-t", "--tokenizer", default=None,
                    help="tokenizer path or hub id, when the encoder location has none "
                         "(default: the encoder's own, else %s)" % DEFAULT_TOKENIZER)
    ap.add_argument("-d", "--device", default=None, choices=("cuda", "cpu"),
                    help="where the encoder runs (default: cuda when available, else cpu)")
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp32"),
                    help="encoder precision (default: %(default)s, the published t5_dtype)")
    ap.add_argument("-o", "--output", required=True, help="output HDF5 file")
    a = ap.parse_args(argv)
    if not a.prompt.strip():
        ap.error("--prompt is empty")
    if a.no_negative and a.negative:
        ap.error("--negative and --no-negative contradict each other")
    if a.negative is None or not a.negative.strip():
        a.negative = WAN_NEG_PROMPT
    enc = os.path.expanduser(a.encoder)
    if not os.path.exists(enc) and (enc.startswith((".", "/")) or enc.count("/") != 1):
        ap.error("--encoder %s: no such file or folder (and not a hub id owner/name)"
                 % a.encoder)
    a.encoder = enc
    out_dir = os.path.dirname(os.path.abspath(a.output))
    if os.path.isdir(a.output):
        ap.error("-o %s is a folder, expected a file name" % a.output)
    if not os.path.isdir(out_dir):
        ap.error("-o %s: folder %s does not exist" % (a.output, out_dir))
    if not os.access(out_dir, os.W_OK):
        ap.error("-o %s: folder %s is not writable" % (a.output, out_dir))
    return a


def run(a):
    try:
        import torch
    except ImportError:
        raise InputError("torch is not installed (pip install torch)")
    for mod in ("numpy", "h5py"):
        try:
            __import__(mod)
        except ImportError:
            raise InputError("%s is not installed (pip install %s)" % (mod, mod))
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda, but torch sees no CUDA device (use --device cpu)")
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    where = resolve_encoder(a.encoder, a.tokenizer)
    log("encoder %s on %s in %s" % (where.get("path") or where.get("src"), device, a.dtype))
    enc = Encoder(torch, where, dtype, device)

    ctx, n, full = enc(a.prompt)
    if full > TEXT_LEN:
        log("warning: the prompt has %d tokens; truncated to %d as Wan does" % (full, TEXT_LEN))
    log("prompt: %d tokens" % n)
    ctx_null, n_null = None, 0
    if not a.no_negative:
        ctx_null, n_null, full_null = enc(a.negative)
        if full_null > TEXT_LEN:
            log("warning: the negative prompt has %d tokens; truncated to %d"
                % (full_null, TEXT_LEN))
        log("negative prompt: %d tokens" % n_null)
    if ctx.shape[1] != TEXT_DIM:
        raise InputError("encoder %s gives width %d; Wan 2.1 expects %d (UMT5-XXL)"
                         % (enc.name, ctx.shape[1], TEXT_DIM))
    attrs = {"prompt": a.prompt, "negative_prompt": "" if a.no_negative else a.negative,
             "encoder": enc.name, "encoder_dtype": a.dtype, "tokens": n, "tokens_null": n_null,
             "generator": "staticpipe launch/encode_prompt.py"}
    write_cond(a.output, ctx, ctx_null, attrs)
    log("wrote %s: context [%d, %d]%s" % (a.output, n, TEXT_DIM,
                                         "" if ctx_null is None else
                                         ", context_null [%d, %d]" % (n_null, TEXT_DIM)))


def main(argv):
    a = parse_args(argv)
    try:
        run(a)
    except InputError as exc:
        log("error: %s" % exc)
        return EXIT_INPUT
    except RuntimeFailure as exc:
        log("error: %s" % exc)
        return EXIT_RUNTIME
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
