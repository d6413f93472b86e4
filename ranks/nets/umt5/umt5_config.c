/* UMT5 encoder: config and tensor table (see umt5.h, UMT5.md). */
#include "umt5.h"

#include <stdio.h>
#include <string.h>

#include "t5_layout.h"
#include "umt5_schema.h"

void umt5_config_published(umt5_config *out) {
#define PUBLISHED(field, published, least, most) .field = published,
  *out = (umt5_config){UMT5_CONFIG_FIELDS(PUBLISHED)};
#undef PUBLISHED
}

int umt5_config_check(const umt5_config *c, char *err, size_t errlen) {
#define RANGE(field, published, least, most) {#field, c->field, least, most},
  const struct {
    const char *name;
    int64_t v, lo, hi;
  } r[] = {UMT5_CONFIG_FIELDS(RANGE)};
#undef RANGE
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

#define UMT5_UNPAREN(...) __VA_ARGS__
/* The keys of a layer's tensors (UMT5_LAYER_TENSOR_LIST), in slot order. */
#define KEY(field, key, shape) key,
static const char *const layer_keys[UMT5_LAYER_TENSORS] = {UMT5_LAYER_TENSOR_LIST(KEY)};
#undef KEY

/* The shape of slot s: its rank, its sizes into out[0..1]. */
static int slot_shape(const umt5_config *c, int s, int64_t out[2]) {
  /* The names the shapes of the list are written in. */
  const int64_t dim = c->dim, dim_attn = c->dim_attn, ffn = c->ffn, buckets = c->buckets,
                heads = c->heads;
  int i = 0;
#define SHAPE(field, key, shape)                                        \
  if (i++ == s) {                                                       \
    const int64_t s_[] = {UMT5_UNPAREN shape};                          \
    const int n_ = (int)(sizeof s_ / sizeof s_[0]);                     \
    _Static_assert(sizeof s_ / sizeof s_[0] <= 2, key ": at most 2 dims"); \
    out[0] = s_[0];                                                     \
    out[1] = n_ == 2 ? s_[n_ - 1] : 0;                                  \
    return n_;                                                          \
  }
  UMT5_LAYER_TENSOR_LIST(SHAPE)
#undef SHAPE
  return 0;
}

static int64_t aligned(int64_t n) {
  return (n + UMT5_ALIGN_FLOATS - 1) / UMT5_ALIGN_FLOATS * UMT5_ALIGN_FLOATS;
}

/* Offset of slot s in a layer buffer, and the buffer's size at s = 10. */
static int64_t slot_offset(const umt5_config *c, int s) {
  int64_t off = 0;
  for (int i = 0; i < s; i++) {
    int64_t sh[2];
    off += aligned(slot_shape(c, i, sh) == 2 ? sh[0] * sh[1] : sh[0]);
  }
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
    snprintf(out->name, sizeof out->name, "blocks.%d.%s", l, layer_keys[s]);
    out->layer = l;
    out->slot = s;
    out->offset = slot_offset(c, s);
    out->ndim = slot_shape(c, s, out->shape);
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
    if (strcmp(p + 1, layer_keys[s]) == 0) return 1 + (int)l * UMT5_LAYER_TENSORS + s;
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

/* One field per list line, in slot order. */
#define BIND(field, key, shape) w->field = buf + slot_offset(c, i++);

void umt5_layer_bind(const umt5_config *c, const float *buf, umt5_layer *w) {
  int i = 0;
  UMT5_LAYER_TENSOR_LIST(BIND)
}

void umt5_layer_bf16_bind(const umt5_config *c, const uint16_t *buf, umt5_layer_bf16 *w) {
  int i = 0;
  UMT5_LAYER_TENSOR_LIST(BIND)
}

/* ---------------------------------------------------------------- description */

static int layout(const void *shape, void *out, char *err, size_t errlen) {
  return plan_t5_layout_make(shape, out, err, errlen);
}

static const net_desc desc = {
    .name = "umt5",
    .noun = "text encoder",
    .schema = &umt5_schema,
    .layout = layout,
};

const net_desc *umt5_net(void) { return &desc; }
