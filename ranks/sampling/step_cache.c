/* Step caching's decision (see step_cache.h): the published criteria of
 * TeaCache and MagCache for Wan 2.1, per CFG branch. */
#include "step_cache.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "num.h"
#include "plan.h"

/* MagCache4Wan2.1's magnitude ratios (magcache_generate.py, t2v): 50 steps,
 * conditional and unconditional interleaved (index 2 i + branch), the first
 * pair padding (1.0). */
#define MAG_STEPS 50
#define MAG_RATIOS (2 * MAG_STEPS)
static const double mag_13b[MAG_RATIOS] = {
    1.0, 1.0, 1.0124, 1.02213, 1.00166, 1.0041, 0.99791, 1.00061, 0.99682, 0.99762, 0.99634,
    0.99685, 0.99567, 0.99586, 0.99416, 0.99422, 0.99578, 0.99575, 0.9957, 0.99563, 0.99511,
    0.99506, 0.99535, 0.99531, 0.99552, 0.99549, 0.99541, 0.99539, 0.9954, 0.99536, 0.99489,
    0.99485, 0.99518, 0.99514, 0.99484, 0.99478, 0.99481, 0.99479, 0.99415, 0.99413, 0.99419,
    0.99416, 0.99396, 0.99393, 0.99388, 0.99386, 0.99349, 0.99349, 0.99309, 0.99304, 0.9927,
    0.9927, 0.99228, 0.99226, 0.99171, 0.9917, 0.99137, 0.99135, 0.99068, 0.99063, 0.99005,
    0.99003, 0.98944, 0.98942, 0.98849, 0.98849, 0.98758, 0.98757, 0.98644, 0.98643, 0.98504,
    0.98503, 0.9836, 0.98359, 0.98202, 0.98201, 0.97977, 0.97978, 0.97717, 0.97718, 0.9741,
    0.97411, 0.97003, 0.97002, 0.96538, 0.96541, 0.9593, 0.95933, 0.95086, 0.95089, 0.94013,
    0.94019, 0.92402, 0.92414, 0.90241, 0.9026, 0.86821, 0.86868, 0.81838, 0.81939,
};

static const double mag_14b[MAG_RATIOS] = {
    1.0, 1.0, 1.02504, 1.03017, 1.00025, 1.00251, 0.9985, 0.99962, 0.99779, 0.99771, 0.9966,
    0.99658, 0.99482, 0.99476, 0.99467, 0.99451, 0.99664, 0.99656, 0.99434, 0.99431, 0.99533,
    0.99545, 0.99468, 0.99465, 0.99438, 0.99434, 0.99516, 0.99517, 0.99384, 0.9938, 0.99404,
    0.99401, 0.99517, 0.99516, 0.99409, 0.99408, 0.99428, 0.99426, 0.99347, 0.99343, 0.99418,
    0.99416, 0.99271, 0.99269, 0.99313, 0.99311, 0.99215, 0.99215, 0.99218, 0.99215, 0.99216,
    0.99217, 0.99163, 0.99161, 0.99138, 0.99135, 0.98982, 0.9898, 0.98996, 0.98995, 0.9887,
    0.98866, 0.98772, 0.9877, 0.98767, 0.98765, 0.98573, 0.9857, 0.98501, 0.98498, 0.9838,
    0.98376, 0.98177, 0.98173, 0.98037, 0.98035, 0.97678, 0.97677, 0.97546, 0.97543, 0.97184,
    0.97183, 0.96711, 0.96708, 0.96349, 0.96345, 0.95629, 0.95625, 0.94926, 0.94929, 0.93964,
    0.93961, 0.92511, 0.92504, 0.90693, 0.90678, 0.8796, 0.87945, 0.86111, 0.86189,
};
/* TeaCache4Wan2.1's rescaling polynomials (teacache_generate.py, t2v,
 * without --use_ret_steps), highest power first. */
static const double tea_13b[5] = {2.39676752e+03, -1.31110545e+03, 2.01331979e+02,
                                  -8.29855975e+00, 1.37887774e-01};
static const double tea_14b[5] = {-5784.54975374, 5449.50911966, -1811.16591783, 256.27178429,
                                  -13.02252404};

static int is_14b(int64_t dim) { return dim == 5120; }

const char *rank_cache_constants_name(int64_t dim) {
  return is_14b(dim) ? "Wan 2.1 T2V 14B" : "Wan 2.1 T2V 1.3B";
}

int rank_cache_parse(const char *s, rank_cache_spec *out, char *err, size_t errlen) {
  rank_cache_spec c = {RANK_CACHE_OFF, 0.0};
  const char *colon = s ? strchr(s, ':') : NULL;
  if (s && strcmp(s, "off") == 0) {
    *out = c;
    return SP_OK;
  }
  if (colon && (size_t)(colon - s) == 8 && strncmp(s, "teacache", 8) == 0)
    c.method = RANK_CACHE_TEACACHE;
  else if (colon && (size_t)(colon - s) == 8 && strncmp(s, "magcache", 8) == 0)
    c.method = RANK_CACHE_MAGCACHE;
  if (c.method == RANK_CACHE_OFF) {
    snprintf(err, errlen, "'%s' is not off, teacache:T or magcache:T", s ? s : "(null)");
    return SP_ERR_INPUT;
  }
  /* The one number syntax (planner/num.h): no blanks, no hex. */
  if (plan_num_real(colon + 1, 0.0, 1e6, &c.thresh) != PLAN_OK) {
    snprintf(err, errlen, "'%s': the threshold T is not a number in 0..1e6", s);
    return SP_ERR_INPUT;
  }
  *out = c;
  return SP_OK;
}

void rank_cache_format(const rank_cache_spec *c, char *buf, size_t n) {
  if (c->method == RANK_CACHE_OFF)
    snprintf(buf, n, "off");
  else
    snprintf(buf, n, "%s:%g", c->method == RANK_CACHE_TEACACHE ? "teacache" : "magcache",
             c->thresh);
}

/* A step that is always computed: the first, the last, an expert's first. */
static int forced(int i, int steps, const uint8_t *expert) {
  return i == 0 || i == steps - 1 || (expert && expert[i] != expert[i - 1]);
}

/* mean|a - b| / mean|b| over n values, in double. */
static double rel_l1(const float *a, const float *b, int64_t n) {
  double d = 0.0, r = 0.0;
  for (int64_t k = 0; k < n; k++) {
    d += fabs((double)a[k] - (double)b[k]);
    r += fabs((double)b[k]);
  }
  return r > 0.0 ? d / r : INFINITY;
}

static void decide_teacache(double thresh, int64_t dim, int steps, const float *e,
                            const uint8_t *expert, uint8_t *skip) {
  const double *p = is_14b(dim) ? tea_14b : tea_13b;
  double acc = 0.0;
  for (int i = 0; i < steps; i++) {
    skip[i] = 0;
    if (forced(i, steps, expert)) {
      acc = 0.0;
      continue;
    }
    const double x = rel_l1(e + (int64_t)i * dim, e + (int64_t)(i - 1) * dim, dim);
    acc += (((p[0] * x + p[1]) * x + p[2]) * x + p[3]) * x + p[4];
    if (acc < thresh)
      skip[i] = 1;
    else
      acc = 0.0;
  }
}

/* Branch's ratio at step i of steps: the published table at 50 steps, else
 * its branch's 50 values nearest-interpolated to steps (numpy.round: half
 * to even, which rint gives in the default rounding mode). */
static double mag_ratio(int64_t dim, int steps, int branch, int i) {
  const double *t = is_14b(dim) ? mag_14b : mag_13b;
  if (steps == MAG_STEPS) return t[2 * i + branch];
  int src = steps == 1 ? MAG_STEPS - 1
                       : (int)rint((double)i * ((double)(MAG_STEPS - 1) / (double)(steps - 1)));
  return t[2 * src + branch];
}

static void decide_magcache(double thresh, int64_t dim, int steps, int branch,
                            const uint8_t *expert, uint8_t *skip) {
  /* forward calls 2 i + branch below this are computed (published: int()) */
  const int keep = (int)((double)(2 * steps) * RANK_MAGCACHE_RETENTION);
  double ratio = 1.0, err = 0.0;
  int run = 0;
  for (int i = 0; i < steps; i++) {
    skip[i] = 0;
    if (forced(i, steps, expert)) {
      ratio = 1.0, err = 0.0, run = 0;
      continue;
    }
    if (2 * i + branch < keep) continue;
    ratio *= mag_ratio(dim, steps, branch, i);
    run++;
    err += fabs(1.0 - ratio);
    if (err < thresh && run <= RANK_MAGCACHE_K)
      skip[i] = 1;
    else
      ratio = 1.0, err = 0.0, run = 0;
  }
}

void rank_cache_decide(const rank_cache_spec *c, int64_t dim, int steps, int branch,
                       const float *e, const uint8_t *expert, uint8_t *skip) {
  if (c->method == RANK_CACHE_TEACACHE && e)
    decide_teacache(c->thresh, dim, steps, e, expert, skip);
  else if (c->method == RANK_CACHE_MAGCACHE)
    decide_magcache(c->thresh, dim, steps, branch, expert, skip);
  else
    memset(skip, 0, (size_t)steps);
}

void rank_cache_actions(const uint8_t *skip, int steps, uint8_t *act) {
  for (int i = 0; i < steps; i++)
    act[i] = skip[i]                          ? RANK_CACHE_SKIP
             : i + 1 < steps && skip[i + 1] ? RANK_CACHE_STORE
                                            : RANK_CACHE_RUN;
}
