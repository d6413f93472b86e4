/* Key maps as tables of rules (see conv.h "key maps"): a key matched
 * against a rule's pattern, its indices computed into the official key,
 * and back for messages. */
#include <stdio.h>
#include <string.h>

#include "conv.h"

/* A decimal index at p (no leading zero, at most 4 digits, below 1024):
 * the characters after it, with the value in *v; NULL when none. */
static const char *read_index(const char *p, int64_t *v) {
  int64_t x = 0;
  int nd = 0;
  while (p[nd] >= '0' && p[nd] <= '9') {
    if (nd == 4) return NULL;
    x = x * 10 + (p[nd] - '0');
    nd++;
  }
  if (nd == 0 || (nd > 1 && p[0] == '0') || x >= 1024) return NULL;
  *v = x;
  return p + nd;
}

/* Matches pattern against key: the rest of key after it (exact: "" only),
 * its indices into idx (*n of them, at most 2); NULL when it does not. */
static const char *match(const char *pattern, const char *key, int exact, int64_t *idx, int *n) {
  *n = 0;
  const char *k = key;
  for (const char *p = pattern; *p; p++) {
    if (*p == '#') {
      if (*n == 2 || !(k = read_index(k, &idx[*n]))) return NULL;
      (*n)++;
    } else if (*k++ != *p) {
      return NULL;
    }
  }
  return exact && *k ? NULL : k;
}

/* pattern with its '#' written as v (one index at most) into out at *at. */
static int emit(const char *pattern, int64_t v, char *out, size_t n, size_t *at) {
  for (const char *p = pattern; *p; p++) {
    int w = *p == '#' ? snprintf(out + *at, n - *at, "%lld", (long long)v)
                      : snprintf(out + *at, n - *at, "%c", *p);
    if (w < 0 || (size_t)w >= n - *at) return -1;
    *at += (size_t)w;
  }
  return 0;
}

static int64_t P(const int64_t *param, int k, int64_t none) { return k ? param[k] : none; }

/* The rest of a key through the leaf rules (to_official: from -> to, else
 * back): 0, or -1 when none takes it. */
static int leaf_map(const conv_rule *leaf, const char *rest, int to_official, char *out, size_t n,
                    size_t *at) {
  for (const conv_rule *r = leaf; r->from; r++) {
    const char *a = to_official ? r->from : r->to, *b = to_official ? r->to : r->from;
    int64_t idx[2];
    int ni;
    const char *tail = match(a, rest, r->exact, idx, &ni);
    if (!tail || ni) continue;
    if (emit(b, 0, out, n, at) != 0) return -1;
    int w = snprintf(out + *at, n - *at, "%s", tail);
    return w < 0 || (size_t)w >= n - *at ? -1 : 0;
  }
  return -1;
}

int conv_map(const conv_layout *l, const int64_t *param, const char *key, char *out, size_t n,
             int *tied) {
  const size_t pl = strlen(l->prefix);
  if (strncmp(key, l->prefix, pl) != 0) return -1;
  key += pl;
  for (const conv_rule *r = l->rules; r->from; r++) {
    int64_t idx[2] = {0, 0};
    int ni;
    const char *rest = match(r->from, key, r->exact, idx, &ni);
    if (!rest) continue;
    if (ni == 2 && r->bound && idx[1] > param[r->bound]) return -1;
    const int64_t v = idx[0] * P(param, r->mul, 1) + (ni == 2 ? idx[1] : 0) + P(param, r->add, 0);
    size_t at = 0;
    if (emit(r->to, v, out, n, &at) != 0) return -1;
    if (r->leaf) {
      if (leaf_map(r->leaf, rest, 1, out, n, &at) != 0) return -1;
    } else {
      int w = snprintf(out + at, n - at, "%s", rest);
      if (w < 0 || (size_t)w >= n - at) return -1;
    }
    if (tied) *tied = r->tied;
    return 0;
  }
  return -1;
}

/* The indices of from that give v through rule r: 0, or -1 when none. */
static int unmap_index(const conv_rule *r, const int64_t *param, int64_t v, int64_t *i,
                       int64_t *j) {
  const char *h = strchr(r->from, '#');
  const int two = h && strchr(h + 1, '#');
  const int64_t mul = P(param, r->mul, 1), rel = v - P(param, r->add, 0);
  if (rel < 0 || mul < 1) return -1;
  *i = rel / mul;
  *j = rel % mul;
  if (!two) return *j == 0 ? 0 : -1;
  return r->bound && *j > param[r->bound] ? -1 : 0;
}

/* from with indices i then j written into out at *at. */
static int emit2(const char *from, int64_t i, int64_t j, char *out, size_t n, size_t *at) {
  int k = 0;
  for (const char *p = from; *p; p++) {
    int w = *p == '#' ? snprintf(out + *at, n - *at, "%lld", (long long)(k++ ? j : i))
                      : snprintf(out + *at, n - *at, "%c", *p);
    if (w < 0 || (size_t)w >= n - *at) return -1;
    *at += (size_t)w;
  }
  return 0;
}

void conv_unmap(const conv_layout *l, const int64_t *param, const char *official, char *out,
                size_t n) {
  for (const conv_rule *r = l->rules; r->from; r++) {
    int64_t idx[2] = {0, 0}, i, j;
    int ni;
    const char *rest = r->tied ? NULL : match(r->to, official, r->exact && !r->leaf, idx, &ni);
    if (!rest || unmap_index(r, param, ni ? idx[0] : 0, &i, &j) != 0) continue;
    size_t at = 0;
    if (snprintf(out, n, "%s", l->prefix) >= (int)n) break;
    at = strlen(out);
    if (emit2(r->from, i, j, out, n, &at) != 0) break;
    if (!r->leaf || leaf_map(r->leaf, rest, 0, out, n, &at) != 0)
      snprintf(out + at, n - at, "%s", rest);
    return;
  }
  snprintf(out, n, "%s%s", l->prefix, official);
}

int conv_takes(const conv_layout *l, const char *key) {
  const size_t pl = strlen(l->prefix);
  if (strncmp(key, l->prefix, pl) != 0) return 0;
  for (const conv_rule *r = l->rules; r->from; r++) {
    int64_t idx[2];
    int ni;
    if (match(r->from, key + pl, r->exact, idx, &ni)) return 1;
  }
  return 0;
}

int conv_skips(const conv_layout *l, const char *key) {
  for (int i = 0; l->skip && l->skip[i]; i++)
    if (strncmp(key, l->skip[i], strlen(l->skip[i])) == 0) return 1;
  return 0;
}

const char *conv_index_after(const char *key, const char *prefix, int64_t *index) {
  const size_t pl = strlen(prefix);
  if (strncmp(key, prefix, pl) != 0) return NULL;
  const char *p = read_index(key + pl, index);
  return p && *p == '.' ? p + 1 : NULL;
}
