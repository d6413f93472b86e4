/* The device layout of the CUDA text encoder (ranks/nets/umt5/cuda/
 * umt5_gpu.c): every buffer of its one device allocation, with what it
 * holds, its offset and its bytes, for an encoder's sizes and the longest
 * sequence it runs. The planner's count of a text encoding on a GPU
 * (`plan --t5`, a run's prompts: umt5_gpu_bytes) is this layout's total,
 * and the CUDA encoder carves its pointers at these offsets: one layout,
 * two users.
 *
 * Pure C11 like the rest of planner/: plain sizes in, offsets out. The
 * caller (ranks/nets/umt5/umt5_gpu_layout.c) derives the shape from the
 * encoder's config. Every layer's weights stay on the device (bf16), so a
 * sequence runs through all of them with no copy; the activations are
 * sized for max_len tokens:
 *   x       (max_len, dim) fp32: the residual stream
 *   xn      (max_len, dim) bf16: a sublayer's normalised input
 *   q k v   (max_len, dim_attn) bf16 each: the attention's projections
 *   att     (max_len, dim_attn) bf16: the attention's output
 *   gate    (max_len, ffn) fp32: the FFN's gate projection
 *   fc1     (max_len, ffn) fp32: the FFN's first projection
 *   hidden  (max_len, ffn) bf16: gelu(gate) * fc1, fc2's input
 *   bucket  (2 max_len - 1) int32: the relative-position buckets
 * plus the cuBLASLt workspace of the GEMMs. */
#ifndef PLAN_T5_LAYOUT_H
#define PLAN_T5_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PLAN_T5_MAX_LAYERS 64
/* The longest sequence the CUDA encoder takes (the tokenizer's cut). */
#define PLAN_T5_MAX_LEN 512
/* cuBLASLt workspace of the encoder's GEMMs. */
#define PLAN_T5_GEMM_WS_BYTES ((uint64_t)32 << 20)

typedef enum plan_t5_buf {
  PLAN_T5_LAYER = 0, /* layer i's weights (index i), bf16, the caller's bytes */
  PLAN_T5_NORM,      /* (dim) bf16: the final norm's weight */
  PLAN_T5_X,         /* (max_len, dim) fp32 */
  PLAN_T5_XN,        /* (max_len, dim) bf16 */
  PLAN_T5_Q,         /* (max_len, dim_attn) bf16 */
  PLAN_T5_K,         /* (max_len, dim_attn) bf16 */
  PLAN_T5_V,         /* (max_len, dim_attn) bf16 */
  PLAN_T5_ATT,       /* (max_len, dim_attn) bf16 */
  PLAN_T5_GATE,      /* (max_len, ffn) fp32 */
  PLAN_T5_FC1,       /* (max_len, ffn) fp32 */
  PLAN_T5_HIDDEN,    /* (max_len, ffn) bf16 */
  PLAN_T5_BUCKET,    /* (2 max_len - 1) int32 */
  PLAN_T5_GEMM_WS,   /* PLAN_T5_GEMM_WS_BYTES */
  PLAN_T5_KINDS
} plan_t5_buf;

/* The encoder's sizes and the longest sequence. */
typedef struct plan_t5_shape {
  int64_t dim, dim_attn, ffn; /* model width, heads x head width, FFN width */
  int64_t layers;             /* 1..PLAN_T5_MAX_LAYERS */
  int64_t max_len;            /* tokens of the longest sequence, 1..PLAN_T5_MAX_LEN */
  uint64_t layer_bytes;       /* one layer's weights as the caller lays them */
} plan_t5_shape;

typedef struct plan_t5_buffer {
  plan_t5_buf kind;
  int index;       /* the layer of PLAN_T5_LAYER, else 0 */
  uint64_t offset; /* from the allocation's start, a multiple of PLAN_LAYOUT_ALIGN */
  uint64_t bytes;
} plan_t5_buffer;

typedef struct plan_t5_layout {
  int count;
  plan_t5_buffer b[PLAN_T5_KINDS + PLAN_T5_MAX_LAYERS];
  uint64_t total; /* bytes: the end of the last buffer */
} plan_t5_layout;

/* What kind k holds, in a few words. */
const char *plan_t5_buf_name(plan_t5_buf k);

/* Lays the encoder out: the layers' weights (in layer order), the final
 * norm, the activations in the order of plan_t5_buf, the workspace, each
 * at the next multiple of PLAN_LAYOUT_ALIGN. PLAN_EINVAL (message in err)
 * for a shape no encoder has: sizes below 1, more layers or tokens than
 * the limits, a total that overflows. */
int plan_t5_layout_make(const plan_t5_shape *s, plan_t5_layout *out, char *err, size_t errlen);

/* The buffer of kind k and index i, NULL when the layout has none. */
const plan_t5_buffer *plan_t5_layout_find(const plan_t5_layout *l, plan_t5_buf kind, int index);

#ifdef __cplusplus
}
#endif

#endif
