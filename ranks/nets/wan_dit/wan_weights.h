/* The tensors of the Wan 2.1 DiT, written once: one list per weight group
 * (embed, block, head), in the group's canonical order. From each list come
 *
 *   - the packed layout table (wan_layout_make: names, shapes, order and
 *     offsets of the model file, the converter and the synthetic generator);
 *   - an index per tensor (WAN_BLOCK_T_self_attn_q_w, ...), the layout's
 *     index of that tensor;
 *   - typed structs in the style of llm.c's ParameterTensors, one pointer
 *     per tensor: fp32 host pointers for the CPU backend (wan_block_f32),
 *     bf16 device pointers for the CUDA backend (wan_block_bf16);
 *   - a bind function per struct that points its fields into a packed group
 *     by table index, once, where the group is placed.
 *
 * A list line is X(field, official checkpoint key, shape). The key omits
 * "blocks.N."; the field is the key with dots as underscores and
 * weight/bias as w/b. Shapes are PyTorch's (linear weight (out, in)) in the
 * config's terms: dim, ffn_dim, in_dim, text_dim, freq_dim, patch0..2 (the
 * patch, 1 x 2 x 2) and patch_out (out_dim x the patch), as MODEL.md
 * "Parameter names" lists them. A field a backend misspells does not
 * compile. */
#ifndef WAN_WEIGHTS_H
#define WAN_WEIGHTS_H

#include <stdint.h>

#include "wan_config.h"

/* MODEL.md "Forward, op by op" steps 1-3 (stage 0). */
#define WAN_EMBED_TENSORS(X)                                                    \
  X(patch_embedding_w, "patch_embedding.weight", (dim, in_dim, patch0, patch1, patch2)) \
  X(patch_embedding_b, "patch_embedding.bias", (dim))                           \
  X(text_embedding_0_w, "text_embedding.0.weight", (dim, text_dim))             \
  X(text_embedding_0_b, "text_embedding.0.bias", (dim))                         \
  X(text_embedding_2_w, "text_embedding.2.weight", (dim, dim))                  \
  X(text_embedding_2_b, "text_embedding.2.bias", (dim))                         \
  X(time_embedding_0_w, "time_embedding.0.weight", (dim, freq_dim))             \
  X(time_embedding_0_b, "time_embedding.0.bias", (dim))                         \
  X(time_embedding_2_w, "time_embedding.2.weight", (dim, dim))                  \
  X(time_embedding_2_b, "time_embedding.2.bias", (dim))                         \
  X(time_projection_1_w, "time_projection.1.weight", (6 * dim, dim))            \
  X(time_projection_1_b, "time_projection.1.bias", (6 * dim))

/* MODEL.md step 4, one transformer block. */
#define WAN_BLOCK_TENSORS(X)                                                    \
  X(modulation, "modulation", (1, 6, dim))                                      \
  X(self_attn_q_w, "self_attn.q.weight", (dim, dim))                            \
  X(self_attn_q_b, "self_attn.q.bias", (dim))                                   \
  X(self_attn_k_w, "self_attn.k.weight", (dim, dim))                            \
  X(self_attn_k_b, "self_attn.k.bias", (dim))                                   \
  X(self_attn_v_w, "self_attn.v.weight", (dim, dim))                            \
  X(self_attn_v_b, "self_attn.v.bias", (dim))                                   \
  X(self_attn_o_w, "self_attn.o.weight", (dim, dim))                            \
  X(self_attn_o_b, "self_attn.o.bias", (dim))                                   \
  X(self_attn_norm_q_w, "self_attn.norm_q.weight", (dim))                       \
  X(self_attn_norm_k_w, "self_attn.norm_k.weight", (dim))                       \
  X(norm3_w, "norm3.weight", (dim))                                             \
  X(norm3_b, "norm3.bias", (dim))                                               \
  X(cross_attn_q_w, "cross_attn.q.weight", (dim, dim))                          \
  X(cross_attn_q_b, "cross_attn.q.bias", (dim))                                 \
  X(cross_attn_k_w, "cross_attn.k.weight", (dim, dim))                          \
  X(cross_attn_k_b, "cross_attn.k.bias", (dim))                                 \
  X(cross_attn_v_w, "cross_attn.v.weight", (dim, dim))                          \
  X(cross_attn_v_b, "cross_attn.v.bias", (dim))                                 \
  X(cross_attn_o_w, "cross_attn.o.weight", (dim, dim))                          \
  X(cross_attn_o_b, "cross_attn.o.bias", (dim))                                 \
  X(cross_attn_norm_q_w, "cross_attn.norm_q.weight", (dim))                     \
  X(cross_attn_norm_k_w, "cross_attn.norm_k.weight", (dim))                     \
  X(ffn_0_w, "ffn.0.weight", (ffn_dim, dim))                                    \
  X(ffn_0_b, "ffn.0.bias", (ffn_dim))                                           \
  X(ffn_2_w, "ffn.2.weight", (dim, ffn_dim))                                    \
  X(ffn_2_b, "ffn.2.bias", (dim))

/* MODEL.md steps 5-6 (last stage). */
#define WAN_HEAD_TENSORS(X)                                                     \
  X(head_modulation, "head.modulation", (1, 2, dim))                            \
  X(head_head_w, "head.head.weight", (patch_out, dim))                          \
  X(head_head_b, "head.head.bias", (patch_out))

/* Layout indices: WAN_<GROUP>_T_<field>, then the group's tensor count. */
#define WAN_EMBED_T_(field, key, shape) WAN_EMBED_T_##field,
#define WAN_BLOCK_T_(field, key, shape) WAN_BLOCK_T_##field,
#define WAN_HEAD_T_(field, key, shape) WAN_HEAD_T_##field,
typedef enum { WAN_EMBED_TENSORS(WAN_EMBED_T_) WAN_EMBED_T_COUNT } wan_embed_tensor;
typedef enum { WAN_BLOCK_TENSORS(WAN_BLOCK_T_) WAN_BLOCK_T_COUNT } wan_block_tensor;
typedef enum { WAN_HEAD_TENSORS(WAN_HEAD_T_) WAN_HEAD_T_COUNT } wan_head_tensor;
#undef WAN_EMBED_T_
#undef WAN_BLOCK_T_
#undef WAN_HEAD_T_
_Static_assert(WAN_EMBED_T_COUNT <= WAN_MAX_TENSORS && WAN_BLOCK_T_COUNT <= WAN_MAX_TENSORS &&
                   WAN_HEAD_T_COUNT <= WAN_MAX_TENSORS,
               "a group's tensors fit in wan_layout");

/* How a block's ten linear layers compute (MODEL.md "fp8 weights", "int8
 * weights"): BF16, on their inputs as they are (weights of any stored
 * format dequantised: the CPU's fp32, the GPU's weight-only bf16); FP8, on
 * inputs quantised per token to e4m3 with weights e4m3 per output channel;
 * INT8, the same with MODEL.md's int8 rule. */
typedef enum {
  WAN_PRECISION_BF16 = 0,
  WAN_PRECISION_FP8 = 1,
  WAN_PRECISION_INT8 = 2
} wan_precision;
/* "bf16", "fp8", "int8" (the --precision values). */
const char *wan_precision_name(wan_precision p);
/* The name of a precision -> *out: SP_OK, or SP_ERR_INPUT logged naming
 * the value and the choices (--precision). */
int wan_precision_parse(const char *s, wan_precision *out);
/* The stored format a precision's linear weights take on a device (E4M3,
 * I8), or KERN_DTYPE_BF16 for BF16. */
kern_dtype wan_precision_weight_dtype(wan_precision p);

/* Typed views of a packed group: each field points at its tensor, shaped as
 * the list line says. fp32 host memory (CPU backend). */
#define WAN_FIELD_F32_(field, key, shape) const float *field;
typedef struct wan_embed_f32 { WAN_EMBED_TENSORS(WAN_FIELD_F32_) } wan_embed_f32;
/* precision: FP8 or INT8, the block's linear weights hold the dequantised
 * values of their e4m3 or int8 codes and the inputs of those linear layers
 * are quantised per token on the way in (MODEL.md "fp8 weights", "int8
 * weights"). BF16: fp32 throughout. */
typedef struct wan_block_f32 {
  WAN_BLOCK_TENSORS(WAN_FIELD_F32_)
  wan_precision precision;
} wan_block_f32;
typedef struct wan_head_f32 { WAN_HEAD_TENSORS(WAN_FIELD_F32_) } wan_head_f32;
#undef WAN_FIELD_F32_

/* bf16 device memory (CUDA backend); the structs live on the host. */
#define WAN_FIELD_BF16_(field, key, shape) const uint16_t *field;
typedef struct wan_embed_bf16 { WAN_EMBED_TENSORS(WAN_FIELD_BF16_) } wan_embed_bf16;
typedef struct wan_block_bf16 { WAN_BLOCK_TENSORS(WAN_FIELD_BF16_) } wan_block_bf16;
typedef struct wan_head_bf16 { WAN_HEAD_TENSORS(WAN_FIELD_BF16_) } wan_head_bf16;
#undef WAN_FIELD_BF16_

/* The linear layers of a block, by weight field: those a LoRA can bypass
 * (MODEL.md "LoRA", bypass). X(field, in, out) in the config's terms. */
#define WAN_BLOCK_LINEARS(X)                                                    \
  X(self_attn_q_w, dim, dim)                                                    \
  X(self_attn_k_w, dim, dim)                                                    \
  X(self_attn_v_w, dim, dim)                                                    \
  X(self_attn_o_w, dim, dim)                                                    \
  X(cross_attn_q_w, dim, dim)                                                   \
  X(cross_attn_k_w, dim, dim)                                                   \
  X(cross_attn_v_w, dim, dim)                                                   \
  X(cross_attn_o_w, dim, dim)                                                   \
  X(ffn_0_w, dim, ffn_dim)                                                      \
  X(ffn_2_w, ffn_dim, dim)

/* fp8 weights (MODEL.md "fp8 weights"): an fp8 model file stores the
 * weights of these linear layers as e4m3 bytes, each beside a float32
 * dataset of its output channels' scales (the model-file layer's format
 * table, ranks/model/mfile_format.c). Every other tensor stays bf16. */
enum { WAN_BLOCK_LINEAR_COUNT = 10 };
/* The place (0 .. WAN_BLOCK_LINEAR_COUNT - 1, WAN_BLOCK_LINEARS order) of
 * block tensor i among the linear weights, or -1 for any other tensor. */
int wan_block_linear_of(int i);
_Static_assert(WAN_BLOCK_T_COUNT + WAN_BLOCK_LINEAR_COUNT <= WAN_MAX_TENSORS,
               "an fp8 block's scales take the slots after its tensors");

/* A low-rank pair added after a linear layer: y += B (A x), the LoRAs'
 * scales already folded into B. r = 0: none. fp32 host memory. */
typedef struct wan_lora_f32 {
  const float *a; /* (r, in) */
  const float *b; /* (out, r) */
  int64_t r;
} wan_lora_f32;

/* The same in bf16 device memory (CUDA backend). */
typedef struct wan_lora_bf16 {
  const uint16_t *a; /* (r, in) */
  const uint16_t *b; /* (out, r) */
  int64_t r;
} wan_lora_bf16;

/* One pair per linear layer of a block. */
#define WAN_LORA_F32_(field, in, out) wan_lora_f32 field;
#define WAN_LORA_BF16_(field, in, out) wan_lora_bf16 field;
typedef struct wan_block_lora_f32 { WAN_BLOCK_LINEARS(WAN_LORA_F32_) } wan_block_lora_f32;
typedef struct wan_block_lora_bf16 { WAN_BLOCK_LINEARS(WAN_LORA_BF16_) } wan_block_lora_bf16;
#undef WAN_LORA_F32_
#undef WAN_LORA_BF16_

/* Points every field of *out into the packed group at base, laid out as l
 * (wan_layout_make of the same group, in the struct's dtype). The pointers
 * are only computed: base may be device memory. A layout of another group
 * or dtype is a programming error (sp_fatal). */
void wan_embed_f32_bind(const wan_layout *l, const float *base, wan_embed_f32 *out);
void wan_block_f32_bind(const wan_layout *l, const float *base, wan_block_f32 *out);
void wan_head_f32_bind(const wan_layout *l, const float *base, wan_head_f32 *out);
void wan_embed_bf16_bind(const wan_layout *l, const uint16_t *base, wan_embed_bf16 *out);
void wan_block_bf16_bind(const wan_layout *l, const uint16_t *base, wan_block_bf16 *out);
void wan_head_bf16_bind(const wan_layout *l, const uint16_t *base, wan_head_bf16 *out);

/* The layout index of the tensor of w at p (pointer comparison), or -1 when
 * p is none of w's tensors. */
int wan_block_f32_index(const wan_block_f32 *w, const void *p);
int wan_block_bf16_index(const wan_block_bf16 *w, const void *p);

#endif
