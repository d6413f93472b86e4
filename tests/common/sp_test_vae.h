/* Random weights for a Wan VAE's tests (decoder and encoder, CPU and CUDA): one filler,
 * scaled as tests/ref/wan_vae_ref.py's random_weights, so that every VAE
 * test draws the same weights from the same seed. */
#ifndef SP_TEST_VAE_H
#define SP_TEST_VAE_H

#include "wan_vae.h"

/* Fills each tensor of table t at packed + its offset from the test
 * generator (sp_test.h): gammas U[0.5, 1.5), biases U[-0.2, 0.2), the rest
 * U[-a, a) with a = 1/sqrt(fan_in), the head conv 2a wide so that some
 * outputs reach the clamp. round_convs (SP_TEST_VAE_*) rounds every conv
 * weight but conv2's and conv1's: to bf16, as the CUDA decoder and encoder
 * store them in bf16, or to TF32 (nearest or truncated), as their tf32
 * mode multiplies them. Leaves the padding between tensors untouched.
 * Takes the decoder's and the encoder's tables (wan_vae_enc.h). */
enum {
  SP_TEST_VAE_FP32 = 0,
  SP_TEST_VAE_BF16 = 1,
  SP_TEST_VAE_TF32_NEAREST = 2,
  SP_TEST_VAE_TF32_TRUNCATE = 3
};
void sp_test_vae_fill_weights(const wan_vae_table *t, float *packed, int round_convs);

/* The CUDA decoder's tf32 mode against the CPU decoder in fp32, relative
 * L2 of a video: tests/vae/test_vae_tf32_emul.c measures the CPU emulation
 * of that mode (conv inputs, caches, attention operands and conv weights
 * rounded to TF32, both roundings) and checks it stays within half of
 * this bound; tests/gpu/test_vae_gpu.c holds the GPU to it. The value and
 * what it rests on: that test's head comment. */
#define SP_TEST_VAE_TOL_TF32 1e-2

#endif
