#!/usr/bin/env python3
"""The published Wan 2.1 VAE decoder in PyTorch, timed: the baseline for
staticpipe's CUDA decoder (ranks/nets/wan_vae/wan_vae_gpu.h).

The decoder is the user's own copy of the published code, imported from a
Wan2.1 checkout (Wan-Video/Wan2.1, wan/modules/vae.py, class WanVAE_): pass
its root with --wan-repo DIR or WAN_REPO. Nothing of it is copied here. The
module file is loaded by path (not through the wan package, whose
__init__ pulls in the whole pipeline); it needs torch and einops.

The model: WanVAE_ with the published config (dim 96, z_dim 16, dim_mult
(1, 2, 4, 4), 2 residual blocks, temperal_downsample (False, True, True)),
torch's default initialisation (random weights: the speed does not depend on
them), on the GPU, the encoder included as WanVAE loads it (--decoder-only
drops it). Timed: WanVAE_.decode(z, scale) on random normal latents (1, 16,
F, H, W), then .float().clamp_(-1, 1) as WanVAE.decode does, under
torch.inference_mode:

  fp32         fp32 weights and activations, torch's defaults: cuDNN may
               run the convolutions in TF32 (torch.backends.cudnn.allow_tf32
               is True by default), as a user gets;
  fp32-strict  the same with TF32 off (cudnn.allow_tf32 and
               cuda.matmul.allow_tf32 False): fp32 arithmetic, what
               staticpipe's fp32 decoder computes;
  bf16         under torch.autocast(bfloat16), as WanVAE(dtype=bfloat16)
               runs it.

Each (size, mode): --warmup untimed decodes, then --reps timed ones
(torch.cuda.synchronize around each, wall time); peak memory is
torch.cuda.max_memory_allocated over the timed decodes, weights included
(the stats are reset after the warm-up).

Output: a table on stdout (header lines start with '#'), then one JSON line;
--json-out FILE writes the same JSON atomically after every row.

  python3 launch/bench/torch_vae.py --wan-repo ~/Wan2.1 [--sizes 60x104,90x160]
      [--frames 21] [--modes fp32,fp32-strict,bf16] [--reps 2] [--warmup 1]
      [--decoder-only] [--json-out FILE] [--seed S]
"""
import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time


# What the decoder benches share (torch_vae22.py imports them, and
# torch_vae_enc.py the loader and write_json): the loader of a published
# module file, the arguments, the timing of one mode, the loop over sizes
# and modes.


def load_published(repo, rel, name, script, checkout):
    """The module file repo/rel, loaded by path as module name."""
    path = os.path.join(repo, *rel.split("/"))
    if not os.path.isfile(path):
        sys.exit(f"{script}: no {path}: pass the root of a {checkout} "
                 "(--wan-repo DIR or WAN_REPO)")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_wan_vae(repo):
    return load_published(repo, "wan/modules/vae.py", "wan_published_vae", "torch_vae.py",
                          "Wan2.1 checkout")


def write_json(path, doc):
    if not path:
        return
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".torch_vae.", dir=d)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f)
        f.write("\n")
    os.replace(tmp, path)


def decoder_args(doc, script, checkout, sizes, frames, flag, flag_help):
    """The parsed arguments of a decoder bench (its defaults sizes and
    frames, its own store_true flag), a.modes and a.sizes as lists; exits
    on a missing --wan-repo or an unknown mode."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--wan-repo", default=os.environ.get("WAN_REPO"))
    ap.add_argument("--sizes", default=sizes, help="latent HxW, comma separated")
    ap.add_argument("--frames", type=int, default=frames, help="latent frames")
    ap.add_argument("--modes", default="fp32,fp32-strict,bf16")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument(flag, action="store_true", help=flag_help)
    ap.add_argument("--json-out")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if not a.wan_repo:
        sys.exit(f"{script}: pass --wan-repo DIR (or set WAN_REPO): the root of a {checkout}")
    a.modes = [m for m in a.modes.split(",") if m]
    for m in a.modes:
        if m not in ("fp32", "fp32-strict", "bf16"):
            sys.exit(f"{script}: unknown mode {m}")
    a.sizes = [tuple(int(v) for v in s.lower().split("x")) for s in a.sizes.split(",")]
    return a


def time_mode(torch, run, x, mode, a, out_key="video"):
    """(row fields) of a.reps timed calls run(x, mode) after a.warmup: the
    median and least seconds, every run's, the peak memory, and the
    output's (T, H, W) under out_key (a decoder's video, an encoder's
    latent)."""
    with torch.inference_mode():
        for _ in range(a.warmup):
            out = run(x, mode)
            del out
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        times = []
        for _ in range(a.reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = run(x, mode)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            shape = list(out.shape)
            del out
    times.sort()
    return {"s": times[len(times) // 2], "s_min": times[0], "runs_s": times,
            "peak_gib": torch.cuda.max_memory_allocated() / 2**30, out_key: shape[2:]}


def bench_decoder(torch, model, scale, z_dim, a, doc):
    """Every size of a.sizes in every mode of a.modes: random normal latents
    (1, z_dim, a.frames, h, w) decoded as WanVAE.decode does, a row each
    into doc["results"] (and a.json_out, rewritten after each) and a line of
    the table; prints the JSON at the end."""
    dev = torch.device("cuda")
    print(f"# {'latent':>16} {'video':>18} {'mode':>12} {'s':>9} {'s_min':>9} {'peak GiB':>9}")

    def decode(z, mode):
        if mode == "bf16":
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return model.decode(z, scale).float().clamp_(-1, 1)
        return model.decode(z, scale).float().clamp_(-1, 1)

    tf32 = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    for (h, w) in a.sizes:
        g = torch.Generator(device=dev).manual_seed(a.seed + h * 1000 + w)
        z = torch.randn((1, z_dim, a.frames, h, w), generator=g, device=dev)
        for mode in a.modes:
            strict = mode == "fp32-strict"
            torch.backends.cudnn.allow_tf32 = tf32[0] and not strict
            torch.backends.cuda.matmul.allow_tf32 = tf32[1] and not strict
            row = {"latent": [a.frames, h, w], "mode": mode, "status": "ok"}
            try:
                row.update(time_mode(torch, decode, z, mode, a))
            except torch.cuda.OutOfMemoryError as e:
                row["status"] = f"out of memory: {str(e).splitlines()[0]}"
            torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.cuda.empty_cache()
            doc["results"].append(row)
            write_json(a.json_out, doc)
            if row["status"] == "ok":
                print(f"  {str(a.frames) + 'x' + str(h) + 'x' + str(w):>16} "
                      f"{'x'.join(map(str, row['video'])):>18} {mode:>12} {row['s']:9.3f} "
                      f"{row['s_min']:9.3f} {row['peak_gib']:9.2f}", flush=True)
            else:
                print(f"  {a.frames}x{h}x{w} {mode}: {row['status']}", flush=True)
    print(json.dumps(doc))


def main():
    a = decoder_args(__doc__, "torch_vae.py", "Wan2.1 checkout", "60x104,90x160", 21,
                     "--decoder-only", "drop the encoder's weights")
    import torch
    if not torch.cuda.is_available():
        sys.exit("torch_vae.py: no CUDA device")
    vae = load_wan_vae(a.wan_repo)
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    model = vae.WanVAE_(dim=96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2,
                        attn_scales=[], temperal_downsample=[False, True, True], dropout=0.0)
    if a.decoder_only:
        model.encoder = torch.nn.Module()  # clear_cache counts its convs: none
    model = model.eval().requires_grad_(False).to(dev)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    # WanVAE's latent statistics (wan/modules/vae.py, class WanVAE).
    mean = torch.tensor([-0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508,
                         0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921],
                        device=dev)
    std = torch.tensor([2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
                        3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160],
                       device=dev)
    scale = [mean, 1.0 / std]
    env = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
           "gpu": torch.cuda.get_device_name(0), "wan_repo": os.path.abspath(a.wan_repo),
           "weight_bytes": weight_bytes, "decoder_only": a.decoder_only}
    doc = {"bench": "torch_vae", "env": env, "results": []}
    print(f"# torch {env['torch']}, cudnn {env['cudnn']}, {env['gpu']}; weights "
          f"{weight_bytes / 2**20:.1f} MiB ({'decoder only' if a.decoder_only else 'encoder and decoder'})")
    bench_decoder(torch, model, scale, 16, a, doc)


if __name__ == "__main__":
    main()
