/* The UMT5 text encoder's own CUDA ops (cuda/cuda_t5.cu): T5's RMS norm,
 * attention with T5's additive relative-position bias and no scaling, and
 * the gated-GELU product. The GEMMs are kern_cuda.h's (cuBLASLt, bf16
 * operands, fp32 accumulation). Every op here is fp32 arithmetic with bf16
 * or fp32 storage, deterministic (no atomics: a rerun gives the same bits),
 * and checked against the CPU encoder by tests/gpu/test_t5_gpu.c. */
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
 * score(i, j, h) = q_i.k_j + pos[bucket[j - i + L - 1], h], exact fp32
 * softmax over the L keys, out = P v in fp32, stored bf16.
 * q, k, v, out (L, heads, hd) bf16; pos (n_buckets, heads) bf16; bucket
 * (2L - 1) int32 in [0, n_buckets) on the device. One block per (4
 * queries, head): their scores in shared memory, each key row read once for
 * the 4. hd <= 256. */
void kern_cuda_t5_attention(const uint16_t *q, const uint16_t *k, const uint16_t *v,
                            const uint16_t *pos, const int32_t *bucket, uint16_t *out,
                            int64_t L, int64_t heads, int64_t hd, cudaStream_t stream);
#define KERN_CUDA_T5_MAX_LEN 512

/* The gated feed-forward's product: y = gelu_tanh(g) * h, g and h (n)
 * fp32, y (n) bf16 (the input of fc2). */
void kern_cuda_t5_gated_gelu(const float *g, const float *h, uint16_t *y, int64_t n,
                             cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
