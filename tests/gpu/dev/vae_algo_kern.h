/* Device helpers of the convolution algorithm benchmark (vae_algo_bench.c,
 * code in vae_algo_kern.cu): random operands and the comparison of two
 * outputs, in bf16 or fp32 storage. */
#ifndef DEV_VAE_ALGO_KERN_H
#define DEV_VAE_ALGO_KERN_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* p (n) = a * u, u uniform in [-1, 1) from a hash of (seed, index): the
 * same values for the same seed; bf16 (rounded to nearest even) or fp32.
 * Queued on stream. */
void vae_algo_fill(void *p, int64_t n, int bf16, float a, uint64_t seed, cudaStream_t stream);

/* a against b, n elements of bf16 or fp32: how many differ in their bits,
 * sum (a - b)^2 and sum b^2 (double). Synchronises stream. */
typedef struct vae_algo_diff {
  int64_t ndiff;
  double d2, r2;
} vae_algo_diff;
vae_algo_diff vae_algo_compare(const void *a, const void *b, int64_t n, int bf16,
                               cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
