/* Prompts' tokens through the whole UMT5 encoder (t5_model_encode in
 * t5_file.h): the embedding rows of every sequence read at once, then each
 * layer read once into one buffer and run on every sequence in turn, then
 * the final norm. Memory: one layer's weights and one sequence's scratch,
 * whatever the number of prompts. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "t5_file.h"
#include "tokenizer.h"
#include "umt5_gpu.h"

const char t5_wan_negative_prompt[] =
    "色调艳丽，过曝，静态，细节模糊不清，字幕，风格，作品，画作，画面，静止，整体发灰，"
    "最差质量，低质量，JPEG压缩残留，丑陋的，残缺的，多余的手指，画得不好的手部，"
    "画得不好的脸部，畸形的，毁容的，形态畸形的肢体，手指融合，静止不动的画面，"
    "杂乱的背景，三条腿，背景人很多，倒着走";

const char *t5_negative_or_default(const char *text) {
  if (!text) return t5_wan_negative_prompt;
  char *clean = NULL, err[256];
  size_t clean_len = 0;
  /* Invalid UTF-8 is kept: t5_prompt_tokenize refuses it, naming it. */
  int blank = tok_clean_wan(text, strlen(text), &clean, &clean_len, err, sizeof err) == 0 &&
              clean_len == 0;
  free(clean);
  return blank ? t5_wan_negative_prompt : text;
}

int t5_prompt_tokenize(const tok_model *tok, const char *text, size_t len, const char *where,
                       int32_t *ids, int64_t *n) {
  char err[256], *clean = NULL;
  size_t clean_len = 0;
  if (tok_clean_wan(text, len, &clean, &clean_len, err, sizeof err) != 0) {
    sp_log_error("%s: %s", where, err);
    return SP_ERR_INPUT;
  }
  free(clean);
  if (clean_len == 0) {
    sp_log_error("%s: the prompt is empty (after Wan's cleaning): there is nothing to encode",
                 where);
    return SP_ERR_INPUT;
  }
  size_t got = 0, dropped = 0;
  if (tok_prompt_encode(tok, text, len, TOK_CONTEXT, ids, &got, &dropped) != SP_OK) {
    sp_log_error("%s: not encoded", where);
    return SP_ERR_INPUT;
  }
  if (dropped) sp_log_warn("%s: %zu tokens dropped (the prompt keeps %zu)", where, dropped, got);
  *n = (int64_t)got;
  return SP_OK;
}

uint64_t t5_encode_host_bytes(const t5_model_info *in, int64_t total, int64_t longest) {
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

int t5_model_encode(t5_model *m, int count, int32_t *const *ids, const int64_t *n,
                    float *const *out) {
  const umt5_config *c = &t5_model_get_info(m)->config;
  int64_t longest = 0;
  int rc = embed_rows(m, count, ids, n, out, &longest);
  if (rc != SP_OK || count == 0) return rc;

  umt5_scratch *s = NULL;
  if ((rc = umt5_scratch_create(c, longest, &s)) != SP_OK) return rc;
  float *buf = malloc((size_t)umt5_layer_floats(c) * sizeof *buf);
  if (!buf) {
    sp_log_error("text encoder: out of memory for one layer's weights (%lld floats)",
                 (long long)umt5_layer_floats(c));
    umt5_scratch_free(s);
    return SP_ERR_RUNTIME;
  }
  umt5_layer w;
  umt5_layer_bind(c, buf, &w);
  for (int l = 0; l < c->layers && rc == SP_OK; l++) {
    rc = t5_model_read_layer(m, l, buf);
    for (int i = 0; rc == SP_OK && i < count; i++) umt5_layer_forward(c, &w, out[i], n[i], s);
  }
  if (rc == SP_OK) rc = t5_model_read_norm(m, buf);
  for (int i = 0; rc == SP_OK && i < count; i++) umt5_final_norm(c, buf, out[i], n[i]);
  free(buf);
  umt5_scratch_free(s);
  return rc;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int t5_model_encode_gpu(t5_model *m, int cuda_device, int count, int32_t *const *ids,
                        const int64_t *n, float *const *out, t5_encode_times *times) {
  const umt5_config *c = &t5_model_get_info(m)->config;
  int64_t longest = 0;
  double t0 = now_s();
  int rc = embed_rows(m, count, ids, n, out, &longest);
  if (rc != SP_OK || count == 0) return rc;
  umt5_gpu *g = NULL;
  if ((rc = umt5_gpu_create(c, cuda_device, longest, &g)) != SP_OK) return rc;
  float *buf = sp_xmalloc((size_t)umt5_layer_floats(c) * sizeof *buf);
  for (int l = 0; l < c->layers && rc == SP_OK; l++)
    if ((rc = t5_model_read_layer(m, l, buf)) == SP_OK) umt5_gpu_set_layer(g, l, buf);
  if (rc == SP_OK && (rc = t5_model_read_norm(m, buf)) == SP_OK) umt5_gpu_set_norm(g, buf);
  free(buf);
  double t1 = now_s(), first = t1;
  for (int i = 0; rc == SP_OK && i < count; i++) {
    umt5_gpu_forward(g, out[i], n[i]);
    if (i == 0) first = now_s();
  }
  double t2 = now_s();
  umt5_gpu_free(g);
  if (times) *times = (t5_encode_times){.load_s = t1 - t0, .encode_s = t2 - t1,
                                        .first_s = first - t1};
  return rc;
}
