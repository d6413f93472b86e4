/* UMT5 encoder, CPU forward (see umt5.h; UMT5.md "Forward, op by op"),
 * and the CPU backend (umt5_backend.h). */
#include "umt5.h"

#include <math.h>
#include <stdlib.h>

#include "kern_cpu.h"
#include "log.h"
#include "umt5_backend.h"

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

/* ---------------------------------------------------------------- backend */

/* One layer at a time in fp32, run from the driver's buffer. */
typedef struct cpu_encoder {
  umt5_config c;
  umt5_scratch *s;
  umt5_layer w;      /* the layer set last, in the driver's buffer */
  int layer;         /* which (-1: none yet) */
  const float *norm; /* (dim) the final norm's weight, in the driver's buffer, or NULL */
} cpu_encoder;

static int cpu_create(const umt5_config *c, int cuda_device, int64_t max_len, void **out) {
  cpu_encoder *e = calloc(1, sizeof *e);
  if (!e) {
    sp_log_error("umt5: out of memory for the encoder");
    return SP_ERR_RUNTIME;
  }
  e->c = *c;
  e->layer = -1;
  const int rc = umt5_scratch_create(c, max_len, &e->s);
  if (rc != SP_OK) {
    free(e);
    return rc;
  }
  *out = e;
  return SP_OK;
}

static void cpu_destroy(void *p) {
  cpu_encoder *e = p;
  if (!e) return;
  umt5_scratch_free(e->s);
  free(e);
}

static void cpu_set_layer(void *p, int layer, const float *buf) {
  cpu_encoder *e = p;
  umt5_layer_bind(&e->c, buf, &e->w);
  e->layer = layer;
}

static void cpu_set_norm(void *p, const float *buf) { ((cpu_encoder *)p)->norm = buf; }

static void cpu_run(void *p, int l0, int l1, int norm, float *x, int64_t L) {
  cpu_encoder *e = p;
  if ((l1 > l0 && (l1 != l0 + 1 || l0 != e->layer)) || (norm && !e->norm) || L < 1 ||
      L > e->s->max_len)
    sp_fatal("internal: umt5 cpu: layers %d..%d%s on %lld tokens asked; it holds layer %d%s "
             "and scratch for %lld tokens", l0, l1 - 1, norm ? " and the norm" : "",
             (long long)L, e->layer, e->norm ? " and the norm" : "", (long long)e->s->max_len);
  if (l1 > l0) umt5_layer_forward(&e->c, &e->w, x, L, e->s);
  if (norm) umt5_final_norm(&e->c, e->norm, x, L);
}

static const umt5_backend cpu_ops = {.all_layers = 0,
                                     .create = cpu_create,
                                     .destroy = cpu_destroy,
                                     .set_layer = cpu_set_layer,
                                     .set_norm = cpu_set_norm,
                                     .run = cpu_run};

const net_backend umt5_cpu = {umt5_net, RANK_DEVICE_CPU, &cpu_ops};
