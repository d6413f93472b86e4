#!/usr/bin/env python3
"""The published Wan 2.1 VAE encoder in PyTorch, timed: the baseline for
staticpipe's CUDA encoder (ranks/nets/wan_vae/cuda/wan_vae_enc_gpu.c).

As launch/bench/torch_vae.py does for the decoder: the user's own copy of
the published code (Wan-Video/Wan2.1 wan/modules/vae.py, class WanVAE_,
loaded by path from --wan-repo DIR or WAN_REPO; nothing of it is copied
here), the published config, torch's default initialisation, on the GPU.
Timed: WanVAE_.encode(video, scale) of a random video (1, 3, T, H, W) in
[-1, 1], then .float() as WanVAE.encode does, under torch.inference_mode,
in the modes fp32 (torch's defaults: TF32 convolutions), fp32-strict (TF32
off) and bf16 (autocast); --warmup untimed encodes, then --reps timed ones;
peak memory is torch.cuda.max_memory_allocated over the timed encodes,
weights included.

  python3 launch/bench/torch_vae_enc.py --wan-repo ~/Wan2.1
      [--sizes 480x832,720x1280] [--frames 81] [--modes fp32,fp32-strict,bf16]
      [--reps 2] [--warmup 1] [--json-out FILE] [--seed S]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_vae import load_wan_vae, time_mode, write_json  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wan-repo", default=os.environ.get("WAN_REPO"))
    ap.add_argument("--sizes", default="480x832,720x1280", help="video HxW, comma separated")
    ap.add_argument("--frames", type=int, default=81, help="video frames, 1 + 4k")
    ap.add_argument("--modes", default="fp32,fp32-strict,bf16")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--json-out")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if not a.wan_repo:
        sys.exit("torch_vae_enc.py: pass --wan-repo DIR (or set WAN_REPO): a Wan2.1 checkout")
    import torch
    if not torch.cuda.is_available():
        sys.exit("torch_vae_enc.py: no CUDA device")
    vae = load_wan_vae(a.wan_repo)
    modes = [m for m in a.modes.split(",") if m]
    sizes = [tuple(int(v) for v in s.lower().split("x")) for s in a.sizes.split(",")]
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    model = vae.WanVAE_(dim=96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2,
                        attn_scales=[], temperal_downsample=[False, True, True], dropout=0.0)
    model.decoder = torch.nn.Module()  # not used by encode
    model = model.eval().requires_grad_(False).to(dev)
    # WanVAE's latent statistics (wan/modules/vae.py, class WanVAE).
    mean = torch.tensor([-0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508,
                         0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921],
                        device=dev)
    std = torch.tensor([2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
                        3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160],
                       device=dev)
    scale = [mean, 1.0 / std]
    env = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
           "gpu": torch.cuda.get_device_name(0), "wan_repo": os.path.abspath(a.wan_repo)}
    doc = {"bench": "torch_vae_enc", "env": env, "results": []}
    print(f"# torch {env['torch']}, cudnn {env['cudnn']}, {env['gpu']}")

    def encode(v, mode):
        if mode == "bf16":
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return model.encode(v, scale).float()
        return model.encode(v, scale).float()

    tf32 = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    for (h, w) in sizes:
        g = torch.Generator(device=dev).manual_seed(a.seed + h * 1000 + w)
        v = torch.rand((1, 3, a.frames, h, w), generator=g, device=dev) * 2 - 1
        for mode in modes:
            strict = mode == "fp32-strict"
            torch.backends.cudnn.allow_tf32 = tf32[0] and not strict
            torch.backends.cuda.matmul.allow_tf32 = tf32[1] and not strict
            row = {"video": [a.frames, h, w], "mode": mode, "status": "ok"}
            try:
                row.update(time_mode(torch, encode, v, mode, a, "latent"))
            except torch.cuda.OutOfMemoryError as e:  # noqa: PERF203
                row["status"] = f"out of memory: {str(e).splitlines()[0]}"
            torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32
            doc["results"].append(row)
            write_json(a.json_out, doc)
            print(f"  {a.frames}x{h}x{w} {mode}: " + (f"{row['s']:.3f} s, peak "
                  f"{row['peak_gib']:.2f} GiB" if row["status"] == "ok" else row["status"]),
                  flush=True)
            torch.cuda.empty_cache()
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
