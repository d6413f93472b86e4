/* UMT5 encoder: config and tensor table (see umt5.h, UMT5.md). */
#include "umt5.h"

#include <stdio.h>
#include <string.h>

void umt5_config_published(umt5_config *out) {
  *out = (umt5_config){.vocab = 256384,
                       .dim = 4096,
                       .dim_attn = 4096,
                       .ffn = 10240,
                       .heads = 64,
                       .layers = 24,
                       .buckets = 32,
                       .max_dist = 128};
}

int umt5_config_check(const umt5_config *c, char *err, size_t errlen) {
  const struct {
    const char *name;
    int64_t v, lo, hi;
  } r[] = {
      {"vocab", c->vocab, 1, (int64_t)1 << 22}, {"dim", c->dim, 1, 65536},
      {"dim_attn", c->dim_attn, 1, 65536},      {"ffn", c->ffn, 1, 262144},
      {"heads", c->heads, 1, 1024},             {"layers", c->layers, 1, UMT5_MAX_LAYERS},
      {"buckets", c->buckets, 4, 1024},         {"max_dist", c->max_dist, 1, 1 << 20},
  };
  for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
    if (r[i].v < r[i].lo || r[i].v > r[i].hi) {
      snprintf(err, errlen, "umt5 config %s = %lld is outside %lld..%lld", r[i].name,
               (long long)r[i].v, (long long)r[i].lo, (long long)r[i].hi);
      return -1;
    }
  }
  if (c->dim_attn % c->heads != 0) {
    snprintf(err, errlen, "umt5 config dim_attn = %lld is not a multiple of heads = %lld",
             (long long)c->dim_attn, (long long)c->heads);
    return -1;
  }
  if (c->buckets % 2 != 0) {
    snprintf(err, errlen, "umt5 config buckets = %lld is odd (half per sign of the offset)",
             (long long)c->buckets);
    return -1;
  }
  if (c->max_dist <= c->buckets / 4) {
    snprintf(err, errlen, "umt5 config max_dist = %lld must exceed the %lld exact buckets",
             (long long)c->max_dist, (long long)(c->buckets / 4));
    return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------- table */

/* A layer's tensors: key under blocks.N., rows, columns (0: 1-D). Rows and
 * columns are named by the config field they come from. */
enum { F_DIM, F_ATTN, F_FFN, F_BUCKETS, F_HEADS, F_NONE };
static const struct {
  const char *key;
  int rows, cols;
} layer_keys[UMT5_LAYER_TENSORS] = {
    {"norm1.weight", F_DIM, F_NONE},     {"attn.q.weight", F_ATTN, F_DIM},
    {"attn.k.weight", F_ATTN, F_DIM},    {"attn.v.weight", F_ATTN, F_DIM},
    {"attn.o.weight", F_DIM, F_ATTN},    {"norm2.weight", F_DIM, F_NONE},
    {"ffn.gate.0.weight", F_FFN, F_DIM}, {"ffn.fc1.weight", F_FFN, F_DIM},
    {"ffn.fc2.weight", F_DIM, F_FFN},    {"pos_embedding.embedding.weight", F_BUCKETS, F_HEADS},
};

static int64_t field(const umt5_config *c, int f) {
  switch (f) {
  case F_DIM: return c->dim;
  case F_ATTN: return c->dim_attn;
  case F_FFN: return c->ffn;
  case F_BUCKETS: return c->buckets;
  case F_HEADS: return c->heads;
  default: return 0;
  }
}

static int64_t aligned(int64_t n) {
  return (n + UMT5_ALIGN_FLOATS - 1) / UMT5_ALIGN_FLOATS * UMT5_ALIGN_FLOATS;
}

/* Offset of slot s in a layer buffer, and the buffer's size at s = 10. */
static int64_t slot_offset(const umt5_config *c, int s) {
  int64_t off = 0;
  for (int i = 0; i < s; i++)
    off += aligned(field(c, layer_keys[i].rows) *
                   (layer_keys[i].cols == F_NONE ? 1 : field(c, layer_keys[i].cols)));
  return off;
}

int umt5_table_count(const umt5_config *c) { return 2 + UMT5_LAYER_TENSORS * (int)c->layers; }

void umt5_table_entry(const umt5_config *c, int i, umt5_tensor *out) {
  memset(out, 0, sizeof *out);
  out->layer = -1;
  if (i == 0 || i == umt5_table_count(c) - 1) {
    if (i == 0) {
      snprintf(out->name, sizeof out->name, "token_embedding.weight");
      out->ndim = 2;
      out->shape[0] = c->vocab;
      out->shape[1] = c->dim;
    } else {
      snprintf(out->name, sizeof out->name, "norm.weight");
      out->ndim = 1;
      out->shape[0] = c->dim;
    }
  } else {
    int l = (i - 1) / UMT5_LAYER_TENSORS, s = (i - 1) % UMT5_LAYER_TENSORS;
    snprintf(out->name, sizeof out->name, "blocks.%d.%s", l, layer_keys[s].key);
    out->layer = l;
    out->slot = s;
    out->offset = slot_offset(c, s);
    out->shape[0] = field(c, layer_keys[s].rows);
    out->ndim = layer_keys[s].cols == F_NONE ? 1 : 2;
    if (out->ndim == 2) out->shape[1] = field(c, layer_keys[s].cols);
  }
  out->numel = out->shape[0] * (out->ndim == 2 ? out->shape[1] : 1);
}

int umt5_table_find(const umt5_config *c, const char *name) {
  if (strcmp(name, "token_embedding.weight") == 0) return 0;
  if (strcmp(name, "norm.weight") == 0) return umt5_table_count(c) - 1;
  if (strncmp(name, "blocks.", 7) != 0) return -1;
  const char *p = name + 7;
  int64_t l = 0;
  int nd = 0;
  while (*p >= '0' && *p <= '9' && nd < 3) l = l * 10 + (*p++ - '0'), nd++;
  if (nd == 0 || *p != '.' || (nd > 1 && name[7] == '0') || l >= c->layers) return -1;
  for (int s = 0; s < UMT5_LAYER_TENSORS; s++)
    if (strcmp(p + 1, layer_keys[s].key) == 0) return 1 + (int)l * UMT5_LAYER_TENSORS + s;
  return -1;
}

int64_t umt5_params(const umt5_config *c) {
  int64_t n = 0;
  for (int i = 0; i < umt5_table_count(c); i++) {
    umt5_tensor t;
    umt5_table_entry(c, i, &t);
    n += t.numel;
  }
  return n;
}

int64_t umt5_layer_floats(const umt5_config *c) { return slot_offset(c, UMT5_LAYER_TENSORS); }

void umt5_layer_bind(const umt5_config *c, const float *buf, umt5_layer *w) {
  const float **f[UMT5_LAYER_TENSORS] = {&w->norm1, &w->q,    &w->k,   &w->v,   &w->o,
                                         &w->norm2, &w->gate, &w->fc1, &w->fc2, &w->pos};
  for (int s = 0; s < UMT5_LAYER_TENSORS; s++) *f[s] = buf + slot_offset(c, s);
}
