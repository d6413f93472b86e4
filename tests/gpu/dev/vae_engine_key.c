/* The engine sweep's configuration keys and knob ranges (vae_engine_key.h). */
#include "vae_engine_key.h"

#include <stdio.h>

void vae_engine_key_sort(vae_engine_key *k) {
  for (int i = 1; i < k->nknobs; i++)
    for (int j = i; j > 0 && k->type[j - 1] > k->type[j]; j--) {
      const int64_t t = k->type[j], v = k->val[j];
      k->type[j] = k->type[j - 1], k->val[j] = k->val[j - 1];
      k->type[j - 1] = t, k->val[j - 1] = v;
    }
}

int vae_engine_key_same(const vae_engine_key *a, const vae_engine_key *b) {
  if (a->engine < 0 || b->engine < 0) return 0;
  if (a->engine != b->engine || a->nknobs != b->nknobs) return 0;
  for (int i = 0; i < a->nknobs; i++)
    if (a->type[i] != b->type[i] || a->val[i] != b->val[i]) return 0;
  return 1;
}

void vae_engine_key_text(const vae_engine_key *k, char *out, size_t cap) {
  size_t n = 0;
  if (cap == 0) return;
  out[0] = '\0';
  for (int i = 0; i < k->nknobs && n + 1 < cap; i++) {
    const int w = snprintf(out + n, cap - n, "%s%lld=%lld", i ? " " : "", (long long)k->type[i],
                           (long long)k->val[i]);
    if (w < 0) break;
    n += (size_t)w;
  }
}

int vae_engine_knob_values(int64_t min, int64_t max, int64_t stride, int64_t *out) {
  if (stride < 1 || max < min || (max - min) / stride + 1 > VAE_ENGINE_KNOB_VALUES) return 0;
  int n = 0;
  for (int64_t v = min; v <= max; v += stride) out[n++] = v;
  return n;
}
