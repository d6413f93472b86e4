/* Ulysses on the CUDA stage (DESIGN.md "Layouts"; stage_cuda_impl.h): the
 * self-attention's all-to-alls and the head's gather, as the CPU's
 * rank_dit_block and rank_dit_head run them (ranks/nets/wan_dit/dit_cpu.c): the
 * same split of the tokens (plan_seq_row0), the same packing (part v of a
 * rank's rows, (L, dim / U), holds the columns of the v-th U-th of the
 * heads; the parts follow one another), the same order of exchanges (q,
 * k, v, then the attention output back). The received parts land as
 * every token's rows of the rank's heads, (LA, dim / U), token-major with
 * heads interleaved: the attention's own layout, so nothing is unpacked
 * there. The all-to-alls move bf16 device buffers through the stage's
 * transport (comm_tp_alltoallv), each waited for on the host under the
 * watchdog. CUDA builds only. */
#include "cuda_check.h"
#include "log.h"
#include "stage_cuda_impl.h"

/* One side of an exchange: a buffer and, per rank v of the stage, the
 * offset and count of v's part in it, in elements. */
typedef struct seq_side {
  void *buf;
  const int64_t *off, *n;
} seq_side;

/* One all-to-all of the stage's ranks in elements of elem bytes: this
 * rank sends from.n[v] from from.buf + from.off[v] to rank v and receives
 * to.n[v] from rank v at to.buf + to.off[v]. */
static void exchange(rank_stage *s, cuda_stage *c, seq_side from, seq_side to, size_t elem,
                     const char *what) {
  const comm_group *g = s->cfg.seq;
  size_t so[COMM_GROUP_MAX], sb[COMM_GROUP_MAX], ro[COMM_GROUP_MAX], rb[COMM_GROUP_MAX];
  for (int v = 0; v < g->n; v++) {
    so[v] = (size_t)from.off[v] * elem;
    sb[v] = (size_t)from.n[v] * elem;
    ro[v] = (size_t)to.off[v] * elem;
    rb[v] = (size_t)to.n[v] * elem;
  }
  const comm_a2a x = {g->ranks, g->n, from.buf, sb, so, to.buf, rb, ro};
  comm_tp_alltoallv(s->cfg.tp, &x, g->tag, g->timeout_s, what, c->stream);
}

/* Rows r0 .. r0 + n of the rank's (L, D) into their parts of spack
 * (U, L, D / U), or back when !to_parts; dev: the rows, row-major (L, D)
 * from row r0 on. One strided copy per part. */
static void repack(const rank_stage *s, cuda_stage *c, uint16_t *dev, int64_t r0, int64_t n,
                   int to_parts) {
  const int U = s->cfg.seq->n;
  const int64_t L = s->tokens, D = s->c->dim, Dn = D / U;
  const size_t row = (size_t)D * 2, part = (size_t)Dn * 2;
  for (int v = 0; v < U; v++) {
    uint16_t *r = dev + v * Dn, *p = c->spack + ((int64_t)v * L + r0) * Dn;
    if (to_parts)
      CUDA_CHECK(cudaMemcpy2DAsync(p, part, r, row, part, (size_t)n, cudaMemcpyDeviceToDevice,
                                   c->stream));
    else
      CUDA_CHECK(cudaMemcpy2DAsync(r, row, p, part, part, (size_t)n, cudaMemcpyDeviceToDevice,
                                   c->stream));
  }
}

void rank_cuda_seq_pack_q(rank_stage *s, cuda_stage *c, int64_t r0, int64_t n) {
  repack(s, c, c->qb, r0, n, 1);
}

void rank_cuda_seq_unpack(rank_stage *s, cuda_stage *c, int64_t r0, int64_t n) {
  repack(s, c, c->ab, r0, n, 0);
}

void rank_cuda_seq_attention(rank_stage *s, cuda_stage *c) {
  const comm_group *g = s->cfg.seq;
  const int U = g->n;
  const int64_t L = s->tokens, LA = rank_cuda_seq_tokens(s), D = s->c->dim, Dn = D / U;
  uint16_t *full[4]; /* (LA, Dn) q, k, v, attention output */
  for (int t = 0; t < 4; t++) full[t] = c->sq + (int64_t)t * LA * Dn;
  int64_t part_off[COMM_GROUP_MAX], part_n[COMM_GROUP_MAX], row_off[COMM_GROUP_MAX],
      row_n[COMM_GROUP_MAX];
  plan_seq_head_exchange(L, LA, D, U, part_off, part_n, row_off, row_n);
  const seq_side parts = {c->spack, part_off, part_n};
  exchange(s, c, parts, (seq_side){full[0], row_off, row_n}, 2,
           "the all-to-all of the stage's sequence-parallel ranks (q)");
  repack(s, c, c->kb, 0, L, 1);
  exchange(s, c, parts, (seq_side){full[1], row_off, row_n}, 2,
           "the all-to-all of the stage's sequence-parallel ranks (k)");
  repack(s, c, c->vb, 0, L, 1);
  exchange(s, c, parts, (seq_side){full[2], row_off, row_n}, 2,
           "the all-to-all of the stage's sequence-parallel ranks (v)");
  kern_attn_params p = {full[0], full[1], full[2], full[3], LA, LA, s->c->heads / U,
                        wan_head_dim(s->c), 0.0f};
  kern_attn_run(c->attn, p, c->attn_scratch, c->attn_scratch_bytes, c->stream);
  exchange(s, c, (seq_side){full[3], row_off, row_n}, parts, 2,
           "the all-to-all of the stage's sequence-parallel ranks (attention output)");
}

void rank_cuda_seq_gather(rank_stage *s, cuda_stage *c, float *tok, int64_t cols) {
  const comm_group *g = s->cfg.seq;
  const int64_t LA = rank_cuda_seq_tokens(s), row0 = rank_cuda_seq_row0(s);
  int64_t soff[COMM_GROUP_MAX], sn[COMM_GROUP_MAX], roff[COMM_GROUP_MAX], rn[COMM_GROUP_MAX];
  for (int u = 0; u < g->n; u++) {
    /* its own rows are in place already: none to itself */
    soff[u] = row0 * cols;
    sn[u] = u == g->me ? 0 : s->tokens * cols;
    roff[u] = plan_seq_row0(LA, g->n, u) * cols;
    rn[u] = u == g->me ? 0 : plan_seq_rows(LA, g->n, u) * cols;
  }
  exchange(s, c, (seq_side){tok, soff, sn}, (seq_side){tok, roff, rn}, sizeof(float),
           "the gather of the head's rows over the stage's sequence-parallel ranks");
}
