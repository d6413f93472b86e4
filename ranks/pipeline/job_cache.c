/* Step caching in the session: each cached job's actions decided on rank
 * 0 (ranks/sampling/step_cache.h) and given to every rank, and what rank 0
 * keeps of them for the log and --json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_session_impl.h"
#include "log.h"

/* The steps of branch b whose action is a skip, "3,5,7" ("none"), into buf. */
static void cache_steps_text(const uint8_t *act, int steps, int micro, int b, char *buf,
                             size_t n) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < steps && len + 16 < n; i++)
    if (act[i * micro + b] == RANK_CACHE_SKIP)
      len += (size_t)snprintf(buf + len, n - len, "%s%d", len ? "," : "", i);
  if (!len) snprintf(buf, n, "none");
}

void job_cache_record(job_session *s, const job_spec *j, const uint8_t *act) {
  const int micro = job_micro_batches(j), n = j->steps * micro;
  int64_t skipped = 0;
  for (int k = 0; k < n; k++) skipped += act[k] == RANK_CACHE_SKIP;
  s->cache_skipped += skipped;
  s->cache_total += n;
  free(s->cache_act);
  s->cache_act = sp_xmalloc((size_t)n);
  memcpy(s->cache_act, act, (size_t)n);
  s->cache_spec = j->cache;
  s->cache_steps = j->steps;
  s->cache_micro = micro;
  char spec[64], c0[512], c1[512];
  rank_cache_format(&j->cache, spec, sizeof spec);
  cache_steps_text(act, j->steps, micro, 0, c0, sizeof c0);
  if (micro > 1) cache_steps_text(act, j->steps, micro, 1, c1, sizeof c1);
  sp_log_info("cache: %s (constants of %s) skips %lld of %d micro-batch steps; skipped steps "
              "(from 0): %s%s%s%s",
              spec, rank_cache_constants_name(rank_model_get_info(s->m)->config.dim),
              (long long)skipped, n, micro > 1 ? "conditional " : "", c0,
              micro > 1 ? ", negative " : "", micro > 1 ? c1 : "");
}

int job_session_cache(const job_session *s, rank_cache_spec *spec, const uint8_t **act,
                      int *steps, int *micro, int64_t *skipped, int64_t *total) {
  if (!s || !s->cache_act) return 0;
  *spec = s->cache_spec;
  *act = s->cache_act;
  *steps = s->cache_steps;
  *micro = s->cache_micro;
  *skipped = s->cache_skipped;
  *total = s->cache_total;
  return 1;
}

/* Rank 0: each step's time embedding e (steps, dim) under its expert, for
 * TeaCache's criterion; expert 0 selected again after. */
static int cache_embeddings(job_session *s, const job_spec *j, const int64_t *ts,
                            const uint8_t *expert, float *e) {
  const int64_t dim = rank_model_get_info(s->m)->config.dim;
  int rc = SP_OK;
  for (int i = 0; i < j->steps && rc == SP_OK; i++) {
    if (expert) rank_stage_set_expert(s->stage, expert[i]);
    rc = rank_stage_time_embed(s->stage, (double)ts[i], e + (int64_t)i * dim);
  }
  if (expert) rank_stage_set_expert(s->stage, 0);
  return rc;
}

int job_cache_plan(job_session *s, const job_spec *j, const int64_t *ts, const uint8_t *expert,
                   uint8_t **out) {
  const comm_world *w = s->w;
  const int micro = job_micro_batches(j), n = j->steps * micro;
  const int64_t dim = rank_model_get_info(s->m)->config.dim;
  *out = NULL;
  if (j->cache.method == RANK_CACHE_OFF) return SP_OK;
  if (!s->cache_any) { /* a --jobs stream's line: the plan is the command line's */
    if (w->rank == 0)
      sp_log_error("cache=: the run was planned and loaded without a step cache (a --jobs "
                   "stream's lines cache only when the command line has --cache)");
    return SP_ERR_INPUT;
  }
  uint8_t *act = sp_xcalloc((size_t)n, 1);
  int rc = SP_OK;
  if (w->rank == 0) {
    float *e = NULL;
    if (j->cache.method == RANK_CACHE_TEACACHE) {
      e = sp_xmalloc((size_t)(j->steps * dim) * sizeof(float));
      rc = cache_embeddings(s, j, ts, expert, e);
    }
    uint8_t *skip = sp_xmalloc((size_t)j->steps), *a = sp_xmalloc((size_t)j->steps);
    for (int b = 0; b < micro && rc == SP_OK; b++) {
      rank_cache_decide(&j->cache, dim, j->steps, b, e, expert, skip);
      rank_cache_actions(skip, j->steps, a);
      for (int i = 0; i < j->steps; i++) act[i * micro + b] = a[i];
    }
    free(skip);
    free(a);
    free(e);
  }
  rc = job_phase(w, rc, "deciding the cached steps");
  if (rc == SP_OK) comm_bcast(w, act, (size_t)n, 0);
  if (rc == SP_OK && w->rank == 0) job_cache_record(s, j, act);
  if (rc != SP_OK) free(act);
  *out = rc == SP_OK ? act : NULL;
  return rc;
}
