/* CPU reference kernels of the Wan 2.2 video VAE (ranks/nets/wan_vae22/VAE22.md,
 * I2V.md "The Wan 2.2 VAE"): the pieces it has beyond the Wan 2.1 VAE's
 * (kern_cpu_vae.h, and kern_cpu_vae_enc.h for the encoders' stride-2
 * convolutions, which both VAEs share): patchify and unpatchify, the
 * parameter-free AvgDown3D and DupUp3D shortcuts.
 * Plain C11, fp32 arithmetic, OpenMP across output rows or planes.
 *
 * Activations are channel-first, (C, T, H, W) row-major, batch dropped.
 * Every output element is computed by one thread in a fixed order, so
 * results are bit-identical for any thread count. Nothing allocates. */
#ifndef KERN_CPU_VAE22_H
#define KERN_CPU_VAE22_H

#include <stdint.h>

/* patchify (factor 2): x (C, T, H, W), H and W even -> y (4C, T, H/2, W/2),
 *   y[c*4 + r*2 + q, t, h, w] = x[c, t, 2h + q, 2w + r]
 * (the column offset r before the row offset q: einops
 * "c f (h q) (w r) -> (c r q) f h w"). Copies only. */
void kern_cpu_vae22_patchify(const float *x, float *y, int64_t C, int64_t T, int64_t H,
                             int64_t W);

/* unpatchify, the inverse: x (4C, T, h, w) -> y (C, T, 2h, 2w). */
void kern_cpu_vae22_unpatchify(const float *x, float *y, int64_t C, int64_t T, int64_t h,
                               int64_t w);

/* A shortcut's geometry (AvgDown3D, DupUp3D; also the CUDA ops',
 * kern_cuda_vae22.h): its input x of ci channels, T frames of H x W; co
 * output channels; ft, fs the time and space factors; drop the output
 * frames DupUp3D drops (ft - 1 in the first chunk, else 0). */
typedef struct kern_vae22_shortcut {
  int64_t T, H, W, ci, co;
  int ft, fs, drop;
} kern_vae22_shortcut;

/* y += AvgDown3D(x): x (C, T, H, W) (C = s->ci), H and W multiples of fs;
 * the input is preceded by p = (ft - T mod ft) mod ft zero frames; y (Co,
 * T', H/fs, W/fs), Co = s->co, T' = (T + p) / ft. With g = C ft fs fs / Co
 * (an integer),
 *   y[o, j, i, k] += (1/g) sum_{m < g} X[c, j ft + a, i fs + q, k fs + r]
 * where o g + m = ((c ft + a) fs + q) fs + r and X the padded input; the
 * g values summed in order of m, then multiplied by 1/g. */
void kern_cpu_vae22_avg_down_add(const float *x, float *y, const kern_vae22_shortcut *s);

/* y += DupUp3D(x) without its first s->drop frames: x (C, T, H, W) (C =
 * s->ci); R = Co ft fs fs / C (an integer); y (Co, T ft - drop, H fs, W fs),
 *   y[o, t ft + a - drop, i fs + q, j fs + r] += x[k / R, t, i, j],
 *   k = ((o ft + a) fs + q) fs + r. */
void kern_cpu_vae22_dup_up_add(const float *x, float *y, const kern_vae22_shortcut *s);

#endif
