/* The text encoder's driver (umt5_encode.h): the embedding rows of every
 * sequence read at once, then each layer read once into one buffer and
 * handed to the backend, then the final norm. */
#include "umt5_encode.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "progress.h"
#include "tokenizer.h"
#include "umt5_backend.h"

uint64_t umt5_encode_host_bytes(const t5_model_info *in, int64_t total, int64_t longest) {
  const umt5_config *c = &in->config;
  const uint64_t D = (uint64_t)c->dim, A = (uint64_t)c->dim_attn, F = (uint64_t)c->ffn;
  const uint64_t T = (uint64_t)total, L = (uint64_t)longest;
  const uint64_t layer = (uint64_t)umt5_layer_floats(c);
  const uint64_t out = T * D * 4;
  /* The embedding: ids and rows, and with verify the 64 MiB reading chunk. */
  const uint64_t embed = T * 4 + T * D * 4 + (64u << 20) + D * 4;
  /* The layers: one in fp32, its bf16 staging (the file's own, held from
   * open), one sequence's scratch (umt5_scratch_create). */
  const uint64_t stage = in->id.dtype == KERN_DTYPE_BF16 ? layer * 2 : 0;
  const uint64_t scratch = L * (2 * D + 4 * A + 2 * F) * 4 + (2 * L) * 4;
  const uint64_t layers = layer * 4 + scratch;
  return out + stage + (embed > layers ? embed : layers);
}

/* Checks the counts and writes each sequence's embedding rows into out
 * (all rows read at once); *longest gets the longest count. */
static int embed_rows(t5_model *m, int count, int32_t *const *ids, const int64_t *n,
                      float *const *out, int64_t *longest) {
  const umt5_config *c = &t5_model_get_info(m)->config;
  int64_t total = 0;
  *longest = 0;
  for (int i = 0; i < count; i++) {
    if (n[i] < 1 || n[i] > TOK_CONTEXT) {
      sp_log_error("text encoder: sequence %d has %lld tokens, not 1..%d", i, (long long)n[i],
                   TOK_CONTEXT);
      return SP_ERR_INPUT;
    }
    total += n[i];
    if (n[i] > *longest) *longest = n[i];
  }
  if (count == 0) return SP_OK;
  int32_t *all = sp_xmalloc((size_t)total * sizeof *all);
  float *rows = sp_xmalloc((size_t)total * (size_t)c->dim * sizeof *rows);
  int64_t at = 0;
  for (int i = 0; i < count; i++, at += n[i - 1]) memcpy(all + at, ids[i], (size_t)n[i] * 4);
  int rc = t5_model_read_embed(m, all, total, rows);
  at = 0;
  for (int i = 0; rc == SP_OK && i < count; at += n[i], i++)
    memcpy(out[i], rows + at * c->dim, (size_t)(n[i] * c->dim) * sizeof(float));
  free(all);
  free(rows);
  return rc;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* An encoding in progress: the backend, its encoder, the job, the times. */
typedef struct encoding {
  const umt5_backend *b;
  void *e;
  const umt5_encode_job *j;
  double run_s, first_s;
} encoding;

/* Layers l0 .. l1 - 1 (and with norm the final norm) on every sequence. */
static void run_all(encoding *x, int l0, int l1, int norm) {
  for (int i = 0; i < x->j->count; i++) {
    const double t = now_s();
    x->b->run(x->e, l0, l1, norm, x->j->out[i], x->j->n[i]);
    const double dt = now_s() - t;
    x->run_s += dt;
    if (i == 0) x->first_s = dt;
  }
}

/* Every layer read into buf and handed over (run at once by a backend of
 * one layer at a time), a progress line counting them (progress.h), then
 * the final norm's weight. */
static int place_weights(t5_model *m, encoding *x, float *buf) {
  const int64_t layers = t5_model_get_info(m)->config.layers;
  int rc = SP_OK;
  sp_progress_begin(x->b->all_layers ? "text encoder: reading layers" : "text encoder: encoding",
                      "layers", (uint64_t)layers);
  for (int l = 0; l < layers && rc == SP_OK; l++) {
    if ((rc = t5_model_read_layer(m, l, buf)) != SP_OK) break;
    x->b->set_layer(x->e, l, buf);
    if (!x->b->all_layers) run_all(x, l, l + 1, 0);
    sp_progress_add(1);
  }
  sp_progress_end();
  if (rc == SP_OK && (rc = t5_model_read_norm(m, buf)) == SP_OK) x->b->set_norm(x->e, buf);
  return rc;
}

int umt5_encode(t5_model *m, const umt5_encode_job *j, umt5_encode_times *times) {
  const umt5_config *c = &t5_model_get_info(m)->config;
  encoding x = {.b = net_backend_ops(umt5_net(), j->device), .j = j};
  if (!x.b) return SP_ERR_INPUT;
  const double t0 = now_s();
  int64_t longest = 0;
  int rc = embed_rows(m, j->count, j->ids, j->n, j->out, &longest);
  if (rc != SP_OK || j->count == 0) return rc;
  if ((rc = x.b->create(c, j->cuda_device, longest, &x.e)) != SP_OK) return rc;
  float *buf = malloc((size_t)umt5_layer_floats(c) * sizeof *buf);
  if (!buf) {
    sp_log_error("text encoder: out of memory for one layer's weights (%lld floats)",
                 (long long)umt5_layer_floats(c));
    x.b->destroy(x.e);
    return SP_ERR_RUNTIME;
  }
  rc = place_weights(m, &x, buf);
  const double t1 = now_s();
  if (rc == SP_OK) run_all(&x, x.b->all_layers ? 0 : (int)c->layers, (int)c->layers, 1);
  const double t2 = now_s();
  free(buf);
  x.b->destroy(x.e);
  if (times)
    *times = (umt5_encode_times){.load_s = t1 - t0 - (x.b->all_layers ? 0.0 : x.run_s),
                                 .encode_s = x.b->all_layers ? t2 - t1 : x.run_s,
                                 .first_s = x.first_s};
  return rc;
}
