/* The UMT5 text encoder Wan uses (UMT5-XXL, encoder only; ranks/nets/umt5/UMT5.md):
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

#include "net.h"

#define UMT5_MAX_LAYERS 64
#define UMT5_LAYER_TENSORS 10                              /* per layer (UMT5.md) */
#define UMT5_MAX_TENSORS (2 + UMT5_LAYER_TENSORS * UMT5_MAX_LAYERS)
#define UMT5_EPS 1e-6f                                     /* T5LayerNorm's eps */
#define UMT5_ALIGN_FLOATS 64 /* each tensor of a layer buffer starts on 256 bytes */

/* The model file's arch of a text encoder (t5_file.h). */
#define UMT5_ARCH "umt5-xxl"

/* The config, X(field, published, least, most) per field in struct order:
 * its value in Wan's umt5_xxl encoder and the range umt5_config_check
 * accepts (every count small enough that no size overflows). Each field's
 * name is its model file attribute. */
#define UMT5_CONFIG_FIELDS(X)                                                       \
  X(vocab, 256384, 1, (int64_t)1 << 22) /* token embedding rows */                  \
  X(dim, 4096, 1, 65536)                /* model width */                           \
  X(dim_attn, 4096, 1, 65536)           /* heads * head width */                    \
  X(ffn, 10240, 1, 262144)              /* feed-forward width */                    \
  X(heads, 64, 1, 1024)                 /* attention heads */                       \
  X(layers, 24, 1, UMT5_MAX_LAYERS)     /* encoder layers */                        \
  X(buckets, 32, 4, 1024)     /* relative-position buckets, both signs together */  \
  X(max_dist, 128, 1, 1 << 20) /* distance at which the log-spaced buckets end */

#define UMT5_CONFIG_FIELD_(field, published, least, most) int64_t field;
typedef struct umt5_config { UMT5_CONFIG_FIELDS(UMT5_CONFIG_FIELD_) } umt5_config;
#undef UMT5_CONFIG_FIELD_

/* The text encoder as a network (net.h): its description. Its backends
 * fill umt5_backend (umt5_backend.h): the CPU's in umt5_cpu.c, the CUDA
 * one's in cuda/umt5_gpu.c; its driver is umt5_encode (umt5_encode.h). */
const net_desc *umt5_net(void);

/* Wan's umt5_xxl encoder (wan/modules/t5.py): the published values. */
void umt5_config_published(umt5_config *out);
/* Checks ranges (UMT5_CONFIG_FIELDS), dim_attn a multiple of heads,
 * buckets even, max_dist beyond the exact buckets. Returns 0, or -1 with
 * a message in err. */
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

/* A layer's tensors, X(field, key under blocks.N., shape) in table order,
 * the shape in the config's fields (a weight (out, in) as PyTorch's
 * Linear stores it). The two global tensors are token_embedding.weight
 * (vocab, dim), first, and norm.weight (dim), last. */
#define UMT5_LAYER_TENSOR_LIST(X)                                       \
  X(norm1, "norm1.weight", (dim))                                       \
  X(q, "attn.q.weight", (dim_attn, dim))                                \
  X(k, "attn.k.weight", (dim_attn, dim))                                \
  X(v, "attn.v.weight", (dim_attn, dim))                                \
  X(o, "attn.o.weight", (dim, dim_attn))                                \
  X(norm2, "norm2.weight", (dim))                                       \
  X(gate, "ffn.gate.0.weight", (ffn, dim)) /* GELU'd */                 \
  X(fc1, "ffn.fc1.weight", (ffn, dim))                                  \
  X(fc2, "ffn.fc2.weight", (dim, ffn))                                  \
  X(pos, "pos_embedding.embedding.weight", (buckets, heads))

/* Slot indices: UMT5_SLOT_<field>. */
#define UMT5_SLOT_(field, key, shape) UMT5_SLOT_##field,
typedef enum { UMT5_LAYER_TENSOR_LIST(UMT5_SLOT_) UMT5_SLOT_COUNT } umt5_slot;
#undef UMT5_SLOT_
_Static_assert(UMT5_SLOT_COUNT == UMT5_LAYER_TENSORS, "UMT5_LAYER_TENSORS counts the list");

/* One layer's weights, a pointer per tensor of the list: fp32 host memory
 * (the CPU forward), bf16 device memory (the CUDA encoder; the struct
 * lives on the host). */
#define UMT5_FIELD_F32_(field, key, shape) const float *field;
#define UMT5_FIELD_BF16_(field, key, shape) const uint16_t *field;
typedef struct umt5_layer { UMT5_LAYER_TENSOR_LIST(UMT5_FIELD_F32_) } umt5_layer;
typedef struct umt5_layer_bf16 { UMT5_LAYER_TENSOR_LIST(UMT5_FIELD_BF16_) } umt5_layer_bf16;
#undef UMT5_FIELD_F32_
#undef UMT5_FIELD_BF16_

/* Points w's fields into a layer buffer buf (umt5_layer_floats elements,
 * fp32 or bf16; bf16 may be device memory: the pointers are only
 * computed). */
void umt5_layer_bind(const umt5_config *c, const float *buf, umt5_layer *w);
void umt5_layer_bf16_bind(const umt5_config *c, const uint16_t *buf, umt5_layer_bf16 *w);

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
