/* CPU reference kernels: plain C11, fp32 arithmetic, OpenMP across rows.
 *
 * Every output element is computed by one thread in a fixed summation
 * order, so results are bit-identical for any thread count. Tensors are
 * row-major; shapes are given in the comment of each argument. Nothing here
 * allocates: scratch comes from the caller (the model's arena). */
#ifndef KERN_CPU_H
#define KERN_CPU_H

#include <stddef.h>
#include <stdint.h>

/* y = x @ w^T + b, PyTorch Linear layout.
 * x (M, K), w (N, K), b (N) or NULL, y (M, N). y must not alias x. */
void kern_cpu_linear(const float *x, const float *w, const float *b, float *y, int64_t M,
                     int64_t K, int64_t N);

/* LayerNorm over the last dim, biased variance, fp32.
 * x (rows, dim) -> y (rows, dim); w, b (dim) or both NULL (no affine).
 * y may alias x. */
void kern_cpu_layernorm(const float *x, const float *w, const float *b, float *y, int64_t rows,
                        int64_t dim, float eps);

/* RMSNorm with weight: y = x * rsqrt(mean(x^2) + eps) * w.
 * x (rows, dim), w (dim), y (rows, dim); y may alias x. */
void kern_cpu_rmsnorm(const float *x, const float *w, float *y, int64_t rows, int64_t dim,
                      float eps);

/* y = x * (1 + scale) + shift, broadcast over rows.
 * x, y (rows, dim), shift, scale (dim); y may alias x. */
void kern_cpu_modulate(const float *x, const float *shift, const float *scale, float *y,
                       int64_t rows, int64_t dim);

/* Gated residual add: x += y * gate (gate (dim), or NULL for gate 1).
 * x, y (rows, dim). */
void kern_cpu_gated_add(float *x, const float *y, const float *gate, int64_t rows, int64_t dim);

/* In place, n elements: GELU with the tanh approximation; SiLU x*sigmoid(x). */
void kern_cpu_gelu_tanh(float *x, int64_t n);
void kern_cpu_silu(float *x, int64_t n);

/* 3-D RoPE tables for a (F, H, W) token grid and head_dim hd (128). The
 * hd/2 rotation pairs split into sections of p0 = hd/2 - 2*(hd/6) pairs for
 * the frame index f, then p1 = hd/6 for the row h and p2 = hd/6 for the
 * column w (22/21/21 for 128). Pair j of a section of p pairs at position n
 * has the angle n * 10000^(-2j/(2p)), computed in double. Tokens (f, h, w)
 * in row-major order. cos_t, sin_t (F*H*W, hd/2). */
void kern_cpu_rope_table(int64_t F, int64_t H, int64_t W, int64_t hd, double *cos_t,
                         double *sin_t);

/* Applies RoPE in place to x (L, heads, hd) on interleaved pairs
 * (x[2j], x[2j+1]), rotation computed in double and rounded to fp32:
 * out0 = x0 cos - x1 sin, out1 = x0 sin + x1 cos. Tables from above. */
void kern_cpu_rope_apply(float *x, const double *cos_t, const double *sin_t, int64_t L,
                         int64_t heads, int64_t hd);

/* Exact softmax attention, scale 1/sqrt(hd), no mask.
 * q (Lq, heads, hd), k, v (Lk, heads, hd), out (Lq, heads, hd). Any Lq, Lk.
 * No scratch: each (query row, head) is one thread's work. */
void kern_cpu_attention(const float *q, const float *k, const float *v, float *out, int64_t Lq,
                        int64_t Lk, int64_t heads, int64_t hd);

/* Softmax attention with an additive relative-position bias (T5):
 * score(i, j, h) = scale * q_i.k_j + table[bucket[j - i + Lq - 1], h].
 * q (Lq, heads, hd), k, v (Lk, heads, hd), table (n_buckets, heads),
 * bucket (Lq + Lk - 1) with entries in [0, n_buckets), out (Lq, heads, hd).
 * A padding mask that hides the keys from Lk on is this call with those
 * keys left out: a masked score's softmax weight is exactly 0. Same
 * threading and summation order as kern_cpu_attention. */
void kern_cpu_attention_relbias(const float *q, const float *k, const float *v,
                                const float *table, const int32_t *bucket, float scale, float *out,
                                int64_t Lq, int64_t Lk, int64_t heads, int64_t hd);

/* Patch embedding input: x (C, F, H, W) -> tokens (F*(H/2)*(W/2), C*4),
 * token order (f, h, w) row-major, value index c*4 + kh*2 + kw reading
 * x[c, f, 2h+kh, 2w+kw] (patch (1,2,2)). Then a linear with the flattened
 * patch_embedding.weight (dim, C*4). */
void kern_cpu_patchify(const float *x, float *tokens, int64_t C, int64_t F, int64_t H, int64_t W);

/* Unpatchify: tokens (F*(H/2)*(W/2), 4*C), value index ((p*2+q)*2+r)*C + c
 * with p = 0 (patch (1,2,2)), placed at x[c, f+p, 2h+q, 2w+r]; x (C, F, H, W). */
void kern_cpu_unpatchify(const float *tokens, float *x, int64_t C, int64_t F, int64_t H,
                         int64_t W);

/* Sinusoidal time embedding in double, stored fp32: half = n/2,
 * arg_j = t * 10000^(-j/half), out = [cos(arg_0..half-1), sin(arg_0..half-1)]. */
void kern_cpu_time_sinusoid(double t, int64_t n, float *out);

#endif
