/* UMT5 encoder, CPU forward (see umt5.h; UMT5.md "Forward, op by op"). */
#include "umt5.h"

#include <math.h>
#include <stdlib.h>

#include "kern_cpu.h"
#include "log.h"

int32_t umt5_rel_bucket(int64_t rel, int64_t buckets, int64_t max_dist) {
  const int64_t half = buckets / 2;  /* buckets per sign */
  const int64_t exact = half / 2;    /* distances 0 .. exact - 1 have a bucket each */
  int64_t b = rel > 0 ? half : 0;
  int64_t a = rel < 0 ? -rel : rel;
  if (a < exact) return (int32_t)(b + a);
  /* Log-spaced beyond: exact + floor(log(a / exact) / log(max_dist / exact)
   * * (half - exact)), capped at the last bucket. Computed in double; the
   * published float32 computation gives the same bucket for every distance
   * a 512-token prompt has (UMT5.md "Position buckets"). */
  int64_t large = exact + (int64_t)(log((double)a / (double)exact) /
                                    log((double)max_dist / (double)exact) * (double)(half - exact));
  if (large > half - 1) large = half - 1;
  return (int32_t)(b + large);
}

int umt5_scratch_create(const umt5_config *c, int64_t max_len, umt5_scratch **out) {
  umt5_scratch *s = calloc(1, sizeof *s);
  if (!s) goto oom;
  s->max_len = max_len;
  size_t L = (size_t)max_len;
  s->xn = malloc(L * (size_t)c->dim * sizeof(float));
  s->q = malloc(L * (size_t)c->dim_attn * sizeof(float));
  s->k = malloc(L * (size_t)c->dim_attn * sizeof(float));
  s->v = malloc(L * (size_t)c->dim_attn * sizeof(float));
  s->att = malloc(L * (size_t)c->dim_attn * sizeof(float));
  s->y = malloc(L * (size_t)c->dim * sizeof(float));
  s->h_gate = malloc(L * (size_t)c->ffn * sizeof(float));
  s->h_lin = malloc(L * (size_t)c->ffn * sizeof(float));
  s->bucket = malloc((2 * L - 1) * sizeof(int32_t));
  if (!s->xn || !s->q || !s->k || !s->v || !s->att || !s->y || !s->h_gate || !s->h_lin ||
      !s->bucket)
    goto oom;
  *out = s;
  return SP_OK;
oom:
  umt5_scratch_free(s);
  sp_log_error("umt5: out of memory for the scratch of %lld tokens", (long long)max_len);
  return SP_ERR_RUNTIME;
}

void umt5_scratch_free(umt5_scratch *s) {
  if (!s) return;
  free(s->xn);
  free(s->q);
  free(s->k);
  free(s->v);
  free(s->att);
  free(s->y);
  free(s->h_gate);
  free(s->h_lin);
  free(s->bucket);
  free(s);
}

void umt5_layer_forward(const umt5_config *c, const umt5_layer *w, float *x, int64_t L,
                        umt5_scratch *s) {
  if (L < 1 || L > s->max_len) sp_fatal("umt5: %lld tokens, scratch for 1..%lld", (long long)L,
                                        (long long)s->max_len);
  const int64_t D = c->dim, A = c->dim_attn, H = c->heads;
  /* Self-attention: T5 applies no 1/sqrt(head width) to the scores. */
  for (int64_t r = -(L - 1); r <= L - 1; r++)
    s->bucket[r + L - 1] = umt5_rel_bucket(r, c->buckets, c->max_dist);
  kern_cpu_rmsnorm(x, w->norm1, s->xn, L, D, UMT5_EPS);
  kern_cpu_linear(s->xn, w->q, NULL, s->q, L, D, A);
  kern_cpu_linear(s->xn, w->k, NULL, s->k, L, D, A);
  kern_cpu_linear(s->xn, w->v, NULL, s->v, L, D, A);
  kern_cpu_attention_relbias(s->q, s->k, s->v, w->pos, s->bucket, 1.0f, s->att, L, L, H, A / H);
  kern_cpu_linear(s->att, w->o, NULL, s->y, L, A, D);
  kern_cpu_gated_add(x, s->y, NULL, L, D);
  /* Gated-GELU feed-forward. */
  kern_cpu_rmsnorm(x, w->norm2, s->xn, L, D, UMT5_EPS);
  kern_cpu_linear(s->xn, w->gate, NULL, s->h_gate, L, D, c->ffn);
  kern_cpu_gelu_tanh(s->h_gate, L * c->ffn);
  kern_cpu_linear(s->xn, w->fc1, NULL, s->h_lin, L, D, c->ffn);
  const int64_t n = L * c->ffn;
  float *hl = s->h_lin;
  const float *hg = s->h_gate;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; i++) hl[i] *= hg[i];
  kern_cpu_linear(s->h_lin, w->fc2, NULL, s->y, L, c->ffn, D);
  kern_cpu_gated_add(x, s->y, NULL, L, D);
}

void umt5_final_norm(const umt5_config *c, const float *w, float *x, int64_t L) {
  kern_cpu_rmsnorm(x, w, x, L, c->dim, UMT5_EPS);
}
