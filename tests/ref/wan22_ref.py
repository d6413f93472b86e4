"""float64 reference of Wan 2.2 A14B text-to-video sampling: two experts.

Written from the published loop (Wan-Video/Wan2.2, wan/text2video.py,
WanT2V.generate, and wan/configs/wan_t2v_A14B.py), not from the C code:

    boundary = config.boundary * num_train_timesteps      # 0.875 * 1000
    for t in timesteps:                                   # the scheduler's ints
        model = high_noise_model if t.item() >= boundary else low_noise_model
        g = guide_scale[1] if t.item() >= boundary else guide_scale[0]
        v = v_uncond + g * (v_cond - v_uncond)            # both branches, always
        latents = scheduler.step(v, t, latents)

guide_scale is (low, high) there: (3.0, 4.0) published. Each expert is a
whole Wan 2.1 DiT (wan_ref.py computes its forward; for text-to-video the
per-token timestep of Wan 2.2's DiT is one value broadcast over the tokens,
MODEL.md "Wan 2.2 A14B"). One scheduler runs the whole loop.

A two-expert staticpipe file holds the experts under /experts/high and
/experts/low (MODEL.md "Model file"); load_experts reads both."""
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wan_ref as W  # noqa: E402


def load_experts(path):
    """(high, low) wan_ref Models and the file's defaults dict."""
    with h5py.File(path, "r") as f:
        a = f.attrs
        if int(np.asarray(a.get("experts", 1)).reshape(-1)[0]) != 2:
            raise W.RefError("%s: not a two-expert model (root attribute experts)" % path)
        cfg = {}
        for k in W._CONFIG_KEYS:
            v = np.asarray(a[k]).reshape(-1)
            cfg[k] = (tuple(int(x) for x in v) if k == "patch"
                      else float(v[0]) if k == "eps" else int(v[0]))
        defaults = {k: float(np.asarray(a[k]).reshape(-1)[0])
                    for k in ("boundary", "cfg_high", "cfg_low", "shift", "steps")}
        sh = W.expected_shapes(cfg)
        models = []
        for name in ("high", "low"):
            pre = "/experts/" + name
            embed = {k: W._read_tensor(f, pre + "/embed/" + k, sh[k]) for k in W._EMBED_KEYS}
            blocks = [{k: W._read_tensor(f, "%s/blocks/%04d/%s" % (pre, n, k), sh[k])
                       for k in W._BLOCK_KEYS} for n in range(cfg["layers"])]
            head = {k: W._read_tensor(f, pre + "/head/" + k, sh[k]) for k in W._HEAD_KEYS}
            models.append(W.Model(cfg, embed, blocks, head))
    return models[0], models[1], defaults


def sample_a14b(high, low, noise, context, context_null, steps, guide_scale, shift,
                boundary_ratio, sampler="unipc", num_train_timesteps=1000, y=None):
    """The published two-expert loop: boundary = boundary_ratio * 1000; a
    step whose integer timestep t is >= boundary runs the high-noise expert
    with guide_scale[1], else the low-noise expert with guide_scale[0]
    (guide_scale = (low, high) as the published config writes it); v = v_u
    + g (v_c - v_u); one scheduler for all steps. y, when given, is the
    image-to-video condition each model sees after x ([x; y], channels).
    Returns (latents, experts used per step)."""
    boundary = boundary_ratio * num_train_timesteps
    sigmas, timesteps = W.schedule(steps, shift)
    s = W.make_sampler(sampler, sigmas)
    ctx = {}
    for name, m in (("high", high), ("low", low)):
        ctx[name] = (W.embed_text(m, context), W.embed_text(m, context_null))
    x = np.asarray(noise, dtype=np.float64)
    used = []
    for i in range(steps):
        t = int(timesteps[i])
        name = "high" if t >= boundary else "low"
        model = high if name == "high" else low
        g = guide_scale[1] if t >= boundary else guide_scale[0]
        xin = x if y is None else np.concatenate([x, y], axis=0)
        vc = W.forward_embedded(model, xin, t, ctx[name][0])
        vu = W.forward_embedded(model, xin, t, ctx[name][1])
        x = s.step(vu + g * (vc - vu), x)
        used.append(name)
    return x, used
