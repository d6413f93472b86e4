/* The UMT5 text encoder's own CUDA ops: T5's RMS norm and the gated-GELU
 * product (cuda/cuda_t5.cu), attention with T5's additive relative-position
 * bias and no scaling (cuda/cuda_t5_attn.cu). The GEMMs are kern_cuda.h's (cuBLASLt, bf16
 * operands, fp32 accumulation). Every op here is fp32 arithmetic with bf16
 * or fp32 storage, deterministic (no atomics: a rerun gives the same bits),
 * and checked against the CPU by tests/gpu/test_t5_gpu.c (the ops and the
 * whole encoder) and tests/gpu/test_ops.c (-o t5_attention). */
#ifndef KERN_CUDA_T5_H
#define KERN_CUDA_T5_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "kern_dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* T5LayerNorm (no mean, no bias): y = w * x * rsqrt(mean(x^2) + eps) per
 * row. x (L, D) fp32, w (D) bf16, y (L, D) fp32 or bf16 (y_dtype); y may
 * alias x when fp32. One block per row. */
void kern_cuda_t5_rmsnorm(const float *x, const uint16_t *w, void *y, kern_dtype y_dtype,
                          int64_t L, int64_t D, float eps, cudaStream_t stream);

/* Self-attention over L <= 512 tokens, T5's way: no 1/sqrt(hd) scale,
 * score(i, j, h) = q_i.k_j + pos[bucket[j - i + L - 1], h], softmax over
 * the L keys in fp32, out = P v with fp32 accumulation, stored bf16.
 * q, k, v, out (L, heads, hd) bf16; pos (n_buckets, heads) bf16; bucket
 * (2L - 1) int32 in [0, n_buckets) on the device; hd <= 128.
 * cuda/cuda_t5_attn.cu: one flash-style kernel (tensor-core mma.sync, sm_80
 * or later; online softmax; the bias added to the scores inside the tile
 * loop from a per-head row of 2L - 1 biases in shared memory, never an
 * L x L tensor). The probabilities are rounded to bf16 for P v, as in the
 * own flash kernel. */
void kern_cuda_t5_attention(const uint16_t *q, const uint16_t *k, const uint16_t *v,
                            const uint16_t *pos, const int32_t *bucket, uint16_t *out,
                            int64_t L, int64_t heads, int64_t hd, cudaStream_t stream);
#define KERN_CUDA_T5_MAX_LEN 512
#define KERN_CUDA_T5_MAX_HD 128

/* The gated feed-forward's product: y = gelu_tanh(g) * h, g and h (n)
 * fp32, y (n) bf16 (the input of fc2). */
void kern_cuda_t5_gated_gelu(const float *g, const float *h, uint16_t *y, int64_t n,
                             cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
