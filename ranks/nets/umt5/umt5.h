/* The UMT5 text encoder Wan uses (UMT5-XXL, encoder only; ranks/nets/UMT5.md):
 * its config, the table of its tensors (Wan's state-dict keys, shapes from
 * the config), one layer's typed weights, and the CPU forward.
 *
 * Weights are handled a layer at a time: a layer's ten tensors are packed
 * in one buffer of umt5_layer_floats floats at offsets that are the same
 * for every layer, so a caller can stream the 24 layers of UMT5-XXL
 * through one buffer instead of holding 5.7 billion parameters. */
#ifndef UMT5_H
#define UMT5_H

#include <stddef.h>
#include <stdint.h>

#define UMT5_MAX_LAYERS 64
#define UMT5_LAYER_TENSORS 10                              /* per layer (UMT5.md) */
#define UMT5_MAX_TENSORS (2 + UMT5_LAYER_TENSORS * UMT5_MAX_LAYERS)
#define UMT5_EPS 1e-6f                                     /* T5LayerNorm's eps */
#define UMT5_ALIGN_FLOATS 64 /* each tensor of a layer buffer starts on 256 bytes */

typedef struct umt5_config {
  int64_t vocab;    /* token embedding rows (256,384) */
  int64_t dim;      /* model width (4096) */
  int64_t dim_attn; /* heads * head width (4096) */
  int64_t ffn;      /* feed-forward width (10240) */
  int64_t heads;    /* attention heads (64) */
  int64_t layers;   /* encoder layers (24) */
  int64_t buckets;  /* relative-position buckets, both signs together (32) */
  int64_t max_dist; /* distance at which the log-spaced buckets end (128) */
} umt5_config;

/* Wan's umt5_xxl encoder (wan/modules/t5.py). */
void umt5_config_published(umt5_config *out);
/* Checks ranges (every count small enough that no size overflows, dim_attn
 * a multiple of heads, buckets even and >= 4, max_dist beyond the exact
 * buckets). Returns 0, or -1 with a message in err. */
int umt5_config_check(const umt5_config *c, char *err, size_t errlen);

/* ---------------------------------------------------------------- tensors */

/* One tensor: its Wan key, shape, and where it lives. Layer tensors have
 * layer >= 0 and offset = floats from the start of a layer buffer; the two
 * global ones (token_embedding.weight, norm.weight) have layer -1. */
typedef struct umt5_tensor {
  char name[64];
  int ndim;
  int64_t shape[2];
  int64_t numel;
  int layer;      /* -1: global */
  int slot;       /* index within the layer (0 .. UMT5_LAYER_TENSORS - 1) */
  int64_t offset; /* in the layer buffer (layer tensors only) */
} umt5_tensor;

/* Entries: token_embedding.weight, then blocks.0.* .. blocks.N-1.* (each in
 * the order of umt5_layer's fields), then norm.weight. */
int umt5_table_count(const umt5_config *c);
/* Entry i (0 <= i < count) of a checked config. */
void umt5_table_entry(const umt5_config *c, int i, umt5_tensor *out);
/* Index of a Wan key, or -1. */
int umt5_table_find(const umt5_config *c, const char *name);
/* Parameters of the whole encoder. */
int64_t umt5_params(const umt5_config *c);
/* Floats of one layer buffer (padding included). */
int64_t umt5_layer_floats(const umt5_config *c);

/* One layer's weights (fields in table order; keys under blocks.N.). */
typedef struct umt5_layer {
  const float *norm1; /* norm1.weight (dim) */
  const float *q;     /* attn.q.weight (dim_attn, dim) */
  const float *k;     /* attn.k.weight (dim_attn, dim) */
  const float *v;     /* attn.v.weight (dim_attn, dim) */
  const float *o;     /* attn.o.weight (dim, dim_attn) */
  const float *norm2; /* norm2.weight (dim) */
  const float *gate;  /* ffn.gate.0.weight (ffn, dim), GELU'd */
  const float *fc1;   /* ffn.fc1.weight (ffn, dim) */
  const float *fc2;   /* ffn.fc2.weight (dim, ffn) */
  const float *pos;   /* pos_embedding.embedding.weight (buckets, heads) */
} umt5_layer;

/* Points w's fields into a layer buffer buf (umt5_layer_floats). */
void umt5_layer_bind(const umt5_config *c, const float *buf, umt5_layer *w);

/* ---------------------------------------------------------------- forward */

/* T5's bidirectional relative-position bucket of key j for query i,
 * rel = j - i (UMT5.md "Position buckets"). */
int32_t umt5_rel_bucket(int64_t rel, int64_t buckets, int64_t max_dist);

/* Scratch for sequences of up to max_len tokens. */
typedef struct umt5_scratch {
  int64_t max_len;
  float *xn;        /* (max_len, dim) normalised input of a sublayer */
  float *q, *k, *v; /* (max_len, dim_attn) */
  float *att;       /* (max_len, dim_attn) */
  float *y;         /* (max_len, dim) sublayer output */
  float *h_gate;    /* (max_len, ffn) */
  float *h_lin;     /* (max_len, ffn) */
  int32_t *bucket;  /* (2 max_len - 1) */
} umt5_scratch;

/* SP_OK, or SP_ERR_RUNTIME (out of memory, logged). */
int umt5_scratch_create(const umt5_config *c, int64_t max_len, umt5_scratch **out);
void umt5_scratch_free(umt5_scratch *s);

/* One encoder layer in place on x (L, dim), L <= s->max_len, every token a
 * real one (padding is left out: UMT5.md "Padding"):
 *   x += o(attn(q, k, v; bias of w->pos)) of norm1(x);
 *   x += fc2(fc1(n) * gelu_tanh(gate(n))), n = norm2(x). */
void umt5_layer_forward(const umt5_config *c, const umt5_layer *w, float *x, int64_t L,
                        umt5_scratch *s);

/* The final norm in place: x (L, dim), w (dim). */
void umt5_final_norm(const umt5_config *c, const float *w, float *x, int64_t L);

#endif
