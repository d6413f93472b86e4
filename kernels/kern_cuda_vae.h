/* CUDA ops of the Wan 2.1 VAE decoder (ranks/nets/wan_vae/VAE.md), behind a C
 * interface; the code is kernels/cuda/cuda_vae.cu. The CPU references are
 * kern_cpu_vae.h.
 *
 * Conventions (kern_cuda.h's, with these differences):
 * - activations are channels-last, (T, H, W, C) row-major, in one storage
 *   type per context, `dt`: bf16 (passed as uint16_t bit patterns) or fp32,
 *   except the residual stream, which the norm, add and upsampling may take
 *   or give in fp32 in either dt (their x_f32, r_f32, out_f32 flags);
 *   arithmetic, norms' statistics and softmax are fp32;
 * - every channel count is a multiple of 8 and every pointer 16-byte
 *   aligned (the element kernels move 16-byte vectors); checked, fatal;
 * - biases and gammas are fp32 (C);
 * - async on the context's stream, no device allocation: the workspaces
 *   come from the caller (planner/vae_layout.h counts them);
 * - a failed call or a bad argument is fatal (sp_fatal), never returned. */
#ifndef KERN_CUDA_VAE_H
#define KERN_CUDA_VAE_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "kern_dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KERN_CUDA_VAE_MAX_Z 16 /* latent channels the input kernel takes */

/* The cuDNN and cuBLASLt handles, the workspaces the caller lent, and the
 * algorithm chosen for each convolution and GEMM shape (chosen once,
 * reused: same shape, same algorithm, same bits). tf32 (dt fp32 only):
 * the convolutions may run on the TF32 tensor cores (cuDNN's default math
 * type, whose algorithms round the inputs of each product to a 10-bit
 * mantissa) and the attention's GEMMs compute in CUBLAS_COMPUTE_32F_FAST_-
 * TF32; else fp32 convolutions keep to FMA math and the GEMMs to full fp32.
 * SP_OK, or SP_ERR_RUNTIME (logged) when cuDNN is older than 9.0 at run
 * time or a handle cannot be made; SP_ERR_INPUT (logged) for tf32 with a
 * bf16 dt. */
typedef struct kern_cuda_vae kern_cuda_vae;
int kern_cuda_vae_create(kern_dtype dt, int tf32, cudaStream_t stream, void *conv_ws,
                         size_t conv_ws_bytes, void *gemm_ws, size_t gemm_ws_bytes,
                         kern_cuda_vae **out);
void kern_cuda_vae_destroy(kern_cuda_vae *v);

/* Convolution, stride 1, no time padding, spatial zero padding (kh/2,
 * kw/2): x (T, H, W, ci), w (co, kt, kh, kw, ci) in dt, y (T - kt + 1, H,
 * W, co) in dt, no bias. A causal conv passes its 2 cached frames as the
 * first 2 of x. kh, kw odd. */
void kern_cuda_vae_conv(kern_cuda_vae *v, const void *x, int64_t T, int64_t H, int64_t W,
                        int64_t ci, const void *w, int64_t co, int kt, int kh, int kw, void *y);

/* One latent frame into conv1's input: z (nz, hw) fp32, channel planes as
 * the host holds them; y (hw, nz) in dt:
 *   y[p, o] = b[o] + sum_i wt[o, i] (z[i, p] / inv_std[i] + mean[i])
 * (WanVAE's un-normalisation and the 1x1x1 conv2, fp32). wt (nz, nz) and b
 * (nz) fp32 on the device; mean, inv_std host arrays (nz). */
void kern_cuda_vae_latent_in(kern_cuda_vae *v, const float *z, const float *wt, const float *b,
                             const float *mean, const float *inv_std, void *y, int64_t nz,
                             int64_t hw);

/* RMS norm over channels, optionally after a bias and before SiLU:
 *   u = x[p, :] + bias;  y[p, c] = u[c] / max(||u||_2, 1e-12) * sqrt(C) * gamma[c]
 *   then y = y sigmoid(y) when silu.
 * x (N, C) in dt, or fp32 when x_f32 (the residual stream); y (N, C) in dt,
 * not aliasing x; bias (C) or NULL; gamma (C). */
void kern_cuda_vae_norm(kern_cuda_vae *v, const void *x, int x_f32, const float *bias,
                        const float *gamma, void *y, int64_t N, int64_t C, int silu);

/* out = (y + by) + (r + br), or out = y + by when r is NULL:
 * y (N, C) in dt; r (N, C) in dt, or fp32 when r_f32; out (N, C) in dt, or
 * fp32 when out_f32 (an fp32 r needs an fp32 out); out may alias y or r;
 * by (C) or NULL, br (C) or NULL. */
void kern_cuda_vae_add(kern_cuda_vae *v, const void *y, const float *by, const void *r, int r_f32,
                       const float *br, void *out, int out_f32, int64_t N, int64_t C);

/* y (n) in dt from x (n) fp32 (rounded to nearest even for bf16); n a
 * multiple of 8. */
void kern_cuda_vae_from_f32(kern_cuda_vae *v, const float *x, void *y, int64_t n);

/* Nearest 2x in H and W: x (T, H, W, C) in dt, or fp32 when x_f32 ->
 * y (T, 2H, 2W, C) in dt. */
void kern_cuda_vae_upsample2x(kern_cuda_vae *v, const void *x, int x_f32, void *y, int64_t T,
                              int64_t H, int64_t W, int64_t C);

/* upsample3d after its time conv: x (T, H, W, 2C) raw conv output, b (2C)
 * -> y (2T, 2H, 2W, C): y[2t + k, oy, ox, c] = x[t, oy/2, ox/2, kC + c] +
 * b[kC + c] (kern_cpu_time_unfold2, then nearest 2x). */
void kern_cuda_vae_unfold_upsample(kern_cuda_vae *v, const void *x, const float *b, void *y,
                                   int64_t T, int64_t H, int64_t W, int64_t C);

/* The video frames of a chunk: x (T, HW, ldc) raw head conv output, the
 * first 3 channels used; frames (3, T, HW) fp32 = clamp(x + b, -1, 1). */
void kern_cuda_vae_frames_out(kern_cuda_vae *v, const void *x, const float *b, float *frames,
                              int64_t T, int64_t HW, int64_t ldc);

/* Single-head softmax attention inside each frame, scale 1/sqrt(C):
 * qkv (T, HW, 3C) (q, k, v at channel offsets 0, C, 2C), out (T, HW, C),
 * both in dt. Per frame, query rows in chunks as large as the scratch
 * holds (plan_vae_scores_bytes, planner/vae_layout.h): scores = q k^T
 * (cuBLASLt, fp32), softmax per row in fp32 written in dt, out = P v
 * (cuBLASLt, fp32 accumulation). scratch 256-byte aligned. */
void kern_cuda_vae_attention(kern_cuda_vae *v, const void *qkv, void *out, int64_t T, int64_t HW,
                             int64_t C, void *scratch, size_t scratch_bytes);

#ifdef __cplusplus
}
#endif

#endif
