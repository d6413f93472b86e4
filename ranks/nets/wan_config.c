/* Wan 2.1 config, presets and the tensor table (see wan_config.h). */
#include "wan_config.h"

#include <stdio.h>
#include <string.h>

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

static void add(wan_layout *l, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2,
                int64_t d3, int64_t d4) {
  wan_tensor *t = &l->t[l->count++];
  int64_t d[5] = {d0, d1, d2, d3, d4};
  t->name = name;
  t->ndim = ndim;
  t->numel = 1;
  for (int i = 0; i < 5; i++) {
    t->shape[i] = i < ndim ? d[i] : 0;
    if (i < ndim) t->numel *= d[i];
  }
}

/* Linear layers as PyTorch stores them: weight [out, in], bias [out]. */
static void add_linear(wan_layout *l, const char *w, const char *b, int64_t out, int64_t in) {
  add(l, w, 2, out, in, 0, 0, 0);
  add(l, b, 1, out, 0, 0, 0, 0);
}

void wan_layout_make(const wan_config *c, wan_group g, kern_dtype dtype, wan_layout *out) {
  wan_layout l;
  memset(&l, 0, sizeof l);
  const int64_t D = c->dim;
  if (g == WAN_GROUP_EMBED) {
    add(&l, "patch_embedding.weight", 5, D, c->in_dim, c->patch[0], c->patch[1], c->patch[2]);
    add(&l, "patch_embedding.bias", 1, D, 0, 0, 0, 0);
    add_linear(&l, "text_embedding.0.weight", "text_embedding.0.bias", D, c->text_dim);
    add_linear(&l, "text_embedding.2.weight", "text_embedding.2.bias", D, D);
    add_linear(&l, "time_embedding.0.weight", "time_embedding.0.bias", D, c->freq_dim);
    add_linear(&l, "time_embedding.2.weight", "time_embedding.2.bias", D, D);
    add_linear(&l, "time_projection.1.weight", "time_projection.1.bias", 6 * D, D);
  } else if (g == WAN_GROUP_BLOCK) {
    add(&l, "modulation", 3, 1, 6, D, 0, 0);
    add_linear(&l, "self_attn.q.weight", "self_attn.q.bias", D, D);
    add_linear(&l, "self_attn.k.weight", "self_attn.k.bias", D, D);
    add_linear(&l, "self_attn.v.weight", "self_attn.v.bias", D, D);
    add_linear(&l, "self_attn.o.weight", "self_attn.o.bias", D, D);
    add(&l, "self_attn.norm_q.weight", 1, D, 0, 0, 0, 0);
    add(&l, "self_attn.norm_k.weight", 1, D, 0, 0, 0, 0);
    add(&l, "norm3.weight", 1, D, 0, 0, 0, 0);
    add(&l, "norm3.bias", 1, D, 0, 0, 0, 0);
    add_linear(&l, "cross_attn.q.weight", "cross_attn.q.bias", D, D);
    add_linear(&l, "cross_attn.k.weight", "cross_attn.k.bias", D, D);
    add_linear(&l, "cross_attn.v.weight", "cross_attn.v.bias", D, D);
    add_linear(&l, "cross_attn.o.weight", "cross_attn.o.bias", D, D);
    add(&l, "cross_attn.norm_q.weight", 1, D, 0, 0, 0, 0);
    add(&l, "cross_attn.norm_k.weight", 1, D, 0, 0, 0, 0);
    add_linear(&l, "ffn.0.weight", "ffn.0.bias", c->ffn_dim, D);
    add_linear(&l, "ffn.2.weight", "ffn.2.bias", D, c->ffn_dim);
  } else {
    add(&l, "head.modulation", 3, 1, 2, D, 0, 0);
    add_linear(&l, "head.head.weight", "head.head.bias", wan_patch_out(c), D);
  }
  size_t off = 0, esz = kern_dtype_size(dtype);
  for (int i = 0; i < l.count; i++) {
    l.t[i].offset = off;
    l.t[i].bytes = (size_t)l.t[i].numel * esz;
    l.data_bytes += l.t[i].bytes;
    off += (l.t[i].bytes + WAN_TENSOR_ALIGN - 1) / WAN_TENSOR_ALIGN * WAN_TENSOR_ALIGN;
  }
  l.packed_bytes = off;
  *out = l;
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
