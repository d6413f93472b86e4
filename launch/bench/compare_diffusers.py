#!/usr/bin/env python3
"""End to end: diffusers' Wan 2.1 against `staticpipe run`, same inputs.

For each case (Wan 2.1 T2V 1.3B, 14B) the script builds diffusers'
WanTransformer3DModel with the published config and random weights (seeded),
writes those weights to a safetensors file in diffusers' key names, converts
it with `staticpipe convert`, and samples one clip both ways from the same
noise, the same prompt embeddings (random, zero-padded to 512 rows as Wan's
text encoder pads them) and the same schedule:

  diffusers   WanPipeline(..., output_type="latent") with diffusers'
              UniPCMultistepScheduler configured as Wan's published one
              (flow sigmas, order 2, bh2, x0 prediction), or, where
              WanPipeline cannot be imported (it needs transformers), the
              same loop written here: CFG then scheduler.step per step;
  staticpipe  `staticpipe run --noise --cond --sigmas`, the scheduler's own
              sigmas passed as --sigmas (so both use one schedule whatever
              either's default), under the MPI launcher with --ranks > 1.

It reports seconds per clip for each (diffusers: the pipeline call after a
short untimed warm-up call; staticpipe: its sampling loop, `sample_s` of
run --json, and the whole process with loading) and the relative L2 of the
final latents, ||staticpipe - diffusers|| / ||diffusers||, in float64.

Weights: the modules diffusers keeps in fp32 (norms, time embedder,
modulation table) hold values rounded to bf16, as the converted bf16 model
file holds them, so both sides compute with the same weights.

Needs on the GPU machine: torch with CUDA, numpy, h5py (staticpipe's cond,
noise and output files are HDF5), a diffusers source tree (--diffusers-src;
not installed, not downloaded: nothing here uses the network) with the
packages diffusers itself imports, and a staticpipe CUDA build. Disk: the
safetensors file and the model file, each the size of the bf16 weights
(2.8 GB for 1.3B, 28.6 GB for 14B; the safetensors file is deleted once
converted), under --work-root.

--dry-run needs neither torch nor diffusers: it runs the staticpipe half
only, on the tiny model (`staticpipe init --arch wan2.1-tiny`), with the
same files and command line, to check the script's plumbing on any
machine.

Usage:
  python3 launch/bench/compare_diffusers.py --diffusers-src ~/diffusers \\
      --staticpipe build/staticpipe [--only 1.3b|14b] [--size 480x832]
      [--frames 81] [--steps 50] [--cfg 5] [--shift 5] [--seed S]
      [--ranks N] [--launcher CMD] [--extra "ARGS"] [--work-root DIR]
      [--keep] [--json-out FILE]
  python3 launch/bench/compare_diffusers.py --dry-run --staticpipe build-cpu/staticpipe
"""

import argparse
import gc
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

# diffusers' WanTransformer3DModel configs of Wan 2.1 T2V (as its
# checkpoint conversion writes them).
CONFIGS = {
    "1.3b": dict(num_attention_heads=12, attention_head_dim=128, ffn_dim=8960, num_layers=30),
    "14b": dict(num_attention_heads=40, attention_head_dim=128, ffn_dim=13824, num_layers=40),
}
COMMON = dict(patch_size=(1, 2, 2), in_channels=16, out_channels=16, text_dim=4096,
              freq_dim=256, cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6,
              added_kv_proj_dim=None)
TEXT_ROWS = 512         # Wan's text encoder pads every prompt to 512 rows
TRAIN_STEPS = 1000      # num_train_timesteps of Wan's scheduler
DRY_DEFAULTS = dict(size="32x32", frames=5, steps=3)
T0 = time.time()


def log(msg):
    print(f"[{time.time() - T0:7.1f} s] {msg}", file=sys.stderr, flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="diffusers' Wan 2.1 against staticpipe run: seconds per clip and the "
                    "final latents' relative L2, same noise, cond and schedule, random weights.")
    p.add_argument("--diffusers-src", metavar="DIR",
                   help="a diffusers source tree (the repository or its src/ folder); required "
                        "unless --dry-run")
    p.add_argument("--staticpipe", metavar="BIN", required=True,
                   help="the staticpipe binary (a CUDA build; --dry-run: any build)")
    p.add_argument("--only", choices=sorted(CONFIGS), action="append",
                   help="a case; repeat for several (default: 1.3b then 14b)")
    p.add_argument("--size", default=None, help="HxW, multiples of 16 (default 480x832)")
    p.add_argument("--frames", type=int, default=None, help="4k+1 (default 81)")
    p.add_argument("--steps", type=int, default=None, help="sampling steps (default 50)")
    p.add_argument("--cfg", type=float, default=5.0, help="guidance, > 1 (default 5)")
    p.add_argument("--shift", type=float, default=5.0, help="flow shift, > 0 (default 5)")
    p.add_argument("--text-rows", type=int, default=24,
                   help="rows of the random prompt embeddings before padding, 1..512 (default 24)")
    p.add_argument("--seed", type=int, default=None,
                   help="weights, noise and cond follow from it (default: from the clock, printed)")
    p.add_argument("--warmup-steps", type=int, default=2,
                   help="steps of diffusers' untimed warm-up call, 0 for none (default 2)")
    p.add_argument("--ranks", type=int, default=1, help="staticpipe ranks, 1..64 (default 1)")
    p.add_argument("--launcher", default="mpirun",
                   help="MPI launcher for --ranks > 1 (default mpirun; the count follows as -np N)")
    p.add_argument("--extra", default="", help="more words for staticpipe run's command line")
    p.add_argument("--diffusers-mode", choices=("auto", "pipeline", "loop"), default="auto",
                   help="WanPipeline, the loop written here, or the pipeline when it imports "
                        "(default auto)")
    p.add_argument("--work-root", default=tempfile.gettempdir(),
                   help="where the work folder goes (default: the system's temporary folder)")
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    p.add_argument("--json-out", metavar="FILE", help="also write the results as JSON (atomically, "
                   "after every case)")
    p.add_argument("--dry-run", action="store_true",
                   help="no torch, no diffusers: the staticpipe half on the tiny model (defaults "
                        "32x32, 5 frames, 3 steps)")
    a = p.parse_args(argv)
    dflt = DRY_DEFAULTS if a.dry_run else dict(size="480x832", frames=81, steps=50)
    for k, v in dflt.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    try:
        a.height, a.width = (int(x) for x in a.size.lower().split("x"))
    except ValueError:
        p.error(f"--size {a.size!r}: expected HxW")
    if a.height <= 0 or a.width <= 0 or a.height % 16 or a.width % 16:
        p.error(f"--size {a.size}: height and width must be positive multiples of 16")
    if a.frames < 1 or (a.frames - 1) % 4:
        p.error(f"--frames {a.frames}: must be 4k+1")
    if a.steps < 2:
        p.error(f"--steps {a.steps}: at least 2")
    if a.cfg <= 1:
        p.error(f"--cfg {a.cfg}: must be > 1 (both sides run the two CFG branches)")
    if a.shift <= 0:
        p.error(f"--shift {a.shift}: must be > 0")
    if not 1 <= a.text_rows <= TEXT_ROWS:
        p.error(f"--text-rows {a.text_rows}: 1..{TEXT_ROWS}")
    if not 1 <= a.ranks <= 64:
        p.error(f"--ranks {a.ranks}: 1..64")
    if a.warmup_steps < 0:
        p.error("--warmup-steps: 0 or more")
    if not (os.path.isfile(a.staticpipe) and os.access(a.staticpipe, os.X_OK)):
        p.error(f"--staticpipe {a.staticpipe}: not an executable file")
    if a.dry_run:
        if a.only:
            p.error("--only: the dry run has one case, the tiny model")
        a.only = ["tiny"]
    else:
        if not a.diffusers_src:
            p.error("--diffusers-src is required (or --dry-run)")
        src = a.diffusers_src
        if os.path.isfile(os.path.join(src, "src", "diffusers", "__init__.py")):
            src = os.path.join(src, "src")
        if not os.path.isfile(os.path.join(src, "diffusers", "__init__.py")):
            p.error(f"--diffusers-src {a.diffusers_src}: no diffusers/__init__.py in it or in "
                    "its src/")
        a.diffusers_path = os.path.abspath(src)
        a.only = a.only or ["1.3b", "14b"]
    if not os.path.isdir(a.work_root):
        p.error(f"--work-root {a.work_root}: not a folder")
    if a.seed is None:
        a.seed = int(time.time()) % 1000000
    return a


def flow_sigmas(steps, shift):
    """The noise levels of diffusers' UniPCMultistepScheduler with
    use_flow_sigmas (float64, without the final 0): linspace(1, 1/1000),
    shifted, the first nudged below 1. Used by the dry run; the real run
    takes the scheduler's own and checks them against these."""
    import numpy as np
    s = np.linspace(1, 1 / TRAIN_STEPS, steps + 1)[:-1]
    s = shift * s / (1 + (shift - 1) * s)
    if abs(s[0] - 1) < 1e-6:
        s[0] -= 1e-6
    return s


def write_inputs(work, a, rng, lat_shape):
    """noise.h5 ('noise' [16, F, h, w]) and cond.h5 ('context' and
    'context_null' [text_rows, 4096]); returns the arrays, the contexts
    zero-padded to 512 rows as diffusers takes them."""
    import h5py
    import numpy as np
    noise = rng.standard_normal(lat_shape).astype(np.float32)
    ctx = [rng.standard_normal((a.text_rows, 4096)).astype(np.float32) for _ in range(2)]
    with h5py.File(os.path.join(work, "noise.h5"), "w") as f:
        f["noise"] = noise
    with h5py.File(os.path.join(work, "cond.h5"), "w") as f:
        f["context"], f["context_null"] = ctx
    padded = [np.concatenate([c, np.zeros((TEXT_ROWS - a.text_rows, 4096), np.float32)])
              for c in ctx]
    return noise, padded


def run_staticpipe(a, work, model, sigmas):
    """staticpipe run on the work folder's inputs; its --json summary, the
    process's wall seconds and the final latents."""
    import h5py
    out = os.path.join(work, "staticpipe.h5")
    cmd = []
    if a.ranks > 1:
        cmd = shlex.split(a.launcher) + ["-np", str(a.ranks)]
    cmd += [os.path.abspath(a.staticpipe), "run", "--model", model,
            "--cond", os.path.join(work, "cond.h5"), "--noise", os.path.join(work, "noise.h5"),
            "--frames", str(a.frames), "--size", f"{a.height}x{a.width}",
            "--sigmas", ",".join(repr(float(s)) for s in sigmas), "--cfg", repr(a.cfg),
            "--sampler", "unipc", "--no-preview", "-q", "--json", "-o", out]
    cmd += shlex.split(a.extra)
    log("staticpipe: " + " ".join(shlex.quote(w) for w in cmd))
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.time() - t0
    if p.returncode != 0:
        raise RuntimeError(f"staticpipe run exited {p.returncode}: {p.stderr.strip()[-2000:]}")
    summary = json.loads(p.stdout)
    with h5py.File(out, "r") as f:
        lat = f["latents"][...]
    return summary, wall, lat


def convert(a, st_path, h5_path):
    cmd = [os.path.abspath(a.staticpipe), "convert", st_path, "-o", h5_path, "-q"]
    log("convert: " + " ".join(shlex.quote(w) for w in cmd))
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"staticpipe convert exited {p.returncode}: {p.stderr.strip()[-2000:]}")
    return time.time() - t0


def save_safetensors(tensors, path):
    """tensors (name -> torch tensor) as a safetensors file: an 8-byte
    little-endian header length, the JSON header, the raw bytes. Written
    here so the script needs no safetensors package."""
    import torch
    names = {torch.bfloat16: "BF16", torch.float32: "F32", torch.float16: "F16"}
    header, off = {}, 0
    for k, t in tensors.items():
        n = t.numel() * t.element_size()
        header[k] = {"dtype": names[t.dtype], "shape": list(t.shape),
                     "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for t in tensors.values():
            f.write(t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes())


def build_transformer(case, seed):
    """diffusers' WanTransformer3DModel for the case, random weights from
    seed, on the GPU: bf16, but the modules diffusers keeps in fp32 stay
    fp32 holding bf16-rounded values (what the converted file holds)."""
    import torch
    from diffusers import WanTransformer3DModel
    torch.manual_seed(seed)
    with torch.device("cuda"):
        tr = WanTransformer3DModel(**COMMON, **CONFIGS[case])
    keep = tuple(getattr(tr, "_keep_in_fp32_modules", None) or ())
    with torch.no_grad():
        for name, prm in tr.named_parameters():
            parts = name.split(".")
            rounded = prm.data.to(torch.bfloat16)
            prm.data = rounded.float() if any(k in parts for k in keep) else rounded
    return tr.eval().requires_grad_(False)


def make_scheduler(a):
    from diffusers import UniPCMultistepScheduler
    # Wan's published scheduler, as diffusers' Wan 2.1 checkpoints configure it.
    return UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True,
                                   num_train_timesteps=TRAIN_STEPS, flow_shift=a.shift,
                                   solver_order=2, solver_type="bh2", predict_x0=True,
                                   lower_order_final=True, final_sigmas_type="zero")


def diffusers_sample(a, tr, noise, ctx, steps, mode):
    """One clip through diffusers from noise [16, F, h, w] with the padded
    contexts; the final latents [16, F, h, w] as float32 numpy and the mode
    that ran."""
    import torch
    dev = torch.device("cuda")
    lat0 = torch.from_numpy(noise)[None].to(dev)
    pe, ne = (torch.from_numpy(c)[None].to(dev) for c in ctx)
    sched = make_scheduler(a)
    if mode in ("auto", "pipeline"):
        try:
            from diffusers import WanPipeline
            pipe = WanPipeline(tokenizer=None, text_encoder=None, vae=None, scheduler=sched,
                               transformer=tr)
        except ImportError as e:
            if mode == "pipeline":
                raise
            log(f"diffusers: WanPipeline does not import ({e}); the loop written here runs")
            mode = "loop"
        else:
            pipe.set_progress_bar_config(disable=True)
            out = pipe(prompt_embeds=pe, negative_prompt_embeds=ne, height=a.height,
                       width=a.width, num_frames=a.frames, num_inference_steps=steps,
                       guidance_scale=a.cfg, latents=lat0, output_type="latent",
                       return_dict=False)[0]
            return out[0].float().cpu().numpy(), "pipeline"
    # WanPipeline's loop: both branches on the bf16 latent, CFG, the step.
    dt = tr.dtype
    pe, ne = pe.to(dt), ne.to(dt)
    sched.set_timesteps(steps, device=dev)
    lat = lat0.clone()
    with torch.no_grad():
        for t in sched.timesteps:
            x, ts = lat.to(dt), t.expand(lat.shape[0])
            cond = tr(hidden_states=x, timestep=ts, encoder_hidden_states=pe, return_dict=False)[0]
            unc = tr(hidden_states=x, timestep=ts, encoder_hidden_states=ne, return_dict=False)[0]
            lat = sched.step(unc + a.cfg * (cond - unc), t, lat, return_dict=False)[0]
    return lat[0].float().cpu().numpy(), "loop"


def schedule(a):
    """The sigmas both sides use (float64, no final 0): the scheduler's,
    checked against flow_sigmas so that staticpipe's integer timesteps,
    int(sigma * 1000), are the scheduler's."""
    import numpy as np
    sched = make_scheduler(a)
    sched.set_timesteps(a.steps)
    s64 = flow_sigmas(a.steps, a.shift)
    s32 = sched.sigmas.numpy()[:-1]
    if not (np.array_equal(s64.astype(np.float32), s32)
            and np.array_equal((s64 * TRAIN_STEPS).astype(np.int64), sched.timesteps.numpy())):
        log("warning: the scheduler's sigmas are not diffusers' flow sigmas as this script "
            "knows them: staticpipe gets the float32 ones, its timesteps may differ by one")
        return s32.astype(np.float64)
    return s64


def rel_l2(ref, x):
    import numpy as np
    ref, x = ref.astype(np.float64), x.astype(np.float64)
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


def run_case(a, case, work):
    import numpy as np
    rng = np.random.default_rng(a.seed)
    lat_shape = (16, (a.frames - 1) // 4 + 1, a.height // 8, a.width // 8)
    noise, ctx = write_inputs(work, a, rng, lat_shape)
    row = dict(case=case, size=f"{a.height}x{a.width}", frames=a.frames, steps=a.steps,
               cfg=a.cfg, shift=a.shift, seed=a.seed, ranks=a.ranks)
    model = os.path.join(work, f"wan-{case}.h5")
    if a.dry_run:
        subprocess.run([os.path.abspath(a.staticpipe), "init", "--arch", "wan2.1-tiny", "--seed",
                        str(a.seed % 1000), "-q", "-o", model], check=True)
        sigmas = flow_sigmas(a.steps, a.shift)
        ref = None
    else:
        import torch
        sigmas = schedule(a)
        log(f"{case}: building the diffusers model (seed {a.seed})")
        tr = build_transformer(case, a.seed)
        st = os.path.join(work, f"wan-{case}.safetensors")
        save_safetensors(tr.state_dict(), st)
        row["convert_s"] = convert(a, st, model)
        os.remove(st)
        if a.warmup_steps:
            log(f"{case}: diffusers warm-up, {a.warmup_steps} steps")
            diffusers_sample(a, tr, noise, ctx, a.warmup_steps, a.diffusers_mode)
        torch.cuda.synchronize()
        t0 = time.time()
        ref, row["diffusers_mode"] = diffusers_sample(a, tr, noise, ctx, a.steps, a.diffusers_mode)
        torch.cuda.synchronize()
        row["diffusers_s"] = time.time() - t0
        log(f"{case}: diffusers {row['diffusers_s']:.2f} s ({row['diffusers_mode']})")
        del tr
        gc.collect()
        torch.cuda.empty_cache()
    summary, wall, lat = run_staticpipe(a, work, model, sigmas)
    row.update(staticpipe_sample_s=summary["sample_s"], staticpipe_wall_s=wall,
               staticpipe_steady_step_ms=summary["steady_step_ms"])
    log(f"{case}: staticpipe {summary['sample_s']:.2f} s sampling, {wall:.2f} s in all")
    if lat.shape != lat_shape:
        raise RuntimeError(f"staticpipe wrote latents {lat.shape}, expected {lat_shape}")
    if not np.all(np.isfinite(lat)):
        raise RuntimeError("staticpipe's latents are not all finite")
    if ref is not None:
        row["rel_l2"] = rel_l2(ref, lat)
        row["speedup"] = row["diffusers_s"] / summary["sample_s"]
    return row


def write_json(path, doc):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".compare-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)


def main(argv):
    a = parse_args(argv)
    if not a.dry_run:
        sys.path.insert(0, a.diffusers_path)
    log(f"seed {a.seed}; cases {', '.join(a.only)}; {a.height}x{a.width}, {a.frames} frames, "
        f"{a.steps} steps, cfg {a.cfg}, shift {a.shift}")
    doc = dict(args={k: v for k, v in vars(a).items() if k != "only"}, rows=[])
    print("# case  size      frames steps  diffusers_s  staticpipe_s  speedup  rel_l2  status")
    failed = 0
    for case in a.only:
        work = tempfile.mkdtemp(prefix=f"compare-{case}-", dir=a.work_root)
        try:
            row = run_case(a, case, work)
            row["status"] = "ok"
        except Exception as e:  # reported in the row; the next case still runs
            row = dict(case=case, status=f"failed: {type(e).__name__}: {e}")
            failed += 1
        finally:
            if a.keep:
                log(f"kept {work}")
            else:
                shutil.rmtree(work, ignore_errors=True)
        doc["rows"].append(row)

        def f(k, fmt):
            return format(row[k], fmt) if k in row else "-"
        print(f"  {case:5} {f('size', '9')} {f('frames', '6')} {f('steps', '5')}  "
              f"{f('diffusers_s', '11.2f')}  {f('staticpipe_sample_s', '12.2f')}  "
              f"{f('speedup', '7.3f')}  {f('rel_l2', '.2e')}  {row['status']}", flush=True)
        if a.json_out:
            write_json(a.json_out, doc)
    print(json.dumps(doc))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
