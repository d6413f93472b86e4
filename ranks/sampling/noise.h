/* Initial noise: standard normal float32 values from a counter-based
 * generator keyed by (seed, element index) only.
 *
 * Element k of the latent (flat index in [16,F,H,W] order) is
 *   w = Philox-4x32-10(counter = {k lo, k hi, 0, 0}, key = {seed lo, seed hi})
 *   u1 = ((w0:w1 >> 11) + 1) * 2^-53      in (0, 1]
 *   u2 = (w2:w3 >> 11) * 2^-53            in [0, 1)
 *   z  = sqrt(-2 ln u1) * cos(2 pi u2)    (Box-Muller, double), rounded to float
 * where w0:w1 is the 64-bit value with w0 high. ln and cos are evaluated with
 * this file's own series in +, -, *, / and sqrt only (all correctly rounded
 * in IEEE 754), not with libm, so the values are bit-identical on every
 * machine and any slice [first, first+n) equals the same slice of the whole.
 * A port to another backend must keep every operation separately rounded (no
 * FMA contraction). */
#ifndef RANK_NOISE_H
#define RANK_NOISE_H

#include <stddef.h>
#include <stdint.h>

/* Philox-4x32-10 block function (Salmon et al., SC11; Random123). */
void noise_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* x[j] = normal(seed, first + j) for j in [0, n).   x: (n) float32 */
void noise_fill_range(uint64_t seed, uint64_t first, float *x, size_t n);

/* The whole latent from index 0: x: (n) float32. */
void noise_fill(uint64_t seed, float *x, size_t n);

#endif
