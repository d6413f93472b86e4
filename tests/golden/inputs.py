"""The fixed inputs of the golden runs (tests/golden/run.sh), made once and
shared by the binaries being compared, so that only the binaries differ:
conditioning files, a tokenizer, a LoRA for wan2.1-tiny, and safetensors
exports of the tiny DiT, VAE and text encoder for convert.

  inputs.py BIN DIR     writes DIR/* (skips what is already there)

Every number comes from numpy's default_rng with a fixed seed."""
import json
import os
import subprocess
import sys

import h5py
import numpy as np


def save_st(path, tensors):
    """A safetensors file of {name: ndarray} (F32, or BF16 given as uint16)."""
    hdr, off, blobs = {}, 0, []
    for k in sorted(tensors):
        a = tensors[k]
        dt = "BF16" if a.dtype == np.uint16 else "F32"
        raw = np.ascontiguousarray(a.astype("<u2" if dt == "BF16" else "<f4")).tobytes()
        hdr[k] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))
    os.replace(tmp, path)


def export(h5path, st, rename):
    """Every dataset of an HDF5 model file into a safetensors file, keys from rename(path)."""
    out = {}
    with h5py.File(h5path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and obj.ndim > 0 :
                k = rename(name)
                if k:
                    out[k] = obj[...]
        f.visititems(visit)
    save_st(st, out)


def dit_key(p):
    parts = p.split("/")
    if parts[0] == "blocks":
        return "blocks.%d.%s" % (int(parts[1]), parts[2])
    return parts[-1]


def main():
    b, d = sys.argv[1], sys.argv[2]
    os.makedirs(d, exist_ok=True)
    r = np.random.default_rng(1234)
    for name, L0, L1 in (("cond_a", 77, 126), ("cond_b", 5, 512)):
        with h5py.File(os.path.join(d, name + ".h5"), "w") as f:
            f["context"] = r.standard_normal((L0, 4096)).astype(np.float32)
            f["context_null"] = r.standard_normal((L1, 4096)).astype(np.float32)
    with h5py.File(os.path.join(d, "latent.h5"), "w") as f:
        f["latent"] = r.standard_normal((16, 3, 8, 8)).astype(np.float32)
    # A LoRA (kohya keys) on two of wan2.1-tiny's linear layers per block, rank 4.
    lora = {}
    for blk in range(4):
        for lin in ("self_attn.q", "cross_attn.o", "ffn.0"):
            out_f = 640 if lin == "ffn.0" else 256
            stem = "lora_unet_blocks_%d_%s" % (blk, lin.replace(".", "_"))
            lora[stem + ".lora_down.weight"] = (0.05 * r.standard_normal((4, 256))).astype(np.float32)
            lora[stem + ".lora_up.weight"] = (0.05 * r.standard_normal((out_f, 4))).astype(np.float32)
            lora[stem + ".alpha"] = np.array(4.0, np.float32)
    save_st(os.path.join(d, "lora.safetensors"), lora)
    tok = os.path.join(d, "spiece.model")
    if not os.path.exists(tok):
        import sentencepiece as spm
        words = ["fox", "snow", "red", "running", "a", "the", "in", "cat", "river", "city",
                 "night", "light", "camera", "slow", "motion", "over", "mountain", "sky"]
        corpus = os.path.join(d, "corpus.txt")
        with open(corpus, "w") as f:
            for _ in range(3000):
                f.write(" ".join(words[i] for i in r.integers(0, len(words), 8)) + "\n")
        spm.SentencePieceTrainer.train(input=corpus, model_prefix=os.path.join(d, "spiece"),
                                       model_type="unigram", vocab_size=120, hard_vocab_limit=False,
                                       num_threads=1, minloglevel=2, pad_id=0, eos_id=1, unk_id=2,
                                       bos_id=-1)
    # Sources for convert: the tiny networks exported to safetensors.
    for arch, h5, st, ren in (("wan2.1-tiny", "src_dit.h5", "src_dit.safetensors", dit_key),
                              ("wan2.1-vae-tiny", "src_vae.h5", "src_vae.safetensors",
                               lambda p: p.split("/", 1)[1]),
                              ("umt5-tiny", "src_t5.h5", "src_t5.safetensors",
                               lambda p: p.split("/", 1)[1] if p.startswith("encoder/") else None)):
        h5p, stp = os.path.join(d, h5), os.path.join(d, st)
        if os.path.exists(stp):
            continue
        cmd = [b, "init", "--arch", arch, "--seed", "7", "-q", "-o", h5p]
        if arch.startswith("umt5"):
            cmd += ["--tokenizer", tok, "--dtype", "fp32"]
        subprocess.run(cmd, check=True)
        export(h5p, stp, ren)


if __name__ == "__main__":
    main()
