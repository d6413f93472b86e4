/* Step caching (DESIGN.md "Step caching"): which micro-batch (CFG branch)
 * of which step reuses the cached residual of the whole transformer
 * instead of running the blocks. The decision is a pure function of the
 * method, its threshold, the schedule and (TeaCache) the time embeddings
 * e of the steps: token-independent, so it is made once, on rank 0,
 * before sampling, and carried with the job to every rank.
 *
 * TeaCache (TeaCache4Wan2.1, ali-vilab/TeaCache, teacache_generate.py,
 * without --use_ret_steps): per branch, the relative L1 change of the time
 * embedding e between consecutive steps, mean|e_i - e_{i-1}| /
 * mean|e_{i-1}|, rescaled by the published polynomial of the model and
 * accumulated; a step is skipped while the sum stays below the threshold,
 * and a computed step resets it. The first and the last step are always
 * computed. Coefficients (highest power first): Wan 2.1 T2V 1.3B
 * 2.39676752e+03, -1.31110545e+03, 2.01331979e+02, -8.29855975e+00,
 * 1.37887774e-01; 14B -5784.54975374, 5449.50911966, -1811.16591783,
 * 256.27178429, -13.02252404. Published thresholds: 1.3B 0.05 (slow) and
 * 0.08 (fast), 14B 0.14 and 0.2.
 *
 * MagCache (MagCache4Wan2.1, Zehong-Ma/MagCache, magcache_generate.py):
 * per branch, the published mean magnitude ratio of step i's residual to
 * step i-1's (Wan 2.1 T2V 1.3B and 14B, 50 steps; nearest-interpolated per
 * branch to other step counts as published) multiplies an accumulated
 * ratio; the error |1 - ratio| accumulates; a step is skipped while the
 * error stays below the threshold and at most K = 2 steps in a row were
 * skipped; the first retention ratio 0.2 of the 2 x steps forward calls
 * (counted conditional, unconditional, conditional, ...) are computed.
 * Published defaults: threshold 0.12, K 2, retention 0.2.
 *
 * Added to both here: the first and last step are always computed (the
 * published MagCache relies on the retention ratio for the first and on
 * its ratios for the last), and with two experts (Wan 2.2) the first step
 * of an expert is computed and the accumulators reset: a residual of the
 * other expert is never reused.
 *
 * A model whose width is neither 1.3B's (1536) nor 14B's (5120), such as the
 * tiny test models, uses 1.3B's constants. */
#ifndef RANK_STEP_CACHE_H
#define RANK_STEP_CACHE_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
  RANK_CACHE_OFF = 0,
  RANK_CACHE_TEACACHE = 1,
  RANK_CACHE_MAGCACHE = 2,
} rank_cache_method;

typedef struct rank_cache_spec {
  rank_cache_method method;
  double thresh; /* >= 0; 0 never skips */
} rank_cache_spec;

/* What a micro-batch does at a step. */
enum {
  RANK_CACHE_RUN = 0,   /* runs the blocks */
  RANK_CACHE_STORE = 1, /* runs the blocks and keeps out - in: the next step skips */
  RANK_CACHE_SKIP = 2,  /* reuses the kept residual: in + R goes to the head */
};

/* MagCache's published K (most steps skipped in a row) and retention ratio. */
#define RANK_MAGCACHE_K 2
#define RANK_MAGCACHE_RETENTION 0.2

/* "off", "teacache:T" or "magcache:T" (T a threshold 0..1e6: the rescaled sums of random-weight models run far above the published thresholds). SP_OK, or
 * SP_ERR_INPUT with the reason in err (not logged: the caller names the
 * flag or the --jobs line). */
int rank_cache_parse(const char *s, rank_cache_spec *out, char *err, size_t errlen);
/* The spec as text ("off", "teacache:0.08"). */
void rank_cache_format(const rank_cache_spec *c, char *buf, size_t n);
/* The name of the published constants used for a model of width dim:
 * "Wan 2.1 T2V 1.3B" or "Wan 2.1 T2V 14B". */
const char *rank_cache_constants_name(int64_t dim);

/* Which steps branch (0: conditional, 1: unconditional) of a job skips:
 * skip[i] = 1 reuses the residual at step i. e: (steps, dim) the time
 * embedding of each step (TeaCache; may be NULL for MagCache); expert:
 * (steps) each step's expert or NULL. Pure: the same inputs give the same
 * decision on every rank and every run. */
void rank_cache_decide(const rank_cache_spec *c, int64_t dim, int steps, int branch,
                       const float *e, const uint8_t *expert, uint8_t *skip);
/* The actions of one branch from its skips: RANK_CACHE_STORE at a computed
 * step followed by a skipped one, else RUN or SKIP. act[steps]. */
void rank_cache_actions(const uint8_t *skip, int steps, uint8_t *act);

#endif
