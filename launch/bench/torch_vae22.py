#!/usr/bin/env python3
"""The published Wan 2.2 VAE decoder (TI2V-5B's) in PyTorch, timed: the
baseline for staticpipe's CUDA decoder (ranks/nets/wan_vae22/).

The model is the user's own copy of the published code, imported from a
Wan2.2 checkout or snapshot (Wan-Video/Wan2.2, wan/modules/vae2_2.py, class
WanVAE_): pass its root with --wan-repo DIR or WAN_REPO. Nothing of it is
copied here. The module file is loaded by path (not through the wan
package, whose __init__ pulls in the whole pipeline); it needs torch and
einops.

The model: WanVAE_ as Wan2_2_VAE builds it (dim 160, dec_dim 256, z_dim
48, dim_mult (1, 2, 4, 4), 2 residual blocks, temperal_downsample (False,
True, True)), torch's default initialisation (random weights: the speed
does not depend on them), on the GPU, the encoder dropped (--with-encoder
keeps it). Timed: WanVAE_.decode(z, scale) on random normal latents (1, 48,
F, H, W), then .float().clamp_(-1, 1) as Wan2_2_VAE.decode does, under
torch.inference_mode:

  fp32         fp32, torch's defaults (cuDNN may use TF32), as a user gets;
  fp32-strict  TF32 off: fp32 arithmetic, what staticpipe's fp32 computes;
  bf16         under torch.autocast(bfloat16).

Each (size, mode): --warmup untimed decodes, then --reps timed ones (wall
time between torch.cuda.synchronize calls); the peak memory is
torch.cuda.max_memory_allocated over the timed decodes, weights included.
Output: a table (header lines start with '#') and one JSON line;
--json-out FILE writes the same JSON atomically after every row.

  python3 launch/bench/torch_vae22.py --wan-repo ~/Wan2.2 [--sizes 44x80]
      [--frames 31] [--modes fp32,fp32-strict,bf16] [--reps 2] [--warmup 1]
"""
import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time

# Wan2_2_VAE's latent statistics (wan/modules/vae2_2.py): the scale the
# decode divides and shifts by; the same numbers as tests/ref/wan_vae_stats.json.
STATS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "ref",
                     "wan_vae_stats.json")


def load_vae22(repo):
    path = os.path.join(repo, "wan", "modules", "vae2_2.py")
    if not os.path.isfile(path):
        sys.exit(f"torch_vae22.py: no {path}: pass the root of a Wan2.2 checkout "
                 "(--wan-repo DIR or WAN_REPO)")
    spec = importlib.util.spec_from_file_location("wan_published_vae22", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def write_json(path, doc):
    if not path:
        return
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".torch_vae22.", dir=d)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f)
        f.write("\n")
    os.replace(tmp, path)


def time_mode(torch, decode, z, mode, a):
    """(row fields) of a.reps timed decodes after a.warmup."""
    with torch.inference_mode():
        for _ in range(a.warmup):
            out = decode(z, mode)
            del out
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        times = []
        for _ in range(a.reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = decode(z, mode)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            shape = list(out.shape)
            del out
    times.sort()
    return dict(s=times[len(times) // 2], s_min=times[0], runs_s=times,
                peak_gib=torch.cuda.max_memory_allocated() / 2**30, video=shape[2:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wan-repo", default=os.environ.get("WAN_REPO"))
    ap.add_argument("--sizes", default="44x80", help="latent HxW, comma separated")
    ap.add_argument("--frames", type=int, default=31, help="latent frames")
    ap.add_argument("--modes", default="fp32,fp32-strict,bf16")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--with-encoder", action="store_true")
    ap.add_argument("--json-out")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if not a.wan_repo:
        sys.exit("torch_vae22.py: pass --wan-repo DIR (or set WAN_REPO): a Wan2.2 checkout")
    import torch
    if not torch.cuda.is_available():
        sys.exit("torch_vae22.py: no CUDA device")
    vae = load_vae22(a.wan_repo)
    modes = [m for m in a.modes.split(",") if m]
    if any(m not in ("fp32", "fp32-strict", "bf16") for m in modes):
        sys.exit("torch_vae22.py: modes are fp32, fp32-strict, bf16")
    sizes = [tuple(int(v) for v in s.lower().split("x")) for s in a.sizes.split(",")]
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    model = vae.WanVAE_(dim=160, dec_dim=256, z_dim=48, dim_mult=[1, 2, 4, 4], num_res_blocks=2,
                        attn_scales=[], temperal_downsample=[False, True, True], dropout=0.0)
    if not a.with_encoder:
        model.encoder = torch.nn.Module()  # clear_cache counts its convs: none
    model = model.eval().requires_grad_(False).to(dev)
    stats = json.load(open(STATS))["wan2.2"]
    mean = torch.tensor(stats["mean"], device=dev)
    scale = [mean, 1.0 / torch.tensor(stats["std"], device=dev)]
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    env = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
           "gpu": torch.cuda.get_device_name(0), "wan_repo": os.path.abspath(a.wan_repo),
           "weight_bytes": weight_bytes, "with_encoder": a.with_encoder}
    doc = {"bench": "torch_vae22", "env": env, "results": []}
    print(f"# torch {env['torch']}, cudnn {env['cudnn']}, {env['gpu']}; weights "
          f"{weight_bytes / 2**20:.1f} MiB")
    print(f"# {'latent':>16} {'video':>18} {'mode':>12} {'s':>9} {'s_min':>9} {'peak GiB':>9}")

    def decode(z, mode):
        if mode == "bf16":
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return model.decode(z, scale).float().clamp_(-1, 1)
        return model.decode(z, scale).float().clamp_(-1, 1)

    tf32 = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    for (h, w) in sizes:
        g = torch.Generator(device=dev).manual_seed(a.seed + h * 1000 + w)
        z = torch.randn((1, 48, a.frames, h, w), generator=g, device=dev)
        for mode in modes:
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
                print(f"  {a.frames}x{h}x{w:<10} {'x'.join(map(str, row['video'])):>18} "
                      f"{mode:>12} {row['s']:9.3f} {row['s_min']:9.3f} {row['peak_gib']:9.2f}",
                      flush=True)
            else:
                print(f"  {a.frames}x{h}x{w} {mode}: {row['status']}", flush=True)
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
