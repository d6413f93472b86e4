/* plan_make's inputs: their ranges checked, and each rank's budget
 * resolved from the budget string and its device (plan_split.h). */
#include <math.h>
#include <stdio.h>

#include "layout.h"
#include "plan.h"
#include "plan_split.h"

static int fail(char *err, size_t errlen, int code, const char *msg) {
  if (err && errlen) snprintf(err, errlen, "%s", msg);
  return code;
}

/* Per-rank budget from the string and the device (plan_split.h). */
int plan_split_resolve_budget(const plan_budget *b, const plan_device *d, int r,
                          const plan_options *o, uint64_t *out, uint64_t *cap, char *err,
                          size_t errlen) {
  uint64_t total = d->total_bytes, free_b = d->free_bytes ? d->free_bytes : d->total_bytes;
  double margin = fmax(o->auto_margin * (double)total, 256.0 * 1024 * 1024);
  uint64_t autob = (double)free_b > margin ? free_b - (uint64_t)margin : 0;
  *cap = autob;
  switch (b->mode) {
  case PLAN_BUDGET_FRACTION:
  case PLAN_BUDGET_BYTES:
    if (b->mode == PLAN_BUDGET_FRACTION || (b->bytes[r] == 0 && b->frac[r] > 0.0)) {
      double frac = b->mode == PLAN_BUDGET_FRACTION ? b->fraction : b->frac[r];
      uint64_t f = (uint64_t)floor(frac * (double)total);
      *out = f < free_b ? f : free_b;
      return 0;
    }
    if (b->bytes[r] == 0) {
      *out = autob;
      return 0;
    }
    if (b->bytes[r] > free_b) {
      if (err && errlen)
        snprintf(err, errlen,
                 "budget 'cuda:%d,%.2fgb' is more than the %.2f GiB %s of rank %d's GPU (%s)", r,
                 (double)b->bytes[r] / GIB, (double)free_b / GIB,
                 d->free_bytes && d->free_bytes < total ? "free" : "total", r, d->name);
      return -1;
    }
    *out = b->bytes[r];
    return 0;
  default:
    *out = autob;
    return 0;
  }
}

/* Every input of plan_make in range (plan_split.h). */
int plan_split_check_inputs(const plan_model *m, const plan_device *devs, int nranks,
                        const plan_budget *b, const plan_workload *w, const plan_options *o,
                        char *err, size_t errlen) {
  char msg[256];
#define BAD(...)                                     \
  do {                                               \
    snprintf(msg, sizeof msg, __VA_ARGS__);          \
    return fail(err, errlen, PLAN_EINVAL, msg);      \
  } while (0)
  if (!m || !devs || !b || !w || !o) BAD("plan: missing input");
  if (m->num_blocks < 1 || m->num_blocks > PLAN_MAX_BLOCKS || !m->block_bytes)
    BAD("model: %d blocks is outside 1..%d", m->num_blocks, PLAN_MAX_BLOCKS);
  if (m->experts < 0 || m->experts > PLAN_LAYOUT_MAX_EXPERTS)
    BAD("model: %d experts is outside 0..%d", m->experts, PLAN_LAYOUT_MAX_EXPERTS);
  for (int i = 0; i < m->num_blocks; i++)
    if (m->block_bytes[i] == 0 || m->block_bytes[i] > (1ull << 50))
      BAD("model: block %d has %llu bytes (expected 1 B..1 PiB)", i,
          (unsigned long long)m->block_bytes[i]);
  if (m->dim < 1 || m->ffn_dim < 1 || m->heads < 1 || m->head_dim < 1 || m->text_len < 1 ||
      m->text_dim < 1 || m->in_dim < 1 || m->out_dim < 1 || m->dim > (1 << 20) ||
      m->ffn_dim > (1 << 22) || m->text_dim > (1 << 20) || m->in_dim > 4096 ||
      m->out_dim > 4096 || m->heads > 4096 || m->text_len > (1 << 20))
    BAD("model: a size is out of range (dim %lld, ffn_dim %lld, heads %lld)", (long long)m->dim,
        (long long)m->ffn_dim, (long long)m->heads);
  if (m->weight_dtype_bytes < 1 || m->weight_dtype_bytes > 8)
    BAD("model: weight dtype of %d bytes (expected 1..8)", m->weight_dtype_bytes);
  if (nranks < 1 || nranks > PLAN_MAX_RANKS) BAD("%d ranks is outside 1..%d", nranks, PLAN_MAX_RANKS);
  if (nranks > m->num_blocks)
    BAD("%d ranks for a model of %d blocks: every rank needs at least one block, use at most %d "
        "ranks",
        nranks, m->num_blocks, m->num_blocks);
  if (b->nranks != nranks)
    BAD("budget was parsed for %d ranks, the pipeline has %d", b->nranks, nranks);
  for (int r = 0; r < nranks; r++) {
    if (devs[r].total_bytes == 0) BAD("rank %d's GPU (%s) has 0 bytes of memory", r, devs[r].name);
    if (devs[r].free_bytes > devs[r].total_bytes)
      BAD("rank %d's GPU (%s) reports more free than total memory", r, devs[r].name);
    if (!(devs[r].speed > 0.0 && devs[r].speed <= PLAN_SPEED_MAX))
      BAD("rank %d's relative speed %g is outside (0, %g]", r, devs[r].speed, PLAN_SPEED_MAX);
  }
  if (w->frames < 1 || (w->frames - 1) % 4 != 0 || w->frames > 100001)
    BAD("frames %lld: Wan needs 4k+1 frames (1, 5, ..., 81)", (long long)w->frames);
  if (w->height < 16 || w->width < 16 || w->height % 16 || w->width % 16 || w->height > 65536 ||
      w->width > 65536)
    BAD("size %lldx%lld: height and width must be multiples of 16 (for example 480x832)",
        (long long)w->height, (long long)w->width);
  int64_t L = plan_tokens(w);
  if (L < 1 || L > PLAN_TOKENS_MAX)
    BAD("workload of %lld tokens is outside 1..2^31", (long long)L);
  if (w->seq < 0 || w->seq > PLAN_MAX_RANKS || w->seq > L || (w->seq > 1 && m->heads % w->seq))
    BAD("%d sequence-parallel ranks: give 0..%d, at most the %lld tokens, dividing the %lld "
        "heads", w->seq, PLAN_MAX_RANKS, (long long)L, (long long)m->heads);
  if (w->micro_batches < 1 || w->micro_batches > 1024)
    BAD("%d micro-batches is outside 1..1024", w->micro_batches);
  if (w->context_len < 0 || w->context_len > m->text_len)
    BAD("context of %lld rows is outside 0..text_len %lld", (long long)w->context_len,
        (long long)m->text_len);
  if (!(o->gpu_tflops > 0) || !(o->host_link_gbs > 0) || !(o->peer_link_gbs > 0) ||
      (w->seq > 1 && !(o->seq_link_gbs > 0)) ||
      o->prefetch_depth < 1 || o->prefetch_depth > 16 ||
      !(o->auto_margin >= 0 && o->auto_margin < 1) ||
      !(o->fp8_linear_ratio > 0 && o->fp8_linear_ratio <= 1) ||
      !(o->fp8_fast_linear_ratio > 0 && o->fp8_fast_linear_ratio <= 1))
    BAD("plan options out of range (rate, link rates, prefetch depth 1..16, margin, fp8 linear "
        "ratios in (0, 1])");
  if (!plan_order_name(o->order))
    BAD("order %d is not one of auto (%d), micro (%d), block (%d)", o->order, PLAN_ORDER_AUTO,
        PLAN_ORDER_MICRO, PLAN_ORDER_BLOCK);
  if (!(o->stream_frac == -1.0 || (o->stream_frac >= 0.0 && o->stream_frac <= 1.0)))
    BAD("stream fraction %g is outside 0..1 (-1: the budget decides)", o->stream_frac);
  if (o->max_rows < 0)
    BAD("chunk rows %lld: give N > 0, or 0 for automatic", (long long)o->max_rows);
#undef BAD
  return PLAN_OK;
}
