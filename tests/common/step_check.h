/* The block's steps as a backend runs them, against their description
 * (ranks/nets/wan_dit/wan_steps.h), for tests/nets (CPU) and tests/gpu (CUDA).
 *
 * step_check_stage loads a one-block stage of the tiny synthetic model on a
 * backend, attaches a step log around set_prompt and around blocks, and
 * checks what each ran:
 *   - set_prompt: exactly the context steps (CROSS_K, CROSS_V) in order;
 *   - blocks, one chunk of rows: exactly the block steps (MODULATION ..
 *     GATE2) in the description's order;
 *   - blocks in chunks: MODULATION once, NORM1 twice per chunk (for k and
 *     v, again for the queries), every other block step once per chunk,
 *     first seen in the description's order;
 * and in every case each step passed exactly the block weights the
 * description gives it, and no other pointer of the block.
 * Inputs are fresh random numbers (sp_test.h; SP_SEED=n replays one). */
#ifndef SP_TEST_STEP_CHECK_H
#define SP_TEST_STEP_CHECK_H

#include <stdlib.h>

#include "log.h"
#include "sp_test.h"
#include "stage.h"
#include "wan_steps.h"

/* One entry against its step's description: the same block tensors, each
 * once (in any order: C leaves the order of a call's arguments open). */
static void step_check_entry(const char *what, int i, const wan_step_entry *e) {
  const wan_step_desc *d = &wan_steps[e->step];
  int same = e->nweights == d->nweights;
  for (int k = 0; same && k < d->nweights; k++) {
    int found = 0;
    for (int j = 0; j < e->nweights; j++) found += e->w[j] == (int)d->w[k];
    same = found == 1;
  }
  char got[64] = "";
  for (int j = 0; j < e->nweights; j++)
    snprintf(got + strlen(got), sizeof got - strlen(got), " %d", e->w[j]);
  CHECK(same, "%s: entry %d (%s) passed block tensors {%s }, the description %d of them", what,
           i, d->name, got, d->nweights);
}

/* A log against steps first .. end-1 of the description, the run of
 * steps after the first repeated per chunk of rows (chunks >= 1). */
static void step_check_log(const char *what, const wan_step_log *log, int first, int end,
                           int chunks) {
  CHECK(!log->stray, "%s: a block weight passed outside a step, or too many in one", what);
  CHECK(log->n <= WAN_STEP_LOG_MAX, "%s: %d entries, the log holds %d", what, log->n,
           WAN_STEP_LOG_MAX);
  if (log->n > WAN_STEP_LOG_MAX) return;
  int count[WAN_STEP_COUNT] = {0}, order_ok = 1, next = first;
  for (int i = 0; i < log->n; i++) {
    const wan_step_entry *e = &log->e[i];
    CHECK((int)e->step >= first && (int)e->step < end, "%s: entry %d is step %d, outside %d..%d", what,
             i, (int)e->step, (int)first, (int)end - 1);
    if ((int)e->step < first || (int)e->step >= end) continue;
    step_check_entry(what, i, e);
    if (count[e->step]++ == 0) order_ok &= (int)e->step == next++;
    if (chunks == 1)
      CHECK(i < end - first && (int)e->step == first + i,
               "%s: entry %d is %s, the description's step %d is %s", what, i,
               wan_steps[e->step].name, i, i < end - first ? wan_steps[first + i].name : "none");
  }
  CHECK(order_ok, "%s: steps first run out of the description's order", what);
  for (int s = first; s < end; s++) {
    /* Chunked, the CUDA block norms each chunk for its k and v, and again
     * for its queries (the normed rows are kept one chunk at a time). */
    int want = s == first ? 1 : s == WAN_STEP_NORM1 && chunks > 1 ? 2 * chunks : chunks;
    CHECK(count[s] == want, "%s: step %s ran %d times, expected %d", what, wan_steps[s].name,
             count[s], want);
  }
}

/* The description itself: every block tensor read by exactly one step. */
static void step_check_description(void) {
  int seen[WAN_BLOCK_T_COUNT] = {0};
  for (int s = 0; s < WAN_STEP_COUNT; s++) {
    CHECK(wan_steps[s].name != NULL, "step %d has no description", s);
    for (int k = 0; k < wan_steps[s].nweights; k++) seen[wan_steps[s].w[k]]++;
  }
  for (int t = 0; t < WAN_BLOCK_T_COUNT; t++)
    CHECK(seen[t] == 1, "block tensor %d is read by %d steps of the description", t, seen[t]);
}

/* Block 0 of synth:wan2.1-tiny on one stage of device dev, 16 tokens, in
 * chunks of chunk_rows (0: one chunk; CUDA only), streamed or resident. */
static void step_check_stage(const char *what, rank_device dev, int64_t chunk_rows, int streamed) {
  rank_model *m = NULL;
  CHECK(rank_model_open("synth:wan2.1-tiny", 0, &m) == SP_OK, "%s: open the model", what);
  if (!m) return;
  const wan_config *c = &rank_model_get_info(m)->config;
  const uint8_t stream_one = 1;
  rank_stage_cfg cfg = {.first_block = 0, .last_block = 0, .embed = 1, .head = 0, .prompts = 1,
                        .lat_f = 1, .lat_h = 8, .lat_w = 8, .device = dev, .cuda_device = 0,
                        .streamed = streamed ? &stream_one : NULL, .prefetch_depth = 1,
                        .act_buffers = 1, .chunk_rows = chunk_rows};
  rank_stage *s = NULL;
  uint64_t bytes = 0;
  CHECK(rank_stage_load(m, &cfg, &s, &bytes) == SP_OK, "%s: load the stage", what);
  if (!s) {
    rank_model_close(m);
    return;
  }
  const int64_t L = rank_stage_tokens(s), ctx_rows = 3;
  const int64_t nlat = c->in_dim * cfg.lat_f * cfg.lat_h * cfg.lat_w;
  float *context = sp_test_alloc(ctx_rows * c->text_dim), *ctx = sp_test_alloc(c->text_len * c->dim);
  float *lat = rank_stage_host_alloc(&cfg, (size_t)nlat * sizeof(float));
  sp_rand_fill(context, ctx_rows * c->text_dim, -1.0, 1.0);
  sp_rand_fill(lat, nlat, -1.0, 1.0);
  rank_stage_embed_text(s, context, ctx_rows, ctx);

  static wan_step_log log; /* 1024 entries: too large for the stack */
  memset(&log, 0, sizeof log);
  wan_step_log_attach(&log);
  rank_stage_set_prompt(s, 0, ctx);
  wan_step_log_attach(NULL);
  char name[160];
  snprintf(name, sizeof name, "%s set_prompt", what);
  step_check_log(name, &log, WAN_STEP_FIRST_CONTEXT, WAN_STEP_FIRST_BLOCK, 1);

  const int slot = 0, buf = 0;
  rank_stage_embed(s, lat, 999.0, 999.0, buf);
  memset(&log, 0, sizeof log);
  wan_step_log_attach(&log);
  rank_stage_blocks(s, 1, &slot, &buf);
  wan_step_log_attach(NULL);
  rank_stage_sync(s);
  const int64_t rows = chunk_rows > 0 && chunk_rows < L ? chunk_rows : L;
  snprintf(name, sizeof name, "%s blocks", what);
  step_check_log(name, &log, WAN_STEP_FIRST_BLOCK, WAN_STEP_COUNT, (int)((L + rows - 1) / rows));

  rank_stage_host_free(&cfg, lat);
  free(context);
  free(ctx);
  rank_stage_free(s);
  rank_model_close(m);
}

#endif
