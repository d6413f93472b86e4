/* LoRA pairs kept apart from the weights and applied per step (lora.h:
 * rank_lora_bypass_*; MODEL.md "LoRA", bypass). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "lora_impl.h"
#include "wan_weights.h"

/* The block tensor index of each bypassable linear layer, its input and
 * output widths, in WAN_BLOCK_LINEARS order. */
typedef struct linear {
  int tensor;
  int64_t in, out;
} linear;

#define LINEAR_(field, in_, out_) {WAN_BLOCK_T_##field, 0, 0},
static const linear linear_table[] = {WAN_BLOCK_LINEARS(LINEAR_)};
#undef LINEAR_
enum { NLINEAR = sizeof linear_table / sizeof linear_table[0] };

static void linears_of(const wan_config *c, linear out[NLINEAR]) {
  int i = 0;
#define LINEAR_(field, in_, out_) out[i++] = (linear){WAN_BLOCK_T_##field, c->in_, c->out_};
  WAN_BLOCK_LINEARS(LINEAR_)
#undef LINEAR_
}

static int is_linear(wan_group g, int tensor) {
  if (g != WAN_GROUP_BLOCK) return 0;
  for (int i = 0; i < NLINEAR; i++)
    if (linear_table[i].tensor == tensor) return 1;
  return 0;
}

int rank_lora_bypass_check(const rank_lora *L) {
  for (int f = 0; f < L->n; f++) {
    const lora_file *lf = &L->files[f];
    int refused = 0;
    const rank_st_tensor *first = NULL;
    for (int i = 0; i < lf->ne; i++) {
      const entry *e = &lf->e[i];
      const int ok = !e->p[PART_DIFF] && !e->p[PART_DIFF_B] && is_linear(e->g, e->tensor);
      if (ok) continue;
      if (!first)
        for (int p = 0; p < PART_COUNT && !first; p++) first = e->p[p];
      refused++;
    }
    if (refused) {
      sp_log_error("%s: %d of its terms cannot be bypassed (first: '%s'): bypass applies "
                   "lora_down/lora_up pairs on the blocks' linear layers only, not full "
                   "differences (diff, diff_b) nor the embeddings or the head; use "
                   "--lora-mode merged", lf->f->path, refused, first ? first->name : "?");
      return SP_ERR_INPUT;
    }
  }
  return SP_OK;
}

/* The summed rank of tensor ti of block of expert x over the files that
 * apply to it. */
static int64_t summed_rank(const rank_lora *L, int x, int block, int ti) {
  int64_t r = 0;
  for (int f = 0; f < L->n; f++) {
    if (!lora_applies_to(&L->files[f], x)) continue;
    const entry *e = lora_entry_find(&L->files[f], WAN_GROUP_BLOCK, block, ti);
    if (e && e->p[PART_DOWN]) r += e->rank;
  }
  return r;
}

int64_t rank_lora_bypass_rank(const rank_lora *L, int x, int first, int last) {
  int64_t m = 0;
  for (int b = first; b <= last; b++)
    for (int i = 0; i < NLINEAR; i++) {
      const int64_t r = summed_rank(L, x, b, linear_table[i].tensor);
      if (r > m) m = r;
    }
  return m;
}

size_t rank_lora_bypass_floats(const rank_lora *L, int x, int block) {
  linear lin[NLINEAR];
  linears_of(&L->config, lin);
  size_t n = 0;
  for (int i = 0; i < NLINEAR; i++)
    n += (size_t)summed_rank(L, x, block, lin[i].tensor) * (size_t)(lin[i].in + lin[i].out);
  return n;
}

void rank_lora_bypass_room(const rank_lora *L, size_t *elems, int64_t *rank) {
  size_t e = 0;
  int64_t r = 0;
  for (int x = 0; x < L->experts; x++) {
    for (int b = 0; b < L->config.layers; b++) {
      const size_t n = rank_lora_bypass_floats(L, x, b);
      if (n > e) e = n;
    }
    const int64_t rx = rank_lora_bypass_rank(L, x, 0, (int)L->config.layers - 1);
    if (rx > r) r = rx;
  }
  *elems = e;
  *rank = r;
}

/* One file's pair of one linear layer into the stacked A (R, in) at rows
 * k0.., and B (out, R) at columns k0.., scaled: B' = float(c * B). */
static int read_pair(const lora_file *lf, const entry *e, const linear *lin, int64_t R,
                     int64_t k0, float *a, float *b) {
  double c = 0.0;
  float *fa = NULL, *fb = NULL;
  int rc = lora_entry_scale(lf, e, &c);
  if (rc == SP_OK) rc = lora_read_f32(lf, e->p[PART_DOWN], &fa);
  if (rc == SP_OK) rc = lora_read_f32(lf, e->p[PART_UP], &fb);
  if (rc == SP_OK) {
    const int64_t r = e->rank;
    memcpy(a + k0 * lin->in, fa, (size_t)(r * lin->in) * sizeof *fa);
    int64_t bad = -1;
    for (int64_t o = 0; o < lin->out; o++)
      for (int64_t k = 0; k < r; k++) {
        const float v = (float)(c * (double)fb[o * r + k]);
        if (!isfinite(v) && bad < 0) bad = o * r + k;
        b[o * R + k0 + k] = v;
      }
    if (bad >= 0) {
      sp_log_error("%s: '%s': scaling by %g gives a non-finite value at element %lld "
                   "(strength too large?)", lf->f->path, e->p[PART_UP]->name, c, (long long)bad);
      rc = SP_ERR_INPUT;
    }
  }
  free(fa);
  free(fb);
  return rc;
}

int rank_lora_bypass_read(const rank_lora *L, int x, int block, float *data,
                          wan_block_lora_f32 *out) {
  linear lin[NLINEAR];
  linears_of(&L->config, lin);
  wan_lora_f32 pairs[NLINEAR];
  float *p = data;
  int rc = SP_OK;
  for (int i = 0; i < NLINEAR && rc == SP_OK; i++) {
    const int64_t R = summed_rank(L, x, block, lin[i].tensor);
    float *a = p, *b = p + R * lin[i].in;
    pairs[i] = (wan_lora_f32){.a = R ? a : NULL, .b = R ? b : NULL, .r = R};
    p += R * (lin[i].in + lin[i].out);
    int64_t k0 = 0;
    for (int f = 0; f < L->n && rc == SP_OK; f++) {
      const lora_file *lf = &L->files[f];
      if (!lora_applies_to(lf, x)) continue;
      const entry *e = lora_entry_find(lf, WAN_GROUP_BLOCK, block, lin[i].tensor);
      if (!e || !e->p[PART_DOWN]) continue;
      rc = read_pair(lf, e, &lin[i], R, k0, a, b);
      k0 += e->rank;
    }
  }
  if (rc != SP_OK) return rc;
  int i = 0;
#define SET_(field, in_, out_) out->field = pairs[i++];
  WAN_BLOCK_LINEARS(SET_)
#undef SET_
  return SP_OK;
}
