/* Wan 2.1 config, presets and the packed layout of the tensor lists of
 * wan_weights.h (see wan_config.h). */
#include "wan_config.h"

#include <stdio.h>
#include <string.h>

#include "kern_quant.h"
#include "wan_weights.h"

const char *const wan_preset_names[] = {"wan2.1-tiny", "wan2.1-1.3b", "wan2.1-14b", NULL};

static wan_config base_config(void) {
  wan_config c = {0};
  c.in_dim = 16;
  c.out_dim = 16;
  c.patch[0] = 1;
  c.patch[1] = 2;
  c.patch[2] = 2;
  c.text_len = 512;
  c.text_dim = 4096;
  c.freq_dim = 256;
  c.eps = 1e-6;
  return c;
}

int wan_preset(const char *name, wan_config *out) {
  wan_config c = base_config();
  if (strcmp(name, "wan2.1-tiny") == 0) {
    /* Small enough for CI on two cores, real where it matters: head_dim 128
     * (the RoPE split), text_dim 4096, text_len 512, 4 blocks. */
    c.dim = 256;
    c.ffn_dim = 640;
    c.heads = 2;
    c.layers = 4;
  } else if (strcmp(name, "wan2.1-1.3b") == 0) {
    c.dim = 1536;
    c.ffn_dim = 8960;
    c.heads = 12;
    c.layers = 30;
  } else if (strcmp(name, "wan2.1-14b") == 0) {
    c.dim = 5120;
    c.ffn_dim = 13824;
    c.heads = 40;
    c.layers = 40;
  } else {
    return -1;
  }
  *out = c;
  return 0;
}

const char *wan_preset_match(const wan_config *c) {
  for (int i = 0; wan_preset_names[i]; i++) {
    wan_config p;
    wan_preset(wan_preset_names[i], &p);
    if (p.dim == c->dim && p.ffn_dim == c->ffn_dim && p.heads == c->heads &&
        p.layers == c->layers && p.in_dim == c->in_dim && p.out_dim == c->out_dim &&
        p.text_len == c->text_len && p.text_dim == c->text_dim &&
        p.freq_dim == c->freq_dim && p.eps == c->eps)
      return wan_preset_names[i];
  }
  return NULL;
}

int wan_config_check(const wan_config *c, char *err, size_t errlen) {
  /* Bounds keep every product below 2^62 bytes: no size computed from a
   * config read from a file can overflow. */
  struct {
    const char *name;
    int64_t v, lo, hi;
  } f[] = {
      {"dim", c->dim, 128, 65536},          {"ffn_dim", c->ffn_dim, 1, 262144},
      {"heads", c->heads, 1, 512},          {"layers", c->layers, 1, 1024},
      {"in_dim", c->in_dim, 1, 1024},       {"out_dim", c->out_dim, 1, 1024},
      {"text_len", c->text_len, 1, 65536},  {"text_dim", c->text_dim, 1, 65536},
      {"freq_dim", c->freq_dim, 2, 65536},
  };
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    if (f[i].v < f[i].lo || f[i].v > f[i].hi) {
      snprintf(err, errlen, "config %s = %lld is outside %lld..%lld", f[i].name,
               (long long)f[i].v, (long long)f[i].lo, (long long)f[i].hi);
      return -1;
    }
  }
  if (c->dim % c->heads != 0 || c->dim / c->heads != 128) {
    snprintf(err, errlen, "config dim %lld / heads %lld must give head_dim 128", (long long)c->dim,
             (long long)c->heads);
    return -1;
  }
  if (c->patch[0] != 1 || c->patch[1] != 2 || c->patch[2] != 2) {
    snprintf(err, errlen, "config patch (%lld,%lld,%lld) is not supported (only 1,2,2)",
             (long long)c->patch[0], (long long)c->patch[1], (long long)c->patch[2]);
    return -1;
  }
  if (c->freq_dim % 2 != 0) {
    snprintf(err, errlen, "config freq_dim %lld must be even", (long long)c->freq_dim);
    return -1;
  }
  if (!(c->eps > 0 && c->eps < 1e-2)) {
    snprintf(err, errlen, "config eps %g must be in (0, 0.01)", c->eps);
    return -1;
  }
  return 0;
}

const char *wan_group_name(wan_group g) {
  return g == WAN_GROUP_EMBED ? "embed" : g == WAN_GROUP_BLOCK ? "block" : "head";
}

static void add(wan_layout *l, const char *name, int ndim, const int64_t *shape) {
  wan_tensor *t = &l->t[l->count++];
  t->name = name;
  t->ndim = ndim;
  t->numel = 1;
  for (int i = 0; i < ndim; i++) {
    t->shape[i] = shape[i];
    t->numel *= shape[i];
  }
}

#define WAN_UNPAREN(...) __VA_ARGS__
/* One tensor of a list line (wan_weights.h); the shape's rank is the
 * length of its list. */
#define ADD_TENSOR(field, key, shape)                                   \
  {                                                                     \
    const int64_t s_[] = {WAN_UNPAREN shape};                           \
    _Static_assert(sizeof s_ / sizeof s_[0] <= 5, key ": at most 5 dims"); \
    add(&l, key, (int)(sizeof s_ / sizeof s_[0]), s_);                  \
  }

/* The tensors of group g (names and shapes), no sizes yet. */
static void layout_tensors(const wan_config *c, wan_group g, wan_layout *out) {
  wan_layout l;
  memset(&l, 0, sizeof l);
  /* The names the shapes of wan_weights.h are written in. */
  const int64_t dim = c->dim, ffn_dim = c->ffn_dim, in_dim = c->in_dim;
  const int64_t text_dim = c->text_dim, freq_dim = c->freq_dim, patch_out = wan_patch_out(c);
  const int64_t patch0 = c->patch[0], patch1 = c->patch[1], patch2 = c->patch[2];
  if (g == WAN_GROUP_EMBED) {
    WAN_EMBED_TENSORS(ADD_TENSOR)
  } else if (g == WAN_GROUP_BLOCK) {
    WAN_BLOCK_TENSORS(ADD_TENSOR)
  } else {
    WAN_HEAD_TENSORS(ADD_TENSOR)
  }
  *out = l;
}

static size_t align_up(size_t n) {
  return (n + WAN_TENSOR_ALIGN - 1) / WAN_TENSOR_ALIGN * WAN_TENSOR_ALIGN;
}

void wan_layout_make_formats(const wan_config *c, wan_group g, const kern_dtype *fmt,
                             wan_layout *out) {
  wan_layout l;
  layout_tensors(c, g, &l);
  size_t off = 0;
  for (int i = 0; i < l.count; i++) {
    wan_tensor *t = &l.t[i];
    const int64_t rows = t->ndim ? t->shape[0] : 1;
    const kern_qfmt_info *q = kern_qfmt_get(kern_dtype_qfmt(fmt[i]));
    t->dtype = fmt[i];
    t->offset = off;
    t->bytes = (size_t)(t->numel / q->block) * (size_t)q->block_bytes;
    l.data_bytes += t->bytes;
    off += align_up(t->bytes);
    if (q->row_scale) {
      t->scale_offset = off;
      l.data_bytes += (size_t)rows * sizeof(float);
      off += align_up((size_t)rows * sizeof(float));
    }
  }
  l.packed_bytes = off;
  *out = l;
}

void wan_layout_make(const wan_config *c, wan_group g, kern_dtype dtype, wan_layout *out) {
  kern_dtype fmt[WAN_MAX_TENSORS];
  for (int i = 0; i < WAN_MAX_TENSORS; i++) fmt[i] = dtype;
  wan_layout_make_formats(c, g, fmt, out);
}

int wan_layout_find(const wan_layout *l, const char *name) {
  for (int i = 0; i < l->count; i++)
    if (strcmp(l->t[i].name, name) == 0) return i;
  return -1;
}

int64_t wan_block_params(const wan_config *c) {
  wan_layout l;
  wan_layout_make(c, WAN_GROUP_BLOCK, KERN_DTYPE_F32, &l);
  int64_t n = 0;
  for (int i = 0; i < l.count; i++) n += l.t[i].numel;
  return n;
}
