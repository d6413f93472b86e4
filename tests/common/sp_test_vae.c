/* The VAE tests' weight filler (sp_test_vae.h). */
#include "sp_test_vae.h"

#include <math.h>
#include <string.h>

#include "kern_dtype.h"
#include "sp_test.h"

void sp_test_vae_fill_weights(const wan_vae_table *t, float *packed, int round_convs) {
  for (int i = 0; i < t->count; i++) {
    const wan_vae_tensor *e = &t->t[i];
    const char *tail = strrchr(e->name, '.');
    float *p = packed + e->offset;
    if (strcmp(tail, ".gamma") == 0) {
      sp_rand_fill(p, e->numel, 0.5, 1.5);
    } else if (strcmp(tail, ".bias") == 0) {
      sp_rand_fill(p, e->numel, -0.2, 0.2);
    } else {
      double a = 1.0 / sqrt((double)(e->numel / e->shape[0]));
      if (strcmp(e->name, "decoder.head.2.weight") == 0) a *= 2.0;
      sp_rand_fill(p, e->numel, -a, a);
      /* the CUDA decoder's and encoder's conv weights are bf16 (or TF32
       * products); the 1x1x1 convs outside them (conv2, conv1) stay fp32 */
      if (round_convs == SP_TEST_VAE_FP32 || strcmp(e->name, "conv2.weight") == 0 ||
          strcmp(e->name, "conv1.weight") == 0)
        continue;
      for (int64_t k = 0; k < e->numel; k++)
        p[k] = round_convs == SP_TEST_VAE_BF16
                   ? kern_bf16_to_f32(kern_f32_to_bf16(p[k]))
                   : kern_f32_round_tf32(p[k], round_convs == SP_TEST_VAE_TF32_TRUNCATE);
    }
  }
}
