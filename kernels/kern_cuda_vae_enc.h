/* CUDA ops the Wan 2.1 VAE encoder adds to the decoder's (kern_cuda_vae.h,
 * whose conventions hold: channels-last activations in the context's
 * storage type dt, fp32 arithmetic, channel counts multiples of 8, async on
 * the context's stream, fatal on a bad argument). The code is
 * kernels/cuda/cuda_vae_enc.cu and, for the convolution,
 * kernels/cuda/cuda_vae.cu; the CPU references are kern_cpu_vae_enc.h and
 * ranks/nets/wan_vae/wan_vae_enc_cpu.c. */
#ifndef KERN_CUDA_VAE_ENC_H
#define KERN_CUDA_VAE_ENC_H

#include <stdint.h>

#include "kern_cuda_vae.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A convolution without padding: x (T, H, W, ci), w (co, kt, kh, kw, ci)
 * in dt, strides st in time and ss in height and width. */
typedef struct kern_cuda_vae_conv_desc {
  int64_t T, H, W;
  int64_t ci, co;
  int kt, kh, kw;
  int st, ss;
} kern_cuda_vae_conv_desc;

/* y ((T - kt) / st + 1, (H - kh) / ss + 1, (W - kw) / ss + 1, co) in dt, no
 * bias: cuDNN's convolution as kern_cuda_vae_conv runs it (the algorithm
 * chosen once per shape among the deterministic ones). The downsamples'
 * spatial step is kt 1, 3x3, ss 2 on the input padded by
 * kern_cuda_vae_pad_from_f32; downsample3d's time conv 3x1x1, st 2. */
void kern_cuda_vae_conv_valid(kern_cuda_vae *v, const kern_cuda_vae_conv_desc *d, const void *x,
                              const void *w, void *y);

/* A chunk's frames into conv1's input: frames (3, T, HW) fp32, the planes
 * as the host holds them -> y (T, HW, 8) in dt, channels 3..7 zero. */
void kern_cuda_vae_video_in(kern_cuda_vae *v, const float *frames, void *y, int64_t T,
                            int64_t HW);

/* ZeroPad2d((0, 1, 0, 1)) of the residual stream: x (T, H, W, C) fp32 ->
 * y (T, H + 1, W + 1, C) in dt, row H and column W zero. */
void kern_cuda_vae_pad_from_f32(kern_cuda_vae *v, const float *x, void *y, int64_t T, int64_t H,
                                int64_t W, int64_t C);

/* The latents of a chunk from the head conv's raw output: for each
 * position p of n and latent channel c < nz,
 *   u[i] = x[p, i] + hb[i]                         (the head's 2 nz channels)
 *   mu   = qb[c] + sum_i qw[c, i] u[i]             (conv1, i in order)
 *   out[c, p] = (mu - mean[c]) * inv_std[c]        (Wan2_1_VAE's scale)
 * x (n, 2 nz) in dt; hb, qw (2 nz, 2 nz), qb fp32 on the device; mean and
 * inv_std host arrays (nz <= KERN_CUDA_VAE_MAX_Z); out (nz, n) fp32. */
typedef struct kern_cuda_vae_latent_out_args {
  const void *x;
  const float *hb, *qw, *qb;
  const float *mean, *inv_std;
  float *out;
  int64_t n, nz;
} kern_cuda_vae_latent_out_args;
void kern_cuda_vae_latent_out(kern_cuda_vae *v, const kern_cuda_vae_latent_out_args *a);

#ifdef __cplusplus
}
#endif

#endif
