/* The plan's forms: a fixed-width text table, JSON (written by hand), and a
 * compact little-endian binary for the broadcast with a validating decoder. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan.h"
#include "plan_strbuf.h"

#define GB (1024.0 * 1024.0 * 1024.0)


/* ---- invariants --------------------------------------------------------- */

int plan_validate(const plan *p, char *err, size_t errlen) {
  if (p->nranks < 1 || p->nranks > PLAN_MAX_RANKS)
    return plan_fail(err, errlen, "plan: %d ranks is outside 1..%d", p->nranks, PLAN_MAX_RANKS);
  if (p->num_blocks < p->nranks || p->num_blocks > PLAN_MAX_BLOCKS)
    return plan_fail(err, errlen, "plan: %d blocks for %d ranks", p->num_blocks, p->nranks);
  if (p->micro_batches < 1 || p->tokens < 1)
    return plan_fail(err, errlen, "plan: %d micro-batches, %lld tokens", p->micro_batches,
                (long long)p->tokens);
  if (!isfinite(p->predicted_step_ms) || p->predicted_step_ms < 0)
    return plan_fail(err, errlen, "plan: predicted step time is not a finite number");
  const plan_grid g = plan_get_grid(p);
  if (g.stages != p->nranks || g.replicas < 1 || g.seq < 1 ||
      (long)g.replicas * g.stages * g.seq > PLAN_MAX_RANKS)
    return plan_fail(err, errlen,
                     "plan: grid %dx%dx%d for %d stages (S must equal them, R x S x U at most "
                     "%d)",
                     g.replicas, g.stages, g.seq, p->nranks, PLAN_MAX_RANKS);
  int next = 0;
  for (int r = 0; r < p->nranks; r++) {
    const plan_rank *q = &p->r[r];
    if (q->rank != r) return plan_fail(err, errlen, "plan: rank %d is labelled %d", r, q->rank);
    if (memchr(q->device, '\0', sizeof q->device) == NULL)
      return plan_fail(err, errlen, "plan: rank %d's device name is not terminated", r);
    if (q->first_block != next || q->last_block < q->first_block ||
        q->last_block >= p->num_blocks)
      return plan_fail(err, errlen,
                  "plan: rank %d holds blocks %d-%d, expected a range starting at %d within "
                  "0..%d",
                  r, q->first_block, q->last_block, next, p->num_blocks - 1);
    int ns = 0;
    for (int i = q->first_block; i <= q->last_block; i++) {
      if (p->streamed[i] > 1) return plan_fail(err, errlen, "plan: block %d streamed flag %u", i, p->streamed[i]);
      ns += p->streamed[i];
    }
    if (ns != q->num_streamed || q->num_resident + q->num_streamed != q->last_block - q->first_block + 1)
      return plan_fail(err, errlen, "plan: rank %d counts %d resident + %d streamed for %d blocks", r,
                  q->num_resident, q->num_streamed, q->last_block - q->first_block + 1);
    if (q->has_embed != (r == 0) || q->has_head != (r == p->nranks - 1))
      return plan_fail(err, errlen, "plan: embeddings must be on rank 0 and the head on the last rank");
    if (q->order != PLAN_ORDER_MICRO && q->order != PLAN_ORDER_BLOCK)
      return plan_fail(err, errlen, "plan: rank %d order %d is neither micro (%d) nor block (%d)",
                       r, q->order, PLAN_ORDER_MICRO, PLAN_ORDER_BLOCK);
    /* one order per plan: the step time model has no mixed pipeline */
    if (q->order != p->r[0].order)
      return plan_fail(err, errlen, "plan: rank %d works %s-major, rank 0 %s-major", r,
                       plan_order_name(q->order), plan_order_name(p->r[0].order));
    if ((ns > 0) != (q->prefetch_depth > 0) || q->prefetch_depth > 16)
      return plan_fail(err, errlen, "plan: rank %d prefetch depth %d with %d streamed blocks", r,
                  q->prefetch_depth, ns);
    if (q->chunk_rows < 1 || q->chunk_rows > p->tokens)
      return plan_fail(err, errlen, "plan: rank %d chunk rows outside 1..%lld", r, (long long)p->tokens);
    if (q->peak_bytes > q->budget_bytes)
      return plan_fail(err, errlen, "plan: rank %d peak %llu bytes over its budget %llu", r,
                  (unsigned long long)q->peak_bytes, (unsigned long long)q->budget_bytes);
    if (!isfinite(q->predicted_step_ms) || q->predicted_step_ms < 0)
      return plan_fail(err, errlen, "plan: rank %d predicted time is not a finite number", r);
    if (!plan_experts_mode_name(q->experts_mode) ||
        (q->experts_mode == PLAN_EXPERTS_SWAP && ns > 0) ||
        (q->experts_mode == PLAN_EXPERTS_STREAM && ns == 0) ||
        (q->experts_mode == PLAN_EXPERTS_RESIDENT && ns > 0) ||
        (q->experts_mode != PLAN_EXPERTS_ONE) != (p->r[0].experts_mode != PLAN_EXPERTS_ONE))
      return plan_fail(err, errlen, "plan: rank %d experts mode %d with %d streamed blocks", r,
                       q->experts_mode, ns);
    if (!isfinite(q->predicted_switch_ms) || q->predicted_switch_ms < 0 ||
        (q->experts_mode != PLAN_EXPERTS_SWAP && q->predicted_switch_ms != 0))
      return plan_fail(err, errlen, "plan: rank %d predicted switch time %g (only a swap has one)",
                       r, q->predicted_switch_ms);
    next = q->last_block + 1;
  }
  if (next != p->num_blocks)
    return plan_fail(err, errlen, "plan: ranges end at block %d of %d", next - 1, p->num_blocks);
  for (int i = p->num_blocks; i < PLAN_MAX_BLOCKS; i++)
    if (p->streamed[i]) return plan_fail(err, errlen, "plan: streamed flag past the last block");
  return PLAN_OK;
}

plan_grid plan_get_grid(const plan *p) {
  const plan_grid *g = &p->grid;
  if (g->replicas == 0 && g->stages == 0 && g->seq == 0) return plan_grid_pipeline(p->nranks);
  return *g;
}

/* ---- text table ------------------------------------------------------- */

/* "0-19" style list of the blocks of [a, b] with flag == want. */
static void add_list(plan_strbuf *sb, const plan *p, int a, int b, int want, const char *sep) {
  int any = 0;
  for (int i = a; i <= b; i++) {
    if (p->streamed[i] != want) continue;
    int j = i;
    while (j + 1 <= b && p->streamed[j + 1] == want) j++;
    plan_sb_add(sb, "%s%d", any ? sep : "", i);
    if (j > i) plan_sb_add(sb, "-%d", j);
    any = 1;
    i = j;
  }
  if (!any) plan_sb_add(sb, "-");
}

size_t plan_format_table(const plan *p, char *buf, size_t cap) {
  plan_strbuf sb;
  plan_sb_init(&sb, buf, cap);
  const plan_grid g = plan_get_grid(p);
  const int64_t rows = plan_seq_rows(p->tokens, g.seq, 0); /* a rank's most (Ulysses) */
  plan_sb_add(&sb, "# plan: %d rank%s, %d blocks, %lld tokens, %d micro-batch%s per step\n",
              p->nranks, p->nranks == 1 ? "" : "s", p->num_blocks, (long long)p->tokens,
              p->micro_batches, p->micro_batches == 1 ? "" : "es");
  if (g.replicas > 1 || g.seq > 1)
    plan_sb_add(&sb,
                "# layout %dx%dx%d: %d replica%s of these %d stage%s, %d sequence-parallel "
                "rank%s per stage (%d ranks), each holding at most %lld of the tokens; the "
                "rows below are the stages\n",
                g.replicas, g.stages, g.seq, g.replicas, g.replicas == 1 ? "" : "s", g.stages,
                g.stages == 1 ? "" : "s", g.seq, g.seq == 1 ? "" : "s",
                g.replicas * g.stages * g.seq, (long long)rows);
  plan_sb_add(&sb, "# %4s  %-24s %-7s %-5s %-9s %-18s %9s %8s %9s %11s\n", "rank", "device",
              "blocks", "order", "resident", "streamed", "weight GB", "peak GB", "budget GB",
              "predicted ms");
  for (int r = 0; r < p->nranks; r++) {
    const plan_rank *q = &p->r[r];
    char blocks[32], res[256], str[256];
    snprintf(blocks, sizeof blocks, "%d-%d", q->first_block, q->last_block);
    plan_strbuf a, s;
    plan_sb_init(&a, res, sizeof res);
    plan_sb_init(&s, str, sizeof str);
    add_list(&a, p, q->first_block, q->last_block, 0, ",");
    add_list(&s, p, q->first_block, q->last_block, 1, ",");
    plan_sb_add(&sb, "  %4d  %-24.24s %-7s %-5s %-9d %-18s %9.2f %8.2f %9.2f %11.1f\n", r,
                q->device, blocks, plan_order_name(q->order), q->num_resident,
                q->num_streamed ? str : "-", q->weight_bytes / GB, q->peak_bytes / GB,
                q->budget_bytes / GB, q->predicted_step_ms);
  }
  plan_sb_add(&sb, "# predicted step: %.1f ms, %s (GB = GiB, 2^30 bytes)\n",
              p->predicted_step_ms,
              p->r[0].order == PLAN_ORDER_BLOCK
                  ? "block-major: each block runs every micro-batch, stages in sequence"
                  : "micro-batch-major: micro-batches pipelined through the stages");
  for (int r = 0; r < p->nranks; r++) {
    const plan_rank *q = &p->r[r];
    if (q->decoder_bytes)
      plan_sb_add(&sb,
                  "# rank %d keeps %.2f GB for the VAE decoder of --video (weights and "
                  "workspace, counted in its peak)\n",
                  r, q->decoder_bytes / GB);
    if (q->num_streamed)
      plan_sb_add(&sb,
                  "# rank %d streams %d block%s (%.2f GB) from pinned host memory, %d prefetch "
                  "slot%s\n",
                  r, q->num_streamed, q->num_streamed == 1 ? "" : "s", q->streamed_bytes / GB,
                  q->prefetch_depth, q->prefetch_depth == 1 ? "" : "s");
    if (q->chunk_rows < rows)
      plan_sb_add(&sb, "# rank %d chunks its activations: %lld rows per chunk\n", r,
                  (long long)q->chunk_rows);
    if (q->experts_mode == PLAN_EXPERTS_RESIDENT)
      plan_sb_add(&sb, "# rank %d experts: resident (both experts' blocks on the device; the "
                       "switch moves nothing)\n", r);
    else if (q->experts_mode == PLAN_EXPERTS_SWAP)
      plan_sb_add(&sb,
                  "# rank %d experts: swap at the switch (one device copy of its blocks, both "
                  "experts' %.2f GB in pinned host memory; predicted switch cost %.1f ms)\n",
                  r, q->streamed_bytes / GB, q->predicted_switch_ms);
    else if (q->experts_mode == PLAN_EXPERTS_STREAM)
      plan_sb_add(&sb, "# rank %d experts: stream (its streamed blocks carry both experts' "
                       "copies; each step copies the current expert's)\n", r);
  }
  return sb.len;
}

/* ---- JSON --------------------------------------------------------------- */

static void add_json_string(plan_strbuf *sb, const char *s) {
  plan_sb_add(sb, "\"");
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\')
      plan_sb_add(sb, "\\%c", *c);
    else if (*c < 0x20)
      plan_sb_add(sb, "\\u%04x", *c);
    else
      plan_sb_add(sb, "%c", *c);
  }
  plan_sb_add(sb, "\"");
}

static void add_json_blocks(plan_strbuf *sb, const plan *p, int a, int b, int want) {
  plan_sb_add(sb, "[");
  int any = 0;
  for (int i = a; i <= b; i++)
    if (p->streamed[i] == want) {
      plan_sb_add(sb, "%s%d", any ? "," : "", i);
      any = 1;
    }
  plan_sb_add(sb, "]");
}

size_t plan_format_json(const plan *p, char *buf, size_t cap) {
  plan_strbuf sb;
  plan_sb_init(&sb, buf, cap);
  plan_sb_add(&sb,
              "{\"num_blocks\":%d,\"tokens\":%lld,\"rank_tokens\":%lld,\"micro_batches\":%d,"
              "\"order\":\"%s\",\"layout\":{\"replicas\":%d,\"stages\":%d,\"seq\":%d},"
              "\"ranks\":[",
              p->num_blocks, (long long)p->tokens,
              (long long)plan_seq_rows(p->tokens, plan_get_grid(p).seq, 0), p->micro_batches,
              plan_order_name(p->r[0].order), plan_get_grid(p).replicas,
              plan_get_grid(p).stages, plan_get_grid(p).seq);
  for (int r = 0; r < p->nranks; r++) {
    const plan_rank *q = &p->r[r];
    plan_sb_add(&sb, "%s\n  {\"rank\":%d,\"device\":", r ? "," : "", r);
    add_json_string(&sb, q->device);
    plan_sb_add(&sb, ",\"first_block\":%d,\"last_block\":%d,\"resident\":", q->first_block,
                q->last_block);
    add_json_blocks(&sb, p, q->first_block, q->last_block, 0);
    plan_sb_add(&sb, ",\"streamed\":");
    add_json_blocks(&sb, p, q->first_block, q->last_block, 1);
    plan_sb_add(&sb,
                ",\"embed\":%s,\"head\":%s,\"order\":\"%s\",\"weight_bytes\":%llu,"
                "\"stream_slot_bytes\":%llu,"
                "\"streamed_bytes\":%llu,\"act_bytes\":%llu,\"reserve_bytes\":%llu,"
                "\"decoder_bytes\":%llu,"
                "\"peak_bytes\":%llu,\"budget_bytes\":%llu,\"prefetch_depth\":%d,"
                "\"chunk_rows\":%lld,"
                "\"predicted_step_ms\":%.3f,\"experts\":\"%s\",\"predicted_switch_ms\":%.3f}",
                q->has_embed ? "true" : "false", q->has_head ? "true" : "false",
                plan_order_name(q->order), (unsigned long long)q->weight_bytes,
                (unsigned long long)q->stream_slot_bytes,
                (unsigned long long)q->streamed_bytes, (unsigned long long)q->act_bytes,
                (unsigned long long)q->reserve_bytes, (unsigned long long)q->decoder_bytes,
                (unsigned long long)q->peak_bytes,
                (unsigned long long)q->budget_bytes, q->prefetch_depth, (long long)q->chunk_rows,
                q->predicted_step_ms, plan_experts_mode_name(q->experts_mode),
                q->predicted_switch_ms);
  }
  plan_sb_add(&sb, "\n],\"chunked\":%s,\"predicted_step_ms\":%.3f}\n", p->chunked ? "true" : "false",
              p->predicted_step_ms);
  return sb.len;
}

/* ---- binary --------------------------------------------------------------
 * "SPPL", u32 version 6, u32 nranks, u32 num_blocks, i64 tokens,
 * u32 micro_batches, u32 chunked, f64 predicted_step_ms, u32 replicas,
 * u32 stages, u32 seq (the grid; stages = nranks), u32 w8a8 epilogue, then per rank:
 * device[64], i32 first, last, resident, streamed, embed, head, depth, order,
 * i64 chunk rows, u64 weight, slots, streamed bytes, act,
 * reserve, decoder, peak, budget, f64 ms, i32 experts mode, f64 switch ms; then
 * num_blocks bytes of streamed flags.
 * Fixed widths and little-endian, independent of the host's struct layout. */

#define WIRE_MAGIC "SPPL"
#define WIRE_VERSION 6u /* 2: the order of work per rank; 3: one chunk rows per rank;
                           4: the decoder's bytes per rank; 5: the grid, and the
                           experts mode and predicted switch time per rank; 6: the
                           W8A8 epilogue flag */
#define WIRE_HEAD (4 + 4 + 4 + 4 + 8 + 4 + 4 + 8 + 3 * 4 + 4)
#define WIRE_RANK (PLAN_NAME_LEN + 8 * 4 + 8 + 8 * 8 + 8 + 4 + 8)

_Static_assert(WIRE_HEAD + PLAN_MAX_RANKS * WIRE_RANK + PLAN_MAX_BLOCKS <= PLAN_WIRE_MAX,
               "PLAN_WIRE_MAX is too small for the binary form");

typedef struct wr {
  uint8_t *p;
  size_t n, cap;
} wr;

static void put(wr *w, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) {
    if (w->n < w->cap) w->p[w->n] = (uint8_t)(v >> (8 * i));
    w->n++;
  }
}
static void put_f64(wr *w, double d) {
  uint64_t v;
  memcpy(&v, &d, sizeof v);
  put(w, v, 8);
}

int plan_encode(const plan *p, uint8_t *buf, size_t cap, size_t *len, char *err, size_t errlen) {
  int rc = plan_validate(p, err, errlen);
  if (rc) return rc;
  size_t need = WIRE_HEAD + (size_t)p->nranks * WIRE_RANK + (size_t)p->num_blocks;
  if (need > cap) {
    plan_fail(err, errlen, "plan: the binary form needs %zu bytes, the buffer has %zu", need, cap);
    return PLAN_ENOSPACE;
  }
  wr w = {buf, 0, cap};
  memcpy(buf, WIRE_MAGIC, 4);
  w.n = 4;
  put(&w, WIRE_VERSION, 4);
  put(&w, (uint32_t)p->nranks, 4);
  put(&w, (uint32_t)p->num_blocks, 4);
  put(&w, (uint64_t)p->tokens, 8);
  put(&w, (uint32_t)p->micro_batches, 4);
  put(&w, (uint32_t)p->chunked, 4);
  put_f64(&w, p->predicted_step_ms);
  const plan_grid g = plan_get_grid(p);
  put(&w, (uint32_t)g.replicas, 4);
  put(&w, (uint32_t)g.stages, 4);
  put(&w, (uint32_t)g.seq, 4);
  put(&w, (uint32_t)(p->w8a8_epilogue != 0), 4);
  for (int r = 0; r < p->nranks; r++) {
    const plan_rank *q = &p->r[r];
    char name[PLAN_NAME_LEN];
    memset(name, 0, sizeof name);
    snprintf(name, sizeof name, "%s", q->device);
    memcpy(buf + w.n, name, sizeof name);
    w.n += sizeof name;
    int32_t iv[8] = {q->first_block, q->last_block, q->num_resident, q->num_streamed,
                     q->has_embed, q->has_head, q->prefetch_depth, q->order};
    for (int i = 0; i < 8; i++) put(&w, (uint32_t)iv[i], 4);
    put(&w, (uint64_t)q->chunk_rows, 8);
    uint64_t uv[8] = {q->weight_bytes,  q->stream_slot_bytes, q->streamed_bytes,
                      q->act_bytes,     q->reserve_bytes,     q->decoder_bytes,
                      q->peak_bytes,    q->budget_bytes};
    for (int i = 0; i < 8; i++) put(&w, uv[i], 8);
    put_f64(&w, q->predicted_step_ms);
    put(&w, (uint32_t)q->experts_mode, 4);
    put_f64(&w, q->predicted_switch_ms);
  }
  memcpy(buf + w.n, p->streamed, (size_t)p->num_blocks);
  w.n += (size_t)p->num_blocks;
  *len = w.n;
  return PLAN_OK;
}

typedef struct rd {
  const uint8_t *p;
  size_t n, len;
} rd;

static uint64_t get(rd *r, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)r->p[r->n + (size_t)i] << (8 * i);
  r->n += (size_t)bytes;
  return v;
}
static int32_t get_i32(rd *r) {
  uint32_t u = (uint32_t)get(r, 4);
  int32_t v;
  memcpy(&v, &u, sizeof v);
  return v;
}
static int64_t get_i64(rd *r) {
  uint64_t u = get(r, 8);
  int64_t v;
  memcpy(&v, &u, sizeof v);
  return v;
}
static double get_f64(rd *r) {
  uint64_t u = get(r, 8);
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

int plan_decode(const uint8_t *buf, size_t len, plan *out, char *err, size_t errlen) {
  if (!buf || len < WIRE_HEAD)
    return plan_fail(err, errlen, "plan message: %zu bytes, shorter than its %d-byte header", len,
                WIRE_HEAD);
  if (memcmp(buf, WIRE_MAGIC, 4) != 0)
    return plan_fail(err, errlen, "plan message: bad magic (expected \"SPPL\")");
  rd r = {buf, 4, len};
  uint32_t version = (uint32_t)get(&r, 4);
  if (version != WIRE_VERSION)
    return plan_fail(err, errlen, "plan message: version %u, this build reads %u", version,
                WIRE_VERSION);
  uint32_t nranks = (uint32_t)get(&r, 4), nblocks = (uint32_t)get(&r, 4);
  if (nranks < 1 || nranks > PLAN_MAX_RANKS || nblocks < 1 || nblocks > PLAN_MAX_BLOCKS)
    return plan_fail(err, errlen, "plan message: %u ranks, %u blocks (limits %d, %d)", nranks, nblocks,
                PLAN_MAX_RANKS, PLAN_MAX_BLOCKS);
  size_t need = WIRE_HEAD + (size_t)nranks * WIRE_RANK + (size_t)nblocks;
  if (len != need)
    return plan_fail(err, errlen, "plan message: %zu bytes, expected %zu for %u ranks and %u blocks",
                len, need, nranks, nblocks);
  plan p;
  memset(&p, 0, sizeof p);
  p.nranks = (int)nranks;
  p.num_blocks = (int)nblocks;
  p.tokens = get_i64(&r);
  uint32_t mb = (uint32_t)get(&r, 4), chunked = (uint32_t)get(&r, 4);
  if (mb > 1024 || chunked > 1)
    return plan_fail(err, errlen, "plan message: %u micro-batches, chunked flag %u", mb, chunked);
  p.micro_batches = (int)mb;
  p.chunked = (int)chunked;
  p.predicted_step_ms = get_f64(&r);
  uint32_t gv[3];
  for (int i = 0; i < 3; i++) {
    gv[i] = (uint32_t)get(&r, 4);
    if (gv[i] < 1 || gv[i] > PLAN_MAX_RANKS)
      return plan_fail(err, errlen, "plan message: grid factor %u outside 1..%d", gv[i],
                       PLAN_MAX_RANKS);
  }
  p.grid = (plan_grid){(int)gv[0], (int)gv[1], (int)gv[2]};
  const uint32_t epi = (uint32_t)get(&r, 4);
  if (epi > 1) return plan_fail(err, errlen, "plan message: W8A8 epilogue flag %u", epi);
  p.w8a8_epilogue = (int)epi;
  for (uint32_t k = 0; k < nranks; k++) {
    plan_rank *q = &p.r[k];
    q->rank = (int)k;
    memcpy(q->device, buf + r.n, PLAN_NAME_LEN);
    r.n += PLAN_NAME_LEN;
    if (memchr(q->device, '\0', PLAN_NAME_LEN) == NULL)
      return plan_fail(err, errlen, "plan message: rank %u's device name is not terminated", k);
    q->first_block = get_i32(&r);
    q->last_block = get_i32(&r);
    q->num_resident = get_i32(&r);
    q->num_streamed = get_i32(&r);
    q->has_embed = get_i32(&r);
    q->has_head = get_i32(&r);
    q->prefetch_depth = get_i32(&r);
    q->order = get_i32(&r);
    q->chunk_rows = get_i64(&r);
    q->weight_bytes = get(&r, 8);
    q->stream_slot_bytes = get(&r, 8);
    q->streamed_bytes = get(&r, 8);
    q->act_bytes = get(&r, 8);
    q->reserve_bytes = get(&r, 8);
    q->decoder_bytes = get(&r, 8);
    q->peak_bytes = get(&r, 8);
    q->budget_bytes = get(&r, 8);
    q->predicted_step_ms = get_f64(&r);
    q->experts_mode = get_i32(&r);
    q->predicted_switch_ms = get_f64(&r);
  }
  memcpy(p.streamed, buf + r.n, nblocks);
  char sub[256];
  if (plan_validate(&p, sub, sizeof sub) != 0)
    return plan_fail(err, errlen, "plan message is inconsistent: %s", sub);
  *out = p;
  return PLAN_OK;
}
