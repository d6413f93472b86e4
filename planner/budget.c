/* Budget strings (grammar in plan.h). Every malformed form is refused with
 * one line that quotes the bad token and says what is allowed. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "plan.h"
#include "plan_strbuf.h"

#define ALLOWED_HINT                                                                          \
  "allowed: auto, a fraction like 0.8, or entries 'cuda:K,SIZE' / 'cuda:K,0.5' / "           \
  "'cuda:K,N%%' / 'cpu,*' joined by ';' (SIZE like 2.5gb, optionally followed by *; units "  \
  "b, kb, mb, gb, tb, powers of 1024)"


/* Copies s[0..n) into a bounded buffer without surrounding blanks, for
 * quoting and matching. Returns 0, or -1 when it does not fit. */
static int token_copy(const char *s, size_t n, char *dst, size_t cap) {
  while (n && isspace((unsigned char)*s)) s++, n--;
  while (n && isspace((unsigned char)s[n - 1])) n--;
  if (n + 1 > cap) return -1;
  memcpy(dst, s, n);
  dst[n] = '\0';
  return 0;
}

static int ieq(const char *a, const char *b) {
  for (; *a && *b; a++, b++)
    if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
  return *a == *b;
}

/* A plain decimal number "123", "2.5", ".5": digits only (no sign, no
 * exponent, no hex, no inf/nan). Parsed exactly as a fraction
 * ip + fp / 10^fd with at most 18 integer and 18 fraction digits so that
 * sizes are computed in integers, not rounded through a double. */
typedef struct decimal {
  uint64_t ip, fp, fscale; /* value = ip + fp / fscale */
} decimal;

/* Returns the count of characters consumed (0 = not a number), or -1 on
 * too many digits (overflow). */
static int decimal_scan(const char *s, decimal *d) {
  const char *p = s;
  int idig = 0, fdig = 0;
  d->ip = 0;
  d->fp = 0;
  d->fscale = 1;
  while (isdigit((unsigned char)*p)) {
    if (d->ip == 0 && *p == '0') { /* leading zeros add no digits */
      p++;
      continue;
    }
    if (++idig > 18) return -1;
    d->ip = d->ip * 10 + (uint64_t)(*p - '0');
    p++;
  }
  if (p == s && *p != '.') return 0;
  if (*p == '.') {
    p++;
    while (isdigit((unsigned char)*p)) {
      if (fdig < 18) { /* further digits are below one byte: ignored */
        d->fp = d->fp * 10 + (uint64_t)(*p - '0');
        d->fscale *= 10;
      }
      fdig++;
      p++;
    }
    if (p == s + 1) return 0; /* "." alone */
  }
  return (int)(p - s);
}

static double decimal_value(const decimal *d) {
  return (double)d->ip + (double)d->fp / (double)d->fscale;
}

/* Multiplies a decimal by 2^shift into whole bytes (rounded to nearest).
 * Returns 0, or -1 on overflow of 64 bits. */
static int decimal_to_bytes(const decimal *d, int shift, uint64_t *out) {
  if (shift > 0 && d->ip > (UINT64_MAX >> shift)) return -1;
  uint64_t whole = d->ip << shift;
  /* fraction part: fp * 2^shift / fscale, fp < fscale <= 1e18 < 2^60, so
   * compute in long double-free integer steps: split the shift. */
  uint64_t frac = 0;
  if (d->fp) {
    /* fp/fscale < 1, so the result < 2^shift; accumulate bit by bit to
     * stay exact: frac = floor(fp * 2^shift / fscale + 1/2). */
    uint64_t num = d->fp, acc = 0;
    for (int i = 0; i < shift; i++) {
      num *= 2; /* num < 2 * fscale <= 2e18 < 2^64 */
      acc <<= 1;
      if (num >= d->fscale) {
        num -= d->fscale;
        acc |= 1;
      }
    }
    if (num * 2 >= d->fscale) acc++;
    frac = acc;
  }
  if (whole > UINT64_MAX - frac) return -1;
  *out = whole + frac;
  return 0;
}

/* Unit suffix -> power-of-two shift, or -1. */
static int unit_shift(const char *u) {
  static const struct {
    const char *name;
    int shift;
  } units[] = {{"b", 0},  {"k", 10},  {"kb", 10}, {"m", 20}, {"mb", 20},
               {"g", 30}, {"gb", 30}, {"t", 40},  {"tb", 40}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (ieq(u, units[i].name)) return units[i].shift;
  return -1;
}

int plan_parse_bytes(const char *s, uint64_t *out, char *err, size_t errlen) {
  char tok[96];
  /* The one rule of every number (num.h): no blanks around it (a budget
   * string's entries are trimmed by its own grammar before they get here). */
  if (s && *s && (isspace((unsigned char)s[0]) || isspace((unsigned char)s[strlen(s) - 1])))
    return plan_fail(err, errlen, "size '%.40s' has blanks around it: give it without", s);
  if (!s || token_copy(s, strlen(s), tok, sizeof tok) != 0)
    return plan_fail(err, errlen, "size '%.40s...' is too long", s ? s : "");
  if (!tok[0]) return plan_fail(err, errlen, "empty size: give a number with a unit, like 24gb");
  if (tok[0] == '-')
    return plan_fail(err, errlen, "size '%s' is negative: sizes are at least 1b", tok);
  decimal d;
  int n = decimal_scan(tok, &d);
  if (n < 0)
    return plan_fail(err, errlen, "size '%s' overflows: at most 16 exbibytes (16777216tb)", tok);
  if (n == 0)
    return plan_fail(err, errlen,
                "size '%s' is not a number: use digits with an optional decimal point and a "
                "unit, like 2.5gb",
                tok);
  const char *u = tok + n;
  while (isspace((unsigned char)*u)) u++;
  if (!*u)
    return plan_fail(err, errlen,
                "size '%s' has no unit: add b, kb, mb, gb or tb (powers of 1024), like %sgb",
                tok, tok);
  int shift = unit_shift(u);
  if (shift < 0)
    return plan_fail(err, errlen,
                "size '%s' has unknown unit '%s': use b, k/kb, m/mb, g/gb, t/tb (any case, "
                "powers of 1024)",
                tok, u);
  uint64_t v;
  if (decimal_to_bytes(&d, shift, &v) != 0)
    return plan_fail(err, errlen, "size '%s' overflows 64 bits", tok);
  if (v == 0) return plan_fail(err, errlen, "size '%s' is zero: a budget needs at least 1b", tok);
  *out = v;
  return PLAN_OK;
}

/* Percent value "40%", "12.5%": share in (0, 1]. */
static int parse_share(const char *tok, double *out, char *err, size_t errlen) {
  if (tok[0] == '-') return plan_fail(err, errlen, "share '%s' is negative: use 0..100%%", tok);
  decimal d;
  int n = decimal_scan(tok, &d);
  if (n < 0) return plan_fail(err, errlen, "share '%s' overflows: use 0..100%%", tok);
  if (n == 0 || strcmp(tok + n, "%") != 0)
    return plan_fail(err, errlen, "share '%s' is not a number followed by %%, like 40%%", tok);
  double v = decimal_value(&d);
  if (v > 100.0) return plan_fail(err, errlen, "share '%s' is over 100%%", tok);
  *out = v / 100.0;
  return PLAN_OK;
}

static int is_blank(const char *s) {
  for (; *s; s++)
    if (!isspace((unsigned char)*s)) return 0;
  return 1;
}

/* A value is a size, a fraction of the device, a share or `*`. */
typedef enum { VAL_BYTES, VAL_FRAC, VAL_SHARE, VAL_STAR } value_kind;

/* A bare number as a fraction of a device's memory, in (0, 1]. Returns 1
 * when tok is such a number (*out set), 0 when it is not a bare number at
 * all, -1 when it is one outside (0, 1]. */
static int scan_device_fraction(const char *tok, double *out) {
  decimal d;
  int n = decimal_scan(tok, &d);
  if (n <= 0 || tok[n]) return 0;
  double v = decimal_value(&d);
  if (!(v > 0.0 && v <= 1.0)) return -1;
  *out = v;
  return 1;
}

/* A single number with no ',' or ';': a fraction of each GPU. */
static int parse_fraction(const char *s, plan_budget *b, char *err, size_t errlen) {
  char tok[96];
  if (token_copy(s, strlen(s), tok, sizeof tok) != 0)
    return plan_fail(err, errlen, "budget '%.40s...' is not understood: " ALLOWED_HINT, s);
  decimal d;
  int n = decimal_scan(tok, &d);
  if (tok[0] == '-')
    return plan_fail(err, errlen, "budget fraction '%s' is negative: use a number in (0, 1]", tok);
  if (n <= 0 || tok[n])
    return plan_fail(err, errlen, "budget '%s' is not understood: " ALLOWED_HINT, tok);
  double v = decimal_value(&d);
  if (!(v > 0.0 && v <= 1.0))
    return plan_fail(err, errlen,
                "budget fraction '%s' is outside (0, 1]: 0.8 means 80%% of each GPU's memory",
                tok);
  b->mode = PLAN_BUDGET_FRACTION;
  b->fraction = v;
  return PLAN_OK;
}

/* What the entries of a byte or ratio string have said so far. */
typedef struct entries_seen {
  int have_bytes, have_share, cpu_named;
  int nstars, cpu_star;          /* `*` entries; one of them on cpu */
  uint8_t star[PLAN_MAX_RANKS];  /* cuda:K,* */
  double share_sum;
} entries_seen;

/* An entry's device: "cpu" (*rank = -1) or "cuda:K" with K a pipeline rank. */
static int parse_entry_device(const char *entry, const char *dev, plan_budget *b,
                              entries_seen *seen, int *rank, char *err, size_t errlen) {
  const int nranks = b->nranks;
  *rank = -1;
  if (ieq(dev, "cpu")) {
    if (seen->cpu_named)
      return plan_fail(err, errlen, "budget names 'cpu' twice (entry '%s')", entry);
    seen->cpu_named = 1;
    return PLAN_OK;
  }
  if (strncmp(dev, "cuda:", 5) != 0 && strncmp(dev, "CUDA:", 5) != 0)
    return plan_fail(err, errlen,
                "budget device '%s' is unknown: use cuda:K (the GPU of pipeline rank K) or cpu",
                dev);
  const char *k = dev + 5;
  if (!*k) return plan_fail(err, errlen, "budget device '%s' has no index: use cuda:0..", dev);
  long idx = 0;
  for (const char *c = k; *c; c++) {
    if (!isdigit((unsigned char)*c))
      return plan_fail(err, errlen,
                  "budget device '%s' has a bad index '%s': use cuda:K with K = 0..%d", dev, k,
                  nranks - 1);
    idx = idx * 10 + (*c - '0');
    if (idx > 100000) break;
  }
  if (idx >= nranks)
    return plan_fail(err, errlen,
                "budget device '%s' is past the last rank: the pipeline has %d rank%s "
                "(cuda:0..cuda:%d)",
                dev, nranks, nranks == 1 ? "" : "s", nranks - 1);
  if (b->named[idx])
    return plan_fail(err, errlen, "budget names '%s' twice: one entry per device", dev);
  b->named[idx] = 1;
  *rank = (int)idx;
  return PLAN_OK;
}

/* One entry "DEVICE,VALUE" (blanks trimmed) into b. */
static int parse_entry(const char *s, const char *entry, plan_budget *b, entries_seen *seen,
                       char *err, size_t errlen) {
  if (!entry[0])
    return plan_fail(err, errlen,
                "budget '%s' has an empty entry (two ';' in a row, or a ';' at an end): "
                "each entry is DEVICE,VALUE",
                s);
  const char *comma = strchr(entry, ',');
  if (!comma)
    return plan_fail(err, errlen,
                "budget entry '%s' has no ',VALUE': write it like cuda:0,20gb or cpu,*", entry);
  char dev[64], val[64];
  if (token_copy(entry, (size_t)(comma - entry), dev, sizeof dev) != 0 ||
      token_copy(comma + 1, strlen(comma + 1), val, sizeof val) != 0)
    return plan_fail(err, errlen, "budget entry '%s' is too long", entry);
  if (strchr(val, ','))
    return plan_fail(err, errlen,
                "budget entry '%s' has more than one ',': one DEVICE,VALUE per entry", entry);
  if (!val[0])
    return plan_fail(err, errlen, "budget entry '%s' has an empty value: give a size, N%% or *",
                entry);
  int rank;
  int rc = parse_entry_device(entry, dev, b, seen, &rank, err, errlen);
  if (rc != PLAN_OK) return rc;

  value_kind kind;
  uint64_t bytes = 0;
  double share = 0.0, frac = 0.0;
  char sub[256];
  size_t vlen = strlen(val);
  if (strcmp(val, "*") == 0) {
    kind = VAL_STAR;
    seen->nstars++;
    if (rank >= 0) seen->star[rank] = 1;
    else seen->cpu_star = 1;
  } else if (val[vlen - 1] == '%') {
    kind = VAL_SHARE;
    if (parse_share(val, &share, sub, sizeof sub) != 0)
      return plan_fail(err, errlen, "budget entry '%s': %s", entry, sub);
    seen->have_share = 1;
    seen->share_sum += share;
  } else {
    /* SIZE* is SIZE: MultiGPU's `*` marks the device taking the rest of
     * the model, and a budget here is a cap already (plan.h). */
    if (val[vlen - 1] == '*') val[--vlen] = '\0';
    int f = scan_device_fraction(val, &frac);
    if (f < 0)
      return plan_fail(err, errlen,
                  "budget entry '%s': size '%s' has no unit: add b, kb, mb, gb or tb (powers of "
                  "1024), like %sgb, or give a fraction of the device in (0, 1], like 0.5",
                  entry, val, val);
    if (f > 0) {
      kind = VAL_FRAC;
    } else {
      kind = VAL_BYTES;
      if (plan_parse_bytes(val, &bytes, sub, sizeof sub) != 0)
        return plan_fail(err, errlen, "budget entry '%s': %s", entry, sub);
    }
    seen->have_bytes = 1;
  }
  if (seen->have_bytes && seen->have_share)
    return plan_fail(err, errlen,
                "budget entry '%s' mixes sizes or fractions and %% shares: use one kind in a "
                "string",
                entry);
  if (rank >= 0) {
    if (kind == VAL_BYTES) b->bytes[rank] = bytes;
    if (kind == VAL_FRAC) b->frac[rank] = frac;
    if (kind == VAL_SHARE) b->share[rank] = share;
  } else {
    b->allow_stream = 1;
    if (kind == VAL_BYTES) b->cpu_bytes = bytes;
    if (kind == VAL_FRAC) b->cpu_frac = frac;
    if (kind == VAL_SHARE) b->cpu_share = share;
  }
  return PLAN_OK;
}

/* A ratio string: the `*` entries share the rest of 100%; without one the
 * shares are parts of their sum (MultiGPU's 8%;8%;4% is 8:8:4); every rank
 * named, none 0%. */
static int finish_ratio(const char *s, const entries_seen *seen, plan_budget *b, char *err,
                        size_t errlen) {
  b->mode = PLAN_BUDGET_RATIO;
  if (seen->nstars) {
    double rest = 1.0 - seen->share_sum;
    if (rest < 1e-9) {
      for (int r = 0; r < b->nranks; r++)
        if (seen->star[r])
          return plan_fail(err, errlen,
                      "budget entry 'cuda:%d,*' gets no share: the other entries take 100%%", r);
      return plan_fail(err, errlen,
                  "budget entry 'cpu,*' gets no share: the other entries take 100%%");
    }
    double each = rest / seen->nstars;
    for (int r = 0; r < b->nranks; r++)
      if (seen->star[r]) b->share[r] = each;
    if (seen->cpu_star) b->cpu_share = each;
  } else if (seen->share_sum > 0.0) {
    for (int r = 0; r < b->nranks; r++) b->share[r] /= seen->share_sum;
    b->cpu_share /= seen->share_sum;
  }
  for (int r = 0; r < b->nranks; r++)
    if (!b->named[r])
      return plan_fail(err, errlen,
                  "ratio budget '%s' does not name cuda:%d: a ratio string gives every rank "
                  "its share",
                  s, r);
  for (int r = 0; r < b->nranks; r++)
    if (b->share[r] <= 0.0)
      return plan_fail(err, errlen,
                  "ratio budget '%s' gives cuda:%d a 0%% share: every rank needs a block", s, r);
  return PLAN_OK;
}

int plan_budget_parse(const char *s, int nranks, plan_budget *out, char *err, size_t errlen) {
  plan_budget b;
  memset(&b, 0, sizeof b);
  if (nranks < 1 || nranks > PLAN_MAX_RANKS)
    return plan_fail(err, errlen, "budget: %d ranks is outside 1..%d", nranks, PLAN_MAX_RANKS);
  b.nranks = nranks;
  b.mode = PLAN_BUDGET_AUTO;
  if (!s || ieq(s, "auto")) {
    *out = b;
    return PLAN_OK;
  }
  if (strlen(s) > 4096) return plan_fail(err, errlen, "budget string is longer than 4096 characters");
  if (is_blank(s))
    return plan_fail(err, errlen, "budget string is empty: " ALLOWED_HINT);
  if (!strchr(s, ',') && !strchr(s, ';')) {
    int rc = parse_fraction(s, &b, err, errlen);
    if (rc == PLAN_OK) *out = b;
    return rc;
  }

  entries_seen seen = {0};
  for (const char *p = s;;) {
    const char *semi = strchr(p, ';');
    size_t elen = semi ? (size_t)(semi - p) : strlen(p);
    char entry[128];
    if (token_copy(p, elen, entry, sizeof entry) != 0)
      return plan_fail(err, errlen, "budget entry '%.40s...' is too long", p);
    int rc = parse_entry(s, entry, &b, &seen, err, errlen);
    if (rc != PLAN_OK) return rc;
    if (!semi) break;
    p = semi + 1;
  }
  if (seen.nstars && seen.share_sum > 1.0 + 1e-9)
    return plan_fail(err, errlen,
                "budget '%s' gives shares that add up to %.4g%%, over 100%%, and a '*' entry "
                "to take the rest",
                s, seen.share_sum * 100.0);
  if (seen.have_share) {
    int rc = finish_ratio(s, &seen, &b, err, errlen);
    if (rc != PLAN_OK) return rc;
  } else {
    /* bytes mode; a GPU `*` means: as much as it has (auto). */
    b.mode = (seen.have_bytes || seen.cpu_named) ? PLAN_BUDGET_BYTES : PLAN_BUDGET_AUTO;
  }
  *out = b;
  return PLAN_OK;
}
