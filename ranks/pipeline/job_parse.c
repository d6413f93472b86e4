/* The value parsers of every flag (see job_parse.h): planner/num.h's one
 * syntax, with one logged line naming the flag. */
#include "job_parse.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "job_limits.h"
#include "log.h"
#include "num.h"
#include "plan.h"

int job_parse_int64(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out) {
  if (plan_num_int(s, lo, hi, out) == PLAN_OK) return SP_OK;
  if (lo == INT64_MIN && hi == INT64_MAX)
    sp_log_error("%s: '%s' is not an integer (decimal digits)", flag, s);
  else
    sp_log_error("%s: '%s' is not an integer in %lld..%lld", flag, s, (long long)lo,
                 (long long)hi);
  return SP_ERR_INPUT;
}

int job_parse_uint64(const char *flag, const char *s, uint64_t *out) {
  if (plan_num_uint(s, out) == PLAN_OK) return SP_OK;
  sp_log_error("%s: '%s' is not an integer in 0..%llu", flag, s, (unsigned long long)UINT64_MAX);
  return SP_ERR_INPUT;
}

int job_parse_double(const char *flag, const char *s, double lo, double hi, double *out) {
  if (plan_num_real(s, lo, hi, out) == PLAN_OK) return SP_OK;
  if (isinf(lo) && isinf(hi))
    sp_log_error("%s: '%s' is not a number (decimal, as 2.5 or 1e-3)", flag, s);
  else
    sp_log_error("%s: '%s' is not a number in %g..%g", flag, s, lo, hi);
  return SP_ERR_INPUT;
}

int job_parse_size_hw(const char *flag, const char *s, int64_t *h, int64_t *w) {
  /* HEIGHTxWIDTH, or WIDTH*HEIGHT as the Wan repository's --size writes it
   * (832*480 is 480x832). */
  const char *x = strchr(s, '*');
  const int width_first = x != NULL;
  if (!x) x = strchr(s, 'x');
  if (!x) x = strchr(s, 'X');
  char a[32];
  int64_t av, bv;
  if (x && (size_t)(x - s) < sizeof a) {
    memcpy(a, s, (size_t)(x - s));
    a[x - s] = '\0';
    if (plan_num_int(a, 1, JOB_SIDE_MAX, &av) == PLAN_OK &&
        plan_num_int(x + 1, 1, JOB_SIDE_MAX, &bv) == PLAN_OK) {
      *h = width_first ? bv : av;
      *w = width_first ? av : bv;
      return SP_OK;
    }
  }
  sp_log_error("%s: '%s' is not HEIGHTxWIDTH (for example 480x832) or WIDTH*HEIGHT (832*480), "
               "each in 1..%d",
               flag, s, JOB_SIDE_MAX);
  return SP_ERR_INPUT;
}

int job_parse_list(const char *flag, const char *s, char sep, char *buf, size_t cap,
                   char **items, int max, int *n) {
  const size_t len = strlen(s);
  if (len >= cap) {
    sp_log_error("%s: the list is longer than %zu characters", flag, cap - 1);
    return SP_ERR_INPUT;
  }
  memcpy(buf, s, len + 1);
  *n = 0;
  for (char *p = buf;;) {
    char *end = strchr(p, sep);
    if (end) *end = '\0';
    if (!*p) {
      sp_log_error("%s: '%s' has an empty item (a list is VALUE%cVALUE...)", flag, s, sep);
      return SP_ERR_INPUT;
    }
    if (*n == max) {
      sp_log_error("%s: '%s' has more than %d items", flag, s, max);
      return SP_ERR_INPUT;
    }
    items[(*n)++] = p;
    if (!end) return SP_OK;
    p = end + 1;
  }
}
