/* CUDA ops of the Wan 2.2 VAE (ranks/nets/wan_vae22/VAE22.md) beyond the
 * Wan 2.1 decoder's (kern_cuda_vae.h, which the Wan 2.2 coders use for
 * their stride-1 convolutions, norms, adds, upsampling and attention),
 * behind a C interface; the code is kernels/cuda/cuda_vae22.cu. The CPU
 * references are kern_cpu_vae22.h and the CPU coders (wan_vae22_cpu*.c).
 *
 * Conventions (kern_cuda_vae.h's): activations channels-last, (T, H, W,
 * C) row-major, in one storage type per context, dt: bf16 (uint16_t bit
 * patterns) or fp32; the residual stream and a level's kept input fp32 in
 * both; arithmetic fp32; biases fp32; async on the context's stream, no
 * device allocation; a bad argument or a failed call is fatal. */
#ifndef KERN_CUDA_VAE22_H
#define KERN_CUDA_VAE22_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "kern_cpu_vae22.h"
#include "kern_dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KERN_CUDA_VAE22_MAX_Z 64 /* latent channels the latent kernels take */

/* A cuDNN handle for the strided convolutions on the caller's stream and
 * workspace (which it may share with a kern_cuda_vae on the same stream:
 * the ops run one after another), and the algorithm of each shape (chosen
 * once, deterministic, reused). SP_OK or SP_ERR_RUNTIME (logged). */
typedef struct kern_cuda_vae22 kern_cuda_vae22;
int kern_cuda_vae22_create(kern_dtype dt, cudaStream_t stream, void *conv_ws,
                           size_t conv_ws_bytes, kern_cuda_vae22 **out);
void kern_cuda_vae22_destroy(kern_cuda_vae22 *v);

/* Convolution without padding, kernel k (kt, kh, kw) and strides (st, sh,
 * sw): x (T, H, W, ci), w (co, kt, kh, kw, ci) in dt, y (To, Ho, Wo, co) in
 * dt, no bias, To = (T - kt) / st + 1 (likewise Ho, Wo). The encoder's
 * downsample2d runs it on the padded frame (1x3x3, stride (1, 2, 2)) and
 * downsample3d's time conv on [kept frame; chunk] (3x1x1, stride (2, 1,
 * 1)). (Eleven parameters: the convolution's operands and sizes, as
 * kern_cuda_vae_conv takes them.) */
void kern_cuda_vae22_conv_strided(kern_cuda_vae22 *v, const void *x, int64_t T, int64_t H,
                                  int64_t W, int64_t ci, const void *w, int64_t co, const int k[3],
                                  const int stride[3], void *y);

/* The latent statistics: mean and inv_std = 1 / std, host arrays of nz
 * (<= KERN_CUDA_VAE22_MAX_Z) float32 values. */
typedef struct kern_vae22_stats {
  const float *mean, *inv_std;
  int64_t nz;
} kern_vae22_stats;

/* One latent frame into conv1's input: z (nz, hw) fp32 planes as the host
 * holds them; y (hw, nz) in dt:
 *   y[p, o] = b[o] + sum_i wt[o, i] (z[i, p] / inv_std[i] + mean[i])
 * (the un-normalisation and the 1x1x1 conv2, fp32). wt (nz, nz) and b (nz)
 * fp32 on the device. */
void kern_cuda_vae22_latent_in(kern_cuda_vae22 *v, const float *z, const float *wt,
                               const float *b, const kern_vae22_stats *st, void *y, int64_t hw);

/* The encoder's head and conv1 on the device: hb (z2) the head conv's
 * bias, w1 (z2, z2) and b1 (z2) the 1x1x1 conv1's, fp32. */
typedef struct kern_vae22_head {
  const float *hb, *w1, *b1;
  int64_t z2;
} kern_vae22_head;

/* The encoder's latents of a chunk: x (t, hw, z2) the head conv's raw
 * output in dt; conv1's first nz output channels normalised:
 *   z[o, f, p] = (b1[o] + sum_c w1[o, c] (x[f, p, c] + hb[c]) - mean[o]) * inv_std[o]
 * into z (nz, t, hw) fp32 planes. */
void kern_cuda_vae22_latent_out(kern_cuda_vae22 *v, const void *x, const kern_vae22_head *h,
                                const kern_vae22_stats *st, float *z, int64_t t, int64_t hw);

/* patchify of a chunk of video: frames (3, t, H, W) fp32 -> y (t, H/2, W/2,
 * ldc) in dt, y[f, i, j, c*4 + r*2 + q] = frames[c, f, 2i + q, 2j + r], the
 * channels from 12 to ldc zero. */
void kern_cuda_vae22_patchify_in(kern_cuda_vae22 *v, const float *frames, void *y, int64_t t,
                                 int64_t H, int64_t W, int64_t ldc);

/* unpatchify of the decoder head's output, plus bias, clamped: x (t, h, w,
 * ldc) raw conv output in dt, b (12) -> frames (3, t, 2h, 2w) fp32,
 *   frames[c, f, 2i + q, 2j + r] = clamp(x[f, i, j, c*4 + r*2 + q] + b[..], -1, 1). */
void kern_cuda_vae22_frames_out(kern_cuda_vae22 *v, const void *x, const float *b,
                                float *frames, int64_t t, int64_t h, int64_t w, int64_t ldc);

/* downsample2d's padded input: x (T, H, W, C) fp32 -> y (T, H + 1, W + 1,
 * C) in dt, its last row and column zero. */
void kern_cuda_vae22_pad_from_f32(kern_cuda_vae22 *v, const float *x, void *y, int64_t T,
                                  int64_t H, int64_t W, int64_t C);

/* The shortcut's geometry is kern_cpu_vae22.h's kern_vae22_shortcut: the
 * level's input (T, H, W, ci) kept in fp32, the output (To, Ho, Wo, co). */

/* An encoder level's output: out = y + b + AvgDown3D(keep), or out +=
 * AvgDown3D(keep) when y is NULL (kern_cpu_vae22_avg_down_add); y (To,
 * Ho, Wo, co) raw conv output in dt, out fp32. */
void kern_cuda_vae22_down_out(kern_cuda_vae22 *v, const void *y, const float *b,
                              const float *keep, float *out, const kern_vae22_shortcut *s);

/* A decoder level's output: out = y + b + DupUp3D(keep) without its first
 * s->drop frames (kern_cpu_vae22_dup_up_add); y (To, Ho, Wo, co) raw conv
 * output in dt, out fp32. */
void kern_cuda_vae22_up_out(kern_cuda_vae22 *v, const void *y, const float *b, const float *keep,
                            float *out, const kern_vae22_shortcut *s);

#ifdef __cplusplus
}
#endif

#endif
