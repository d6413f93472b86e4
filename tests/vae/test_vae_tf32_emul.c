/* The error of the CUDA decoder's tf32 mode, emulated on the CPU: the fp32
 * CPU decoder with the inputs of every product the GPU runs on TF32 tensor
 * cores rounded to TF32 (wan_vae_decoder_tf32: each cuDNN convolution's
 * input and cache, the middle attention's q, k, v; the conv weights by the
 * filler, SP_TEST_VAE_TF32_*), against the same decoder in fp32. How cuDNN
 * and cuBLASLt round fp32 into TF32 is not documented, so both candidates
 * run: to nearest (ties away) and truncation (kern_f32_round_tf32).
 *
 * Where the bound comes from: one TF32 rounding moves a value by up to
 * 2^-11 (nearest) or 2^-10 (truncation) of itself; a conv output sums
 * hundreds of such products, so their independent errors leave it some
 * 1e-4 to 1e-3 off, and a decode stacks about 30 convs, each renormalised
 * by the next RMS norm. Measured here (seeds 1-6): 7.6e-4 to 1.4e-3
 * (nearest) and 1.6e-3 to 3.1e-3 (truncation, whose errors lean one way).
 * The GPU's tf32 mode also rounds the probabilities of the attention's
 * P v GEMM (not emulated: one operand of one of ~30 products) and
 * accumulates in another order (fp32's own ~1e-6), so
 * SP_TEST_VAE_TOL_TF32 (1e-2, sp_test_vae.h) holds the GPU to about three
 * times the worst emulated error, while a lost tap, cache or channel gives
 * errors of order 1.
 *
 * Checks, per decoder and rounding:
 * - the emulated error is at most half of SP_TEST_VAE_TOL_TF32;
 * - it is above 1e-5 (the rounding happened: reordering fp32 alone gives
 *   ~1e-6), and truncation's worst is above nearest's best;
 * - mode OFF after a TF32 decode gives the fp32 bits again.
 * The decoders are test_vae_gpu.c's kinds of cases (narrow, odd sizes,
 * 1-3 latent frames) and the published structure at width 32; weights
 * scaled as every VAE test's (sp_test_vae.h), random latents (seed
 * printed, SP_SEED=n replays). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sp_test.h"
#include "sp_test_vae.h"
#include "wan_vae.h"

typedef struct ecase {
  int64_t dim, h, w, F;
  int n_mult;
  int64_t num_res;
  int temporal[3];
} ecase;

static const ecase cases[] = {
    {8, 3, 5, 2, 4, 2, {1, 1, 0}},  /* the published structure, narrow */
    {16, 5, 3, 1, 4, 2, {1, 1, 0}}, /* one latent frame */
    {8, 7, 9, 3, 4, 2, {1, 1, 0}},  /* three chunks: the caches in use */
    {16, 5, 5, 3, 3, 1, {0, 1, 0}}, /* 3 levels, late time upsampling */
    {32, 4, 6, 2, 4, 2, {1, 1, 0}}, /* the published structure at width 32 */
};

int main(void) {
  sp_test_begin("test_vae_tf32_emul");
  const double half = SP_TEST_VAE_TOL_TF32 / 2;
  double worst[3] = {0, 0, 0}, best[3] = {1, 1, 1};
  printf("# relative L2 against the fp32 CPU decoder; bound %.1e (half of the GPU's %.0e)\n",
         half, SP_TEST_VAE_TOL_TF32);
  printf("# %-36s %12s %12s\n", "decoder", "nearest", "truncation");
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const ecase *k = &cases[ci];
    wan_vae_config c;
    sp_test_vae_config_narrow(&c, 0, k->dim, k->n_mult, k->num_res, k->temporal);
    static wan_vae_weights wt;
    static wan_vae_table t;
    wan_vae_table_make(&c, &wt, &t);
    float *w[3];
    const uint64_t st = sp_rand_state_get();
    for (int m = 0; m < 3; m++) { /* fp32, TF32 nearest, TF32 truncated: the same draws */
      sp_rand_state_set(st);
      w[m] = sp_test_vae_new_weights(&t, m == 0   ? SP_TEST_VAE_FP32
                                         : m == 1 ? SP_TEST_VAE_TF32_NEAREST
                                                  : SP_TEST_VAE_TF32_TRUNCATE);
    }
    const int64_t nz = 16 * k->F * k->h * k->w;
    const int64_t s = wan_vae_out_scale(&c);
    const int64_t n = 3 * wan_vae_out_frames(&c, k->F) * k->h * k->w * s * s;
    float *z = sp_test_malloc((size_t)nz * sizeof(float));
    sp_rand_fill(z, nz, -2.0, 2.0);
    float *ref = sp_test_alloc(n), *v = sp_test_alloc(n);
    wan_vae_decoder *d;
    if (wan_vae_decoder_create(&c, k->h, k->w, &d) != SP_OK) {
      CHECK(0, "case %zu: decoder refused", ci);
      continue;
    }
    wan_vae_table_bind(&t, w[0]);
    wan_vae_decode(d, &wt, z, k->F, ref);
    double err[3] = {0, 0, 0};
    for (int m = 1; m < 3; m++) {
      wan_vae_table_bind(&t, w[m]);
      wan_vae_decoder_tf32(d, m == 1 ? WAN_VAE_TF32_NEAREST : WAN_VAE_TF32_TRUNCATE);
      wan_vae_decode(d, &wt, z, k->F, v);
      err[m] = sp_test_rel_l2_f32(v, ref, n);
      worst[m] = fmax(worst[m], err[m]);
      best[m] = fmin(best[m], err[m]);
    }
    char name[96];
    snprintf(name, sizeof name, "dim %lld levels %d res %lld F %lld %lldx%lld",
             (long long)k->dim, k->n_mult, (long long)k->num_res, (long long)k->F,
             (long long)k->h, (long long)k->w);
    printf("  %-36s %12.3e %12.3e\n", name, err[1], err[2]);
    for (int m = 1; m < 3; m++) {
      const char *how = m == 1 ? "nearest" : "truncation";
      CHECK(err[m] <= half, "%s, %s: %.3e above %.1e", name, how, err[m], half);
      CHECK(err[m] > 1e-5, "%s, %s: %.3e, no rounding seen", name, how, err[m]);
    }
    wan_vae_table_bind(&t, w[0]);
    wan_vae_decoder_tf32(d, WAN_VAE_TF32_OFF);
    wan_vae_decode(d, &wt, z, k->F, v);
    CHECK(memcmp(v, ref, (size_t)n * sizeof *v) == 0, "%s: mode off is not the fp32 decode",
          name);
    wan_vae_decoder_free(d);
    for (int m = 0; m < 3; m++) free(w[m]);
    free(z), free(ref), free(v);
  }
  printf("# worst: nearest %.3e, truncation %.3e\n", worst[1], worst[2]);
  CHECK(worst[2] > best[1], "truncation's worst %.3e not above nearest's best %.3e", worst[2],
        best[1]);
  return sp_test_end();
}
