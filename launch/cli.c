/* Command-line value parsers (see cli.h). */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static int g_errors_at_reset;

void cli_getopt_reset(void) {
  optind = 0; /* glibc: 0 re-initialises completely, GNU permutation stays on */
  opterr = 1;
  g_errors_at_reset = sp_log_error_count();
}

int cli_parse_int64(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end || errno == ERANGE || v < lo || v > hi) {
    sp_log_error("%s: '%s' is not an integer in %lld..%lld", flag, s, (long long)lo,
                 (long long)hi);
    return SP_ERR_INPUT;
  }
  *out = v;
  return SP_OK;
}

int cli_parse_uint64(const char *flag, const char *s, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  if (!*s || *s == '-') goto bad;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end || errno == ERANGE) goto bad;
  *out = v;
  return SP_OK;
bad:
  sp_log_error("%s: '%s' is not a non-negative 64-bit integer", flag, s);
  return SP_ERR_INPUT;
}

int cli_parse_double(const char *flag, const char *s, double lo, double hi, double *out) {
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (!*s || *end || errno == ERANGE || !isfinite(v) || v < lo || v > hi) {
    sp_log_error("%s: '%s' is not a number in %g..%g", flag, s, lo, hi);
    return SP_ERR_INPUT;
  }
  *out = v;
  return SP_OK;
}

int cli_parse_size_hw(const char *flag, const char *s, int64_t *h, int64_t *w) {
  const char *x = strchr(s, 'x');
  if (!x) x = strchr(s, 'X');
  char buf[64];
  if (!x || (size_t)(x - s) >= sizeof buf) goto bad;
  memcpy(buf, s, (size_t)(x - s));
  buf[x - s] = '\0';
  char *end = NULL;
  errno = 0;
  long long hv = strtoll(buf, &end, 10);
  if (!buf[0] || *end || errno) goto bad;
  long long wv = strtoll(x + 1, &end, 10);
  if (!x[1] || *end || errno) goto bad;
  if (hv < 1 || hv > 65536 || wv < 1 || wv > 65536) goto bad;
  *h = hv;
  *w = wv;
  return SP_OK;
bad:
  sp_log_error("%s: '%s' is not HEIGHTxWIDTH with each in 1..65536 (for example 480x832)", flag,
               s);
  return SP_ERR_INPUT;
}

int cli_parse_dtype(const char *flag, const char *s, kern_dtype *out) {
  if (strcmp(s, "bf16") == 0) {
    *out = KERN_DTYPE_BF16;
  } else if (strcmp(s, "fp32") == 0) {
    *out = KERN_DTYPE_F32;
  } else {
    sp_log_error("%s: '%s' is not bf16 or fp32", flag, s);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

int cli_bad_usage(const char *cmd) {
  /* One error line per failure: after a specific error the pointer to
   * --help is a hint; after getopt's own complaint it is the error. */
  if (sp_log_error_count() > g_errors_at_reset)
    sp_log_info("run 'staticpipe %s --help' for the options", cmd);
  else
    sp_log_error("bad usage: run 'staticpipe %s --help' for the options", cmd);
  return SP_ERR_INPUT;
}
