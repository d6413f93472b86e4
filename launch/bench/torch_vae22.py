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
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_vae import bench_decoder, decoder_args, load_published  # noqa: E402

# Wan2_2_VAE's latent statistics (wan/modules/vae2_2.py): the scale the
# decode divides and shifts by; the same numbers as tests/ref/wan_vae_stats.json.
STATS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "ref",
                     "wan_vae_stats.json")


def main():
    a = decoder_args(__doc__, "torch_vae22.py", "Wan2.2 checkout", "44x80", 31,
                     "--with-encoder", "keep the encoder's weights")
    import torch
    if not torch.cuda.is_available():
        sys.exit("torch_vae22.py: no CUDA device")
    vae = load_published(a.wan_repo, "wan/modules/vae2_2.py", "wan_published_vae22",
                         "torch_vae22.py", "Wan2.2 checkout")
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
    bench_decoder(torch, model, scale, 48, a, doc)


if __name__ == "__main__":
    main()
