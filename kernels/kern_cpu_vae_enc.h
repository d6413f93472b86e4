/* CPU reference kernels the Wan 2.1 VAE encoder adds to the decoder's
 * (kern_cpu_vae.h; ranks/nets/wan_vae/VAE.md "The encoder"): the
 * downsamples' stride-2 convolutions. The Wan 2.2 VAE's encoder has the
 * same downsamples and runs them through these too (VAE22.md). Plain C11, fp32, channel-first
 * (C, T, H, W); OpenMP across output rows, every output element summed by
 * one thread in a fixed order, so results are bit-identical for any thread
 * count. Nothing here allocates. */
#ifndef KERN_CPU_VAE_ENC_H
#define KERN_CPU_VAE_ENC_H

#include <stdint.h>

/* The downsamples' spatial step on each of the T frames of x (ci, T, H, W):
 * ZeroPad2d((0, 1, 0, 1)) (a zero column on the right, a zero row at the
 * bottom), then nn.Conv2d(ci, co, 3, stride 2, no padding):
 *
 *   y[o,t,i,j] = b[o] + sum_{c,a,d} w[o,c,a,d] * x[c, t, 2i+a, 2j+d]
 *
 * with x zero past row H - 1 and column W - 1; y (co, T, H/2, W/2) (floor),
 * H, W >= 2. w (co, ci, 3, 3), b (co) or NULL; y must not alias x. The sum
 * runs in the order (c, a, d) after the bias, for every element. */
void kern_cpu_conv2d_s2_frames(const float *x, const float *w, const float *b, float *y,
                               int64_t ci, int64_t co, int64_t T, int64_t H, int64_t W);

/* downsample3d's time_conv: a (3, 1, 1) convolution with stride 2 in time
 * and no padding over the frames X = [prev; x] (prev one frame (ci, HW)
 * in front, or none when prev is NULL), x (ci, T, HW):
 *
 *   y[o,j,p] = b[o] + sum_{i,a} w[o,i,a] * X[i, 2j+a, p]
 *
 * y (co, n, HW), n = (|X| - 3) / 2 + 1 frames (|X| >= 3); returns n. w
 * (co, ci, 3, 1, 1), b (co) or NULL; y must not alias x or prev. The sum
 * runs in the order (i, a) after the bias. */
int64_t kern_cpu_time_conv_s2(const float *x, const float *prev, const float *w, const float *b,
                              float *y, int64_t ci, int64_t co, int64_t T, int64_t HW);

#endif
