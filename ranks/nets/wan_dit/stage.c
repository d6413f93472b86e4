/* Stage dispatch to the backend of the stage's device (see stage.h,
 * stage_impl.h). */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "stage_impl.h"

int64_t rank_act_floats(const wan_config *c, int64_t tokens) {
  return tokens * c->dim + 7 * c->dim * wan_time_tables(c);
}

/* The tokens the second time table is for: latent frame 0's on a TI2V
 * model (I2V.md "A timestep per token"), none on the others. */
static int64_t first_tokens(const wan_config *c, rank_grid g) {
  return wan_time_tables(c) == 2 ? g.h * g.w : 0;
}

static rank_grid grid_of(const wan_config *c, int64_t lat_f, int64_t lat_h, int64_t lat_w) {
  return (rank_grid){lat_f / c->patch[0], lat_h / c->patch[1], lat_w / c->patch[2]};
}

/* The rows of a sequence of `tokens` this stage holds: its slice under a
 * sequence-parallel group, else all of them. */
static int64_t held_tokens(const rank_stage_cfg *cfg, int64_t tokens) {
  if (!cfg->seq) return tokens;
  return plan_seq_rows(tokens, cfg->seq->n, cfg->seq->me);
}

int rank_stage_precision_check(const rank_model_info *mi, wan_precision p, int fp8_fast_accum) {
  const char *file = mi->id.source;
  if (fp8_fast_accum && p != WAN_PRECISION_FP8) {
    sp_log_error("--fp8-accum fast: %s runs at precision %s here; fast accumulation is of the "
                 "fp8 W8A8 GEMMs only (--precision fp8, or an fp8 file without --precision)",
                 file, wan_precision_name(p));
    return SP_ERR_INPUT;
  }
  if (mi->precision != WAN_PRECISION_BF16 && p != WAN_PRECISION_BF16 && p != mi->precision) {
    sp_log_error("--precision %s: %s holds %s weights: it runs in %s (its codes as they are) or "
                 "bf16 (its weights dequantised)", wan_precision_name(p), file,
                 wan_precision_name(mi->precision), wan_precision_name(mi->precision));
    return SP_ERR_INPUT;
  }
  if (mi->quant && mi->precision == WAN_PRECISION_BF16 && p != WAN_PRECISION_BF16) {
    sp_log_error("--precision %s: %s holds GGUF-quantized weights, which run in bf16 only "
                 "(dequantised for each GEMM); leave --precision out",
                 wan_precision_name(p), file);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

int rank_stage_fp8_accum_check(rank_device dev, int fp8_fast_accum) {
  if (!fp8_fast_accum || dev != RANK_DEVICE_CPU) return SP_OK;
  sp_log_error("--fp8-accum fast: the DiT runs on the CPU here, whose fp8 W8A8 reference "
               "accumulates in full fp32 only; fast accumulation is cuBLASLt's on an sm_90 GPU "
               "(--device cuda)");
  return SP_ERR_INPUT;
}

int rank_stage_load(rank_model *m, const rank_stage_cfg *cfg, rank_stage **out,
                    uint64_t *bytes_read) {
  const wan_config *c = &rank_model_get_info(m)->config;
  if (rank_stage_precision_check(rank_model_get_info(m), cfg->precision,
                                 cfg->fp8_fast_accum) != SP_OK ||
      rank_stage_fp8_accum_check(cfg->device, cfg->fp8_fast_accum) != SP_OK)
    return SP_ERR_INPUT;
  rank_stage *s = sp_xcalloc(1, sizeof *s);
  s->c = c;
  s->cfg = *cfg;
  s->grid = grid_of(c, cfg->lat_f, cfg->lat_h, cfg->lat_w);
  s->tokens = rank_grid_tokens(s->grid);
  s->first_tokens = first_tokens(c, s->grid);
  if (s->cfg.max_tokens < s->tokens) s->cfg.max_tokens = s->tokens;
  s->tokens = held_tokens(cfg, s->tokens);
  s->nblocks = cfg->last_block - cfg->first_block + 1;
  if (cfg->seq && cfg->device == RANK_DEVICE_CUDA && !cfg->tp) {
    sp_log_error("internal: a CUDA stage with %d sequence-parallel ranks and no transport for "
                 "its all-to-alls", cfg->seq->n);
    free(s);
    return SP_ERR_RUNTIME;
  }
  s->experts = rank_model_get_info(m)->experts.count;
  if (cfg->swap_experts && s->experts < 2) {
    sp_log_error("%s: swapping experts at the switch needs a two-expert model, this one has %d",
                 rank_model_get_info(m)->id.source, s->experts);
    free(s);
    return SP_ERR_INPUT;
  }
  if (s->cfg.act_buffers < 1) s->cfg.act_buffers = 1;
  s->act = sp_xcalloc((size_t)s->cfg.act_buffers, sizeof *s->act);
  if (!cfg->embed && !cfg->head) s->cfg.cache = 0; /* a middle stage never sees it */
  if (s->cfg.cache) s->cache = sp_xcalloc((size_t)s->cfg.prompts, sizeof *s->cache);
  const wan_dit_backend *b = net_backend_ops(wan_dit_net(), cfg->device);
  int rc = b ? b->load(m, s, bytes_read) : SP_ERR_INPUT;
  if (rc != SP_OK) {
    free(s->act);
    free(s->cache);
    free(s);
    return rc;
  }
  *out = s;
  return SP_OK;
}

void rank_stage_free(rank_stage *s) {
  if (!s) return;
  s->ops->destroy(s);
  free(s->act);
  free(s->cache);
  free(s);
}

int rank_stage_relayout(rank_stage *s, int64_t lat_f, int64_t lat_h, int64_t lat_w) {
  const rank_grid g = grid_of(s->c, lat_f, lat_h, lat_w);
  const int64_t tokens = rank_grid_tokens(g);
  if (tokens < 1 || tokens > s->cfg.max_tokens) {
    sp_log_error("internal: re-laying the stage for a %lldx%lldx%lld latent (%lld tokens): "
                 "it holds room for 1..%lld",
                 (long long)lat_f, (long long)lat_h, (long long)lat_w, (long long)tokens,
                 (long long)s->cfg.max_tokens);
    return SP_ERR_RUNTIME;
  }
  s->ops->sync(s);
  const rank_stage_cfg old_cfg = s->cfg;
  const rank_grid old_grid = s->grid;
  const int64_t old_tokens = s->tokens, old_first = s->first_tokens;
  s->cfg.lat_f = lat_f;
  s->cfg.lat_h = lat_h;
  s->cfg.lat_w = lat_w;
  s->grid = g;
  s->tokens = held_tokens(&s->cfg, tokens);
  s->first_tokens = first_tokens(s->c, g);
  const int rc = s->ops->relayout(s);
  if (rc != SP_OK) {
    s->cfg = old_cfg;
    s->grid = old_grid;
    s->tokens = old_tokens;
    s->first_tokens = old_first;
  }
  return rc;
}

void *rank_stage_host_alloc(const rank_stage_cfg *cfg, size_t bytes) {
  return rank_host_alloc(cfg->device, bytes);
}
void rank_stage_host_free(const rank_stage_cfg *cfg, void *p) { rank_host_free(cfg->device, p); }

int64_t rank_stage_tokens(const rank_stage *s) { return s->tokens; }
const wan_config *rank_stage_config(const rank_stage *s) { return s->c; }
const rank_stage_cfg *rank_stage_get_cfg(const rank_stage *s) { return &s->cfg; }
const rank_stage_stats *rank_stage_get_stats(const rank_stage *s) { return &s->stats; }

void rank_stage_embed_text(rank_stage *s, const float *context, int64_t L, float *ctx) {
  s->ops->embed_text(s, context, L, ctx);
}
void rank_stage_set_prompt(rank_stage *s, int slot, const float *ctx) {
  s->ops->set_prompt(s, slot, ctx);
}
static void check_buf(const rank_stage *s, int buf) {
  if (buf < 0 || buf >= s->cfg.act_buffers)
    sp_fatal("internal: activation buffer %d of %d", buf, s->cfg.act_buffers);
}
void *rank_stage_act(rank_stage *s, int buf) {
  check_buf(s, buf);
  return s->act[buf];
}
size_t rank_stage_act_bytes(const rank_stage *s) {
  return (size_t)rank_act_floats(s->c, s->tokens) * sizeof(float);
}
void *rank_stage_stream(rank_stage *s) { return s->stream; }
void rank_stage_embed(rank_stage *s, const float *latent, double t, double t_first, int buf) {
  check_buf(s, buf);
  if (t_first != t && wan_time_tables(s->c) < 2)
    sp_fatal("internal: a timestep of its own (%g, not %g) for latent frame 0 on a %s model",
             t_first, t, wan_task_name(wan_config_task(s->c)));
  s->ops->embed(s, latent, t, t_first, buf);
}
static void check_cache(const rank_stage *s, int k) {
  if (!s->cache || k < 0 || k >= s->cfg.prompts)
    sp_fatal("internal: step cache buffer %d of %d", k, s->cache ? s->cfg.prompts : 0);
}
void *rank_stage_cache_buf(rank_stage *s, int k) {
  check_cache(s, k);
  return s->cache[k];
}
size_t rank_stage_cache_bytes(const rank_stage *s) {
  return (size_t)(s->tokens * s->c->dim) * sizeof(float);
}
void rank_stage_cache(rank_stage *s, rank_cache_op op, int buf, int k) {
  check_cache(s, k);
  check_buf(s, buf);
  s->ops->cache(s, op, buf, k);
}
int rank_stage_time_embed(rank_stage *s, double t, float *e) {
  if (!s->cfg.embed) {
    sp_log_error("internal: the time embedding asked of a stage without the embeddings");
    return SP_ERR_RUNTIME;
  }
  s->ops->time_embed(s, t, e);
  return SP_OK;
}
void rank_stage_blocks(rank_stage *s, int n, const int *slots, const int *bufs) {
  if (n < 1) sp_fatal("internal: blocks on %d micro-batches", n);
  for (int j = 0; j < n; j++) check_buf(s, bufs[j]);
  s->ops->blocks(s, n, slots, bufs);
}
void rank_stage_head(rank_stage *s, int buf, float *out) {
  check_buf(s, buf);
  s->ops->head(s, buf, out);
}
void rank_stage_sync(rank_stage *s) { s->ops->sync(s); }

void rank_stage_set_lora(rank_stage *s, const rank_stage_lora *l) {
  s->ops->sync(s);
  s->ops->set_lora(s, l);
}

int rank_stage_experts(const rank_stage *s) { return s->experts; }
void rank_stage_set_expert(rank_stage *s, int e) {
  if (e < 0 || e >= s->experts) sp_fatal("internal: expert %d of %d", e, s->experts);
  if (e == s->expert) return;
  s->ops->set_expert(s, e);
  s->expert = e;
}
