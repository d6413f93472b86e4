/* Random weights for a Wan VAE's tests (decoder and encoder, CPU and CUDA): one filler,
 * scaled as tests/ref/wan_vae_ref.py's random_weights, so that every VAE
 * test draws the same weights from the same seed. */
#ifndef SP_TEST_VAE_H
#define SP_TEST_VAE_H

#include "wan_vae.h"

/* Fills each tensor of table t at packed + its offset from the test
 * generator (sp_test.h): gammas U[0.5, 1.5), biases U[-0.2, 0.2), the rest
 * U[-a, a) with a = 1/sqrt(fan_in), the head conv 2a wide so that some
 * outputs reach the clamp. round_convs != 0 rounds every conv weight but
 * conv2's and conv1's to bf16, as the CUDA decoder and encoder store them.
 * Leaves the padding between tensors untouched. Takes the decoder's and
 * the encoder's tables (wan_vae_enc.h). */
void sp_test_vae_fill_weights(const wan_vae_table *t, float *packed, int round_convs);

#endif
