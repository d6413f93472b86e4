/* Random weights for the Wan 2.2 VAE's tests (CPU and CUDA): one filler,
 * scaled as tests/ref/wan_vae22_ref.py's random_weights, so every test of
 * the VAE draws the same weights from the same seed. */
#ifndef SP_TEST_VAE22_H
#define SP_TEST_VAE22_H

#include "wan_vae22.h"

/* Fills each tensor of table t at packed + its offset from the test
 * generator (sp_test.h): gammas U[0.5, 1.5), biases U[-0.2, 0.2), the rest
 * U[-a, a) with a = 1/sqrt(fan_in), the decoder's head conv 2a wide so that
 * some outputs reach the clamp. round_convs != 0 rounds every convolution
 * weight but the 1x1x1 conv1's and conv2's to bf16, as the CUDA coders
 * store them. Leaves the padding between tensors untouched. */
void sp_test_vae22_fill_weights(const wan_vae_table *t, float *packed, int round_convs);

#endif
