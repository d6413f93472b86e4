/* A pipeline stage on the CPU backend (see stage.h). */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "stage.h"

struct rank_stage {
  const wan_config *c;
  rank_stage_cfg cfg;
  wan_layout l32[3]; /* fp32 packed layouts */
  float *embed_w;    /* embed group, fp32 packed, or NULL */
  float *head_w;     /* head group, or NULL */
  float **block_w;   /* [nblocks] block groups */
  float *ck, *cv;    /* (prompts, nblocks, text_len, dim) cross-attention k, v */
  rank_rope rope;
  float *scratch;    /* arena: rank_dit_scratch_floats */
  int64_t tokens;
};

static int nblocks(const rank_stage *s) { return s->cfg.last_block - s->cfg.first_block + 1; }

int64_t rank_act_floats(const wan_config *c, int64_t tokens) {
  return tokens * c->dim + 7 * c->dim;
}

int64_t rank_stage_tokens(const rank_stage *s) { return s->tokens; }
const wan_config *rank_stage_config(const rank_stage *s) { return s->c; }

/* Reads one group in the file's dtype and widens it to fp32. */
static int load_group(rank_model *m, rank_stage *s, wan_group g, int block, void *tmp,
                      size_t tmp_bytes, float **dst, uint64_t *bytes_read) {
  int rc = rank_model_read_group(m, g, block, tmp, tmp_bytes, bytes_read);
  if (rc != SP_OK) return rc;
  *dst = sp_xmalloc(s->l32[g].packed_bytes);
  rank_dit_widen(rank_model_layout(m, g), tmp, &s->l32[g], *dst);
  return SP_OK;
}

int rank_stage_load(rank_model *m, const rank_stage_cfg *cfg, rank_stage **out,
                    uint64_t *bytes_read) {
  const wan_config *c = &rank_model_get_info(m)->config;
  rank_stage *s = sp_xcalloc(1, sizeof *s);
  s->c = c;
  s->cfg = *cfg;
  for (int g = 0; g < 3; g++) wan_layout_make(c, (wan_group)g, KERN_DTYPE_F32, &s->l32[g]);
  rank_grid grid = {cfg->lat_f / c->patch[0], cfg->lat_h / c->patch[1], cfg->lat_w / c->patch[2]};
  s->tokens = rank_grid_tokens(grid);
  rank_rope_init(c, grid, &s->rope);
  int nb = nblocks(s);
  s->block_w = sp_xcalloc((size_t)nb, sizeof *s->block_w);
  size_t kv = (size_t)cfg->prompts * (size_t)nb * (size_t)(c->text_len * c->dim);
  s->ck = sp_xmalloc(kv * sizeof(float));
  s->cv = sp_xmalloc(kv * sizeof(float));
  s->scratch = sp_xmalloc(rank_dit_scratch_floats(c, s->tokens) * sizeof(float));

  size_t tmp_bytes = 0;
  for (int g = 0; g < 3; g++) {
    size_t b = rank_model_layout(m, (wan_group)g)->packed_bytes;
    if (b > tmp_bytes) tmp_bytes = b;
  }
  void *tmp = sp_xmalloc(tmp_bytes);
  int rc = SP_OK;
  if (cfg->embed)
    rc = load_group(m, s, WAN_GROUP_EMBED, 0, tmp, tmp_bytes, &s->embed_w, bytes_read);
  for (int b = 0; rc == SP_OK && b < nb; b++)
    rc = load_group(m, s, WAN_GROUP_BLOCK, cfg->first_block + b, tmp, tmp_bytes, &s->block_w[b],
                    bytes_read);
  if (rc == SP_OK && cfg->head)
    rc = load_group(m, s, WAN_GROUP_HEAD, 0, tmp, tmp_bytes, &s->head_w, bytes_read);
  free(tmp);
  if (rc != SP_OK) {
    rank_stage_free(s);
    return rc;
  }
  *out = s;
  return SP_OK;
}

void rank_stage_free(rank_stage *s) {
  if (!s) return;
  for (int b = 0; b < nblocks(s); b++) free(s->block_w ? s->block_w[b] : NULL);
  free(s->block_w);
  free(s->embed_w);
  free(s->head_w);
  free(s->ck);
  free(s->cv);
  free(s->scratch);
  rank_rope_free(&s->rope);
  free(s);
}

void rank_stage_embed_text(rank_stage *s, const float *context, int64_t L, float *ctx) {
  rank_dit_embed_text(s->c, &s->l32[WAN_GROUP_EMBED], s->embed_w, context, L, ctx, s->scratch);
}

static size_t kv_offset(const rank_stage *s, int slot, int b) {
  return ((size_t)slot * (size_t)nblocks(s) + (size_t)b) * (size_t)(s->c->text_len * s->c->dim);
}

void rank_stage_set_prompt(rank_stage *s, int slot, const float *ctx) {
  for (int b = 0; b < nblocks(s); b++)
    rank_dit_context_kv(s->c, &s->l32[WAN_GROUP_BLOCK], s->block_w[b], ctx,
                        s->ck + kv_offset(s, slot, b), s->cv + kv_offset(s, slot, b));
}

void rank_stage_embed(rank_stage *s, const float *latent, double t, float *act) {
  const int64_t D = s->c->dim;
  float *x = act, *e = act + s->tokens * D, *e0 = e + D;
  rank_dit_embed_patch(s->c, &s->l32[WAN_GROUP_EMBED], s->embed_w, latent, s->cfg.lat_f,
                       s->cfg.lat_h, s->cfg.lat_w, x, s->scratch);
  rank_dit_embed_time(s->c, &s->l32[WAN_GROUP_EMBED], s->embed_w, t, e, e0, s->scratch);
}

void rank_stage_blocks(rank_stage *s, int slot, float *act) {
  const int64_t D = s->c->dim;
  float *x = act, *e0 = act + s->tokens * D + D;
  for (int b = 0; b < nblocks(s); b++)
    rank_dit_block(s->c, &s->l32[WAN_GROUP_BLOCK], s->block_w[b], x, e0,
                   s->ck + kv_offset(s, slot, b), s->cv + kv_offset(s, slot, b), &s->rope,
                   s->scratch);
}

void rank_stage_head(rank_stage *s, const float *act, float *out) {
  const int64_t D = s->c->dim;
  rank_dit_head(s->c, &s->l32[WAN_GROUP_HEAD], s->head_w, act, act + s->tokens * D,
                s->cfg.lat_f, s->cfg.lat_h, s->cfg.lat_w, out, s->scratch);
}
