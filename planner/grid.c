/* The R x S x U grid of a run's ranks (grid.h). */
#include "grid.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

plan_grid plan_grid_pipeline(int nranks) {
  plan_grid g = {1, nranks, 1};
  return g;
}

/* One positive integer of "RxSxU" at *p, at most PLAN_MAX_RANKS. */
static int parse_factor(const char **p, int *out) {
  if (**p < '0' || **p > '9') return 0;
  errno = 0;
  char *end;
  long v = strtol(*p, &end, 10);
  if (errno || v < 1 || v > PLAN_MAX_RANKS) return 0;
  *p = end;
  *out = (int)v;
  return 1;
}

int plan_grid_parse(const char *s, plan_grid *out, int *mode, char *err, size_t errlen) {
  if (s && strcmp(s, "auto") == 0) {
    *mode = PLAN_GRID_AUTO;
    return PLAN_OK;
  }
  if (s && strcmp(s, "pipeline") == 0) {
    *mode = PLAN_GRID_PIPELINE;
    return PLAN_OK;
  }
  plan_grid g;
  const char *p = s ? s : "";
  int ok = parse_factor(&p, &g.replicas) && *p++ == 'x' && parse_factor(&p, &g.stages) &&
           *p++ == 'x' && parse_factor(&p, &g.seq) && *p == '\0';
  if (!ok) {
    snprintf(err, errlen,
             "--layout '%s': expected auto, pipeline or RxSxU (replicas x pipeline stages x "
             "sequence-parallel ranks per stage, each 1..%d), e.g. 2x1x2",
             s ? s : "", PLAN_MAX_RANKS);
    return PLAN_EINVAL;
  }
  *out = g;
  *mode = PLAN_GRID_GIVEN;
  return PLAN_OK;
}

int plan_grid_check(const plan_grid *g, int nranks, int64_t heads, int blocks, int micro_batches,
                    char *err, size_t errlen) {
  char name[48];
  plan_grid_format(g, name, sizeof name);
  long total = (long)g->replicas * g->stages * g->seq;
  if (total != nranks) {
    snprintf(err, errlen, "--layout %s: %ld ranks, but the run has %d (R x S x U must equal it)",
             name, total, nranks);
    return PLAN_EINVAL;
  }
  if (heads <= 0 || heads % g->seq != 0) {
    snprintf(err, errlen,
             "--layout %s: %d sequence-parallel ranks must divide the model's %lld attention "
             "heads",
             name, g->seq, (long long)heads);
    return PLAN_EINVAL;
  }
  if (g->stages > blocks) {
    snprintf(err, errlen, "--layout %s: %d pipeline stages for a model of %d blocks", name,
             g->stages, blocks);
    return PLAN_EINVAL;
  }
  if (g->replicas > micro_batches) {
    snprintf(err, errlen,
             "--layout %s: %d replicas but %d micro-batch%s per step (CFG branches x videos in "
             "flight): a replica would have nothing to run",
             name, g->replicas, micro_batches, micro_batches == 1 ? "" : "es");
    return PLAN_EINVAL;
  }
  return PLAN_OK;
}

plan_grid_pos plan_grid_pos_of(const plan_grid *g, int rank) {
  plan_grid_pos p;
  p.seq = rank % g->seq;
  p.stage = (rank / g->seq) % g->stages;
  p.replica = rank / (g->seq * g->stages);
  return p;
}

int plan_grid_rank(const plan_grid *g, plan_grid_pos p) {
  return (p.replica * g->stages + p.stage) * g->seq + p.seq;
}

size_t plan_grid_format(const plan_grid *g, char *buf, size_t cap) {
  int n = snprintf(buf, cap, "%dx%dx%d", g->replicas, g->stages, g->seq);
  return n < 0 ? 0 : (size_t)n;
}

/* When replica r would finish one more micro-batch than the n[r] it holds. */
static double finish(const int *n, const double *speed, int r) {
  return (n[r] + 1) / (speed ? speed[r] : 1.0);
}

void plan_grid_owners(const plan_grid *g, const double *speed, int K, int *owner) {
  int n[PLAN_MAX_RANKS] = {0};
  for (int k = 0; k < K; k++) {
    int best = k < g->replicas ? k : 0;
    for (int r = 1; k >= g->replicas && r < g->replicas; r++)
      if (finish(n, speed, r) < finish(n, speed, best)) best = r;
    owner[k] = best;
    n[best]++;
  }
}
