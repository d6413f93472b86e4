/* The layout of a run's ranks as a grid: R replicas x S pipeline stages x
 * U sequence-parallel ranks per stage, R x S x U = ranks.
 *
 * A replica holds the whole model over its S stages and runs its share of
 * the micro-batches (the CFG branches of a video, the videos of --jobs); the
 * U ranks of one stage hold the same blocks and 1/U of the tokens each
 * (Ulysses: self-attention exchanges heads with an all-to-all). The plain
 * pipeline of earlier plans is 1 x ranks x 1.
 *
 * Rank numbering, the one place it is written: u varies fastest, then s,
 * then r: rank = (r x S + s) x U + u. The ranks of a stage are neighbours
 * (the all-to-all stays on one node's links first), a replica's ranks are
 * contiguous. */
#ifndef PLAN_GRID_H
#define PLAN_GRID_H

#include <stddef.h>
#include <stdint.h>

typedef struct plan_grid {
  int replicas; /* R */
  int stages;   /* S */
  int seq;      /* U */
} plan_grid;

/* A rank's place in the grid. */
typedef struct plan_grid_pos {
  int replica, stage, seq;
} plan_grid_pos;

/* The pipeline of earlier plans: 1 x nranks x 1. */
plan_grid plan_grid_pipeline(int nranks);

/* What a --layout value asks for. */
enum {
  PLAN_GRID_GIVEN = 0,    /* "RxSxU": that grid */
  PLAN_GRID_AUTO = 1,     /* "auto": the planner's choice (grid_choice.h) */
  PLAN_GRID_PIPELINE = 2, /* "pipeline": 1 x ranks x 1 */
};

/* Parses the --layout value into *mode (PLAN_GRID_*): "auto", "pipeline"
 * (*out untouched) or "RxSxU" with three positive integers ("2x1x2").
 * PLAN_EINVAL with a line quoting the bad token otherwise. */
int plan_grid_parse(const char *s, plan_grid *out, int *mode, char *err, size_t errlen);

/* Checks g for a run of nranks ranks on a model of `heads` attention heads
 * and `blocks` blocks with `micro_batches` micro-batches per step in all:
 * R x S x U = nranks, U divides heads, S <= blocks, R <= micro_batches (a
 * replica without a micro-batch would idle). PLAN_EINVAL with the failed
 * check in one line. */
int plan_grid_check(const plan_grid *g, int nranks, int64_t heads, int blocks, int micro_batches,
                    char *err, size_t errlen);

/* rank -> position and back (the numbering above); rank in [0, R x S x U). */
plan_grid_pos plan_grid_pos_of(const plan_grid *g, int rank);
int plan_grid_rank(const plan_grid *g, plan_grid_pos p);

/* Ulysses' split of a sequence, the one place it is written: L tokens over
 * n ranks in contiguous slices, the first L % n of them one row longer;
 * rank u holds rows [plan_seq_row0(L, n, u), plan_seq_row0(L, n, u + 1)).
 * The run splits its tokens with it (ranks/nets/wan_dit/dit.h) and the planner
 * counts a rank's share with it (plan_rank_tokens). */
static inline int64_t plan_seq_row0(int64_t L, int n, int u) {
  const int64_t q = L / n, r = L % n;
  return u * q + (u < r ? u : r);
}

/* Rows of rank u of n; the most are rank 0's, ceil(L / n). */
static inline int64_t plan_seq_rows(int64_t L, int n, int u) {
  return plan_seq_row0(L, n, u + 1) - plan_seq_row0(L, n, u);
}

/* The head all-to-all of Ulysses, in elements, the one place it is written:
 * rank u's slice of Lu rows packed as n parts of (Lu, D / n), part u going
 * to rank u (part_off / part_n), and the L rows of every rank's slice of its
 * own n-th of the columns, rank u's rows landing at their place in the
 * whole sequence (row_off / row_n). The CPU and CUDA stages both exchange
 * with it, forward and back. */
static inline void plan_seq_head_exchange(int64_t Lu, int64_t L, int64_t D, int n,
                                          int64_t *part_off, int64_t *part_n, int64_t *row_off,
                                          int64_t *row_n) {
  const int64_t Dn = D / n;
  for (int u = 0; u < n; u++) {
    part_off[u] = u * Lu * Dn;
    part_n[u] = Lu * Dn;
    row_off[u] = plan_seq_row0(L, n, u) * Dn;
    row_n[u] = plan_seq_rows(L, n, u) * Dn;
  }
}

/* Replicas of unequal speed (run --speed): the replica that runs each of a
 * step's K micro-batches, into owner[0..K). Every replica takes one first
 * (k < R: replica k; R <= K, plan_grid_check), then each next micro-batch
 * goes to the replica that would finish it first, (n_r + 1) / speed[r]
 * for the n_r it holds, the lower r on a tie: shares in proportion to the
 * speeds as far as whole micro-batches allow (the smallest largest
 * n_r / speed[r]), and k % R with equal speeds. speed: R values > 0, NULL
 * for equal. */
void plan_grid_owners(const plan_grid *g, const double *speed, int K, int *owner);

/* "RxSxU" into buf (NUL-terminated when cap > 0); returns snprintf's length. */
size_t plan_grid_format(const plan_grid *g, char *buf, size_t cap);

#endif
