/* CPU reference kernels of the Wan 2.1 video VAE decoder (ranks/nets/wan_vae/VAE.md):
 * plain C11, fp32 arithmetic, OpenMP across output rows or positions.
 *
 * Activations are channel-first, (C, T, H, W) row-major, as the published
 * PyTorch code holds them (batch dropped). Every output element is computed
 * by one thread in a fixed summation order, so results are bit-identical
 * for any thread count. Nothing here allocates: scratch comes from the
 * caller. SiLU and the residual add are kern_cpu_silu and
 * kern_cpu_gated_add (kern_cpu.h). */
#ifndef KERN_CPU_VAE_H
#define KERN_CPU_VAE_H

#include <stdint.h>

/* Causal 3-D convolution, stride 1, odd spatial kernel with "same" zero
 * padding (kh/2, kw/2), time padding only in the past (CausalConv3d):
 *
 *   y[o,t,h,w] = b[o] + sum_{i,a,c,d} w[o,i,a,c,d] * X[i, t+a-(kt-1), h+c-kh/2, w+d-kw/2]
 *
 * where X is the input x (ci, T, H, W) preceded by kt-1 history frames:
 * hist (ci, kt-1, H, W) holds them oldest first, of which only the last
 * n_hist are valid; the first kt-1-n_hist are zeros and never read (hist
 * may be NULL when n_hist is 0). Out-of-range rows and columns are zero.
 * w (co, ci, kt, kh, kw) PyTorch layout, b (co) or NULL, y (co, T, H, W);
 * y must not alias x or hist. The sum runs in the order (i, a, c, d) after
 * the bias, for every element. */
void kern_cpu_causal_conv3d(const float *x, const float *hist, int n_hist, const float *w,
                            const float *b, float *y, int64_t ci, int64_t co, int64_t T,
                            int64_t H, int64_t W, int kt, int kh, int kw);

/* nn.Conv2d(ci, co, (kh, kw), padding (kh/2, kw/2)) on each of the T frames
 * of x (ci, T, H, W): the causal convolution with kt = 1.
 * w (co, ci, kh, kw), b (co) or NULL, y (co, T, H, W), not aliasing x. */
void kern_cpu_conv2d_frames(const float *x, const float *w, const float *b, float *y,
                            int64_t ci, int64_t co, int64_t T, int64_t H, int64_t W, int kh,
                            int kw);

/* RMS_norm over channels (F.normalize(x, dim=1) * sqrt(C) * gamma):
 *   y[c,n] = x[c,n] / max(sqrt(sum_c x[c,n]^2), 1e-12) * sqrt(C) * gamma[c]
 * x, y (C, N) with N = T*H*W positions; gamma (C). The sum of squares is
 * accumulated in double in channel order. y may alias x. */
void kern_cpu_channel_rmsnorm(const float *x, const float *gamma, float *y, int64_t C,
                              int64_t N);

/* nn.Upsample(scale_factor=2, mode='nearest-exact') on the last two axes:
 * y[p, oy, ox] = x[p, oy/2, ox/2] (nearest-exact's floor((o + 0.5) / 2) is
 * o/2 for a factor of exactly 2). x (P, H, W), y (P, 2H, 2W); P = C*T. */
void kern_cpu_upsample2x_nearest(const float *x, float *y, int64_t P, int64_t H, int64_t W);

/* Floats of scratch kern_cpu_frame_attention needs: q, k, v and the output
 * in token-major order, 4 * T * HW * C. */
int64_t kern_cpu_frame_attention_scratch(int64_t C, int64_t T, int64_t HW);

/* Single-head softmax attention inside each frame, scale 1/sqrt(C): the
 * tokens of frame t are its HW positions. qkv (3C, T, HW) channel-first
 * is the output of the 1x1 to_qkv conv: channels [0, C) are q, [C, 2C) k,
 * [2C, 3C) v. out (C, T, HW), not aliasing qkv. The softmax is
 * kern_cpu_attention's (exact, online, fixed key order). */
void kern_cpu_frame_attention(const float *qkv, float *scratch, float *out, int64_t C, int64_t T,
                              int64_t HW);

/* The upsample3d time_conv output (2C, T, HW) as frames: y (C, 2T, HW) with
 * y[c, 2t + k] = x[k*C + c, t] (k = 0, 1). Copies only. */
void kern_cpu_time_unfold2(const float *x, float *y, int64_t C, int64_t T, int64_t HW);

/* x = min(max(x, lo), hi) in place, n elements. */
void kern_cpu_clamp(float *x, int64_t n, float lo, float hi);

#endif
