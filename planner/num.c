/* The one number syntax (see num.h). The text is checked character by
 * character first; only text of the accepted form reaches strtoll/strtod,
 * so their leniencies (leading blanks, '+', hex, inf) never apply. */
#include "num.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "plan.h"

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Skips digits from s; the count in *n. */
static const char *digits(const char *s, int *n) {
  *n = 0;
  while (is_digit(*s)) s++, (*n)++;
  return s;
}

int plan_num_int(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  if (!s) return PLAN_EINVAL;
  int n;
  const char *p = digits(s + (*s == '-'), &n);
  if (n == 0 || *p) return PLAN_EINVAL;
  errno = 0;
  char *end = NULL;
  const long long v = strtoll(s, &end, 10);
  if (errno == ERANGE || *end || v < lo || v > hi) return PLAN_EINVAL;
  *out = v;
  return PLAN_OK;
}

int plan_num_real(const char *s, double lo, double hi, double *out) {
  if (!s) return PLAN_EINVAL;
  int ni, nf = 0, ne;
  const char *p = digits(s + (*s == '-'), &ni);
  if (*p == '.') p = digits(p + 1, &nf);
  if (ni + nf == 0) return PLAN_EINVAL;
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '-' || *p == '+') p++;
    p = digits(p, &ne);
    if (ne == 0) return PLAN_EINVAL;
  }
  if (*p) return PLAN_EINVAL;
  errno = 0;
  char *end = NULL;
  const double v = strtod(s, &end);
  /* ERANGE on underflow still gives a usable value (0 or a subnormal);
   * on overflow strtod returns HUGE_VAL, refused by isfinite. */
  if (*end || !isfinite(v) || v < lo || v > hi) return PLAN_EINVAL;
  *out = v;
  return PLAN_OK;
}

int plan_num_uint(const char *s, uint64_t *out) {
  if (!s) return PLAN_EINVAL;
  int n;
  if (*digits(s, &n) || n == 0) return PLAN_EINVAL;
  errno = 0;
  char *end = NULL;
  const unsigned long long v = strtoull(s, &end, 10);
  if (errno == ERANGE || *end) return PLAN_EINVAL;
  *out = v;
  return PLAN_OK;
}
