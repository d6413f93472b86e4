/* The tensor table of a Wan VAE part, one type and one builder for every
 * Wan VAE (the Wan 2.1 decoder and encoder, wan_vae.h and wan_vae_enc.h;
 * the Wan 2.2 parts, wan_vae22.h): each tensor's official key, shape and
 * place in the part's packed buffer, and the typed field of the part's
 * weights it binds. Here too are the blocks every Wan VAE is made of (the
 * residual and attention blocks and the middle of a part), whose tensor
 * lists, structs and table entries are the same in all of them. A network
 * lists its own modules' tensors as X(field, key, shape) lists and adds
 * them with WAN_VAE_TABLE_ADD. */
#ifndef WAN_VAE_TABLE_H
#define WAN_VAE_TABLE_H

#include <stdint.h>

#include "net_schema.h"

#define WAN_VAE_MAX_TENSORS 256 /* of one part */
#define WAN_VAE_ALIGN_FLOATS 64 /* each tensor of a packed buffer starts on 256 bytes */

/* ---------------------------------------------------------------- the blocks */

/* The blocks' tensors, X(field, key, shape) per tensor in table order; a
 * block's keys are under its prefix ("decoder.middle.0."), the shapes in
 * its widths. One pointer per tensor in the block's struct below. */

/* ResidualBlock: x + conv(silu(norm(conv(silu(norm(x)))))), the shortcut,
 * a 1x1x1 conv, only when the width changes (in_dim != out_dim). */
#define WAN_VAE_RESBLOCK_TENSORS(X)                                     \
  X(norm1_gamma, "residual.0.gamma", (in_dim, 1, 1, 1))                 \
  X(conv1_w, "residual.2.weight", (out_dim, in_dim, 3, 3, 3))           \
  X(conv1_b, "residual.2.bias", (out_dim))                              \
  X(norm2_gamma, "residual.3.gamma", (out_dim, 1, 1, 1))                \
  X(conv2_w, "residual.6.weight", (out_dim, out_dim, 3, 3, 3))          \
  X(conv2_b, "residual.6.bias", (out_dim))
#define WAN_VAE_SHORTCUT_TENSORS(X)                                     \
  X(shortcut_w, "shortcut.weight", (out_dim, in_dim, 1, 1, 1))          \
  X(shortcut_b, "shortcut.bias", (out_dim))
/* AttentionBlock: per-frame single-head spatial self-attention. */
#define WAN_VAE_ATTN_TENSORS(X)                                         \
  X(norm_gamma, "norm.gamma", (dim, 1, 1))                              \
  X(qkv_w, "to_qkv.weight", (3 * dim, dim, 1, 1))                       \
  X(qkv_b, "to_qkv.bias", (3 * dim))                                    \
  X(proj_w, "proj.weight", (dim, dim, 1, 1))                            \
  X(proj_b, "proj.bias", (dim))

#define WAN_VAE_TABLE_FIELD_(field, key, shape) const float *field;

typedef struct wan_vae_resblock {
  int64_t in_dim, out_dim;
  WAN_VAE_RESBLOCK_TENSORS(WAN_VAE_TABLE_FIELD_)
  WAN_VAE_SHORTCUT_TENSORS(WAN_VAE_TABLE_FIELD_) /* NULL if in_dim == out_dim */
} wan_vae_resblock;

typedef struct wan_vae_attn {
  int64_t dim;
  WAN_VAE_ATTN_TENSORS(WAN_VAE_TABLE_FIELD_)
} wan_vae_attn;

#undef WAN_VAE_TABLE_FIELD_

/* ---------------------------------------------------------------- the table */

/* One tensor: its official key, shape, place in the packed buffer, and the
 * typed field it binds. */
typedef struct wan_vae_tensor {
  char name[80];
  int ndim;
  int64_t shape[5];
  int64_t numel;
  int64_t offset;     /* floats from the start of the packed buffer */
  const float **slot; /* field of the weights the table was made for */
} wan_vae_tensor;

/* Every tensor of one part in module order, packed one after another at
 * WAN_VAE_ALIGN_FLOATS boundaries. */
typedef struct wan_vae_table {
  int count;
  wan_vae_tensor t[WAN_VAE_MAX_TENSORS];
  int64_t packed_floats; /* buffer size including alignment padding */
  int64_t params;        /* sum of numel */
} wan_vae_table;

/* Empties t for a part's tensors. */
void wan_vae_table_reset(wan_vae_table *t);
/* Appends one tensor: key under prefix (none: ""), shape of ndim (<= 5)
 * sizes; *slot, the field it binds, is zeroed. More than
 * WAN_VAE_MAX_TENSORS is fatal (the lists are the program's own). */
void wan_vae_table_add(wan_vae_table *t, const float **slot, const char *prefix,
                       const char *key, int ndim, const int64_t *shape);

#define WAN_VAE_UNPAREN(...) __VA_ARGS__
/* The X of a tensor list: adds one list line of module m (a pointer to
 * the module's struct) under prefix to table t, the three in scope where
 * it is expanded, with the list's widths as local names; the shape's rank
 * is the length of its list. */
#define WAN_VAE_TABLE_ADD(field, key, shape)                                        \
  {                                                                                 \
    const int64_t s_[] = {WAN_VAE_UNPAREN shape};                                   \
    _Static_assert(sizeof s_ / sizeof s_[0] <= 5, key ": at most 5 dims");          \
    wan_vae_table_add(t, &m->field, prefix, key, (int)(sizeof s_ / sizeof s_[0]), s_); \
  }

/* A residual block in_dim -> out_dim under prefix (its shortcut when the
 * widths differ); m's widths are set, its pointers zeroed. */
void wan_vae_table_add_resblock(wan_vae_table *t, wan_vae_resblock *m, const char *prefix,
                                int64_t in_dim, int64_t out_dim);
/* An attention block of dim channels under prefix. */
void wan_vae_table_add_attn(wan_vae_table *t, wan_vae_attn *m, const char *prefix, int64_t dim);
/* The middle of a part ("encoder", "decoder"): residual block, attention,
 * residual block at width dim, keys <part>.middle.0, .1 and .2. */
void wan_vae_table_add_middle(wan_vae_table *t, const char *part, wan_vae_resblock *r0,
                              wan_vae_attn *attn, wan_vae_resblock *r2, int64_t dim);

/* Points every slot at packed + offset. packed (t->packed_floats). */
void wan_vae_table_bind(const wan_vae_table *t, const float *packed);
/* Index of a key, or -1. */
int wan_vae_table_find(const wan_vae_table *t, const char *name);

/* The entries of t as the schema's tensors (net_schema.h) of group, into
 * out when it is not NULL; returns t->count. Their synth: distribution,
 * every Wan VAE's: conv weights uniform with variance 1 / fan_in, biases
 * within 0.05, RMS gammas within 0.1 of 1. */
int wan_vae_table_put(const wan_vae_table *t, const char *group, net_tensor *out);

#endif
