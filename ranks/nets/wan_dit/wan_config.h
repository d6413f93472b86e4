/* The Wan 2.1 text-to-video DiT: its config, the presets, and the packed
 * layout of its tensors (names, shapes, offsets) that the model file, the
 * synthetic generator, the converter and the loaders all share. The
 * tensors themselves are listed once, in wan_weights.h; MODEL.md "Tensors" is
 * the source of every shape. */
#ifndef WAN_CONFIG_H
#define WAN_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "kern_dtype.h"

#define WAN_ARCH "wan2.1-t2v"

/* The config, X(type, field, dims) per field in struct order (dims empty
 * for one value, [n] for n); each field's name is its model file
 * attribute (MODEL.md "Model file"). */
#define WAN_CONFIG_FIELDS(X)                                                    \
  X(int64_t, dim, )      /* model width D */                                    \
  X(int64_t, ffn_dim, )  /* FFN hidden width */                                 \
  X(int64_t, heads, )    /* attention heads; head_dim = dim / heads = 128 */    \
  X(int64_t, layers, )   /* transformer blocks */                               \
  X(int64_t, in_dim, )   /* latent channels in (16) */                          \
  X(int64_t, out_dim, )  /* latent channels out (16) */                         \
  X(int64_t, patch, [3]) /* (1, 2, 2) */                                        \
  X(int64_t, text_len, ) /* context rows after zero-padding (512) */            \
  X(int64_t, text_dim, ) /* text encoder width (4096) */                        \
  X(int64_t, freq_dim, ) /* sinusoidal time embedding width (256) */            \
  X(double, eps, )       /* norm epsilon (1e-6) */

#define WAN_CONFIG_FIELD_(type, field, dims) type field dims;
typedef struct wan_config { WAN_CONFIG_FIELDS(WAN_CONFIG_FIELD_) } wan_config;
#undef WAN_CONFIG_FIELD_

static inline int64_t wan_head_dim(const wan_config *c) { return c->dim / c->heads; }
/* Values per token of the patch embedding input and of the head output. */
static inline int64_t wan_patch_in(const wan_config *c) {
  return c->in_dim * c->patch[0] * c->patch[1] * c->patch[2];
}
static inline int64_t wan_patch_out(const wan_config *c) {
  return c->out_dim * c->patch[0] * c->patch[1] * c->patch[2];
}

/* Presets: "wan2.1-tiny", "wan2.1-1.3b", "wan2.1-14b". Returns 0, or -1 for
 * an unknown name. */
int wan_preset(const char *name, wan_config *out);
/* NULL-terminated list of preset names, for --help and error messages. */
extern const char *const wan_preset_names[];
/* The preset name whose config equals c, or NULL. */
const char *wan_preset_match(const wan_config *c);

/* Checks a config for internal consistency (positive sizes, head_dim 128,
 * patch (1,2,2), sizes small enough that no byte count overflows). Returns 0
 * or -1 with a message in err. */
int wan_config_check(const wan_config *c, char *err, size_t errlen);

/* The three kinds of weight groups: the embeddings (stage 0), one group per
 * transformer block, and the head (last stage). */
typedef enum { WAN_GROUP_EMBED = 0, WAN_GROUP_BLOCK = 1, WAN_GROUP_HEAD = 2 } wan_group;
const char *wan_group_name(wan_group g); /* "embed", "block", "head" */

#define WAN_MAX_TENSORS 40
#define WAN_TENSOR_ALIGN 256 /* byte alignment of each tensor in a packed group */

typedef struct wan_tensor {
  const char *name; /* official key without "blocks.N." ("self_attn.q.weight") */
  int ndim;
  int64_t shape[5];
  int64_t numel;
  size_t offset; /* byte offset in the packed group buffer */
  size_t bytes;  /* numel * dtype size; a block format's rows of blocks */
  kern_dtype dtype;    /* as it is stored in the group */
  size_t scale_offset; /* a format with a scale per row (e4m3, int8): the (rows) fp32 scales'
                          byte offset, right after the tensor; else 0 */
} wan_tensor;

/* A group's tensors in canonical order (the order of its list in
 * wan_weights.h) and their packed layout: each tensor
 * at a WAN_TENSOR_ALIGN-aligned offset of one buffer, so a whole block is a
 * single contiguous copy (host -> device streaming). */
typedef struct wan_layout {
  int count;
  wan_tensor t[WAN_MAX_TENSORS];
  size_t packed_bytes; /* buffer size including alignment padding */
  size_t data_bytes;   /* sum of tensor bytes (what the file holds) */
} wan_layout;

void wan_layout_make(const wan_config *c, wan_group g, kern_dtype dtype, wan_layout *out);
/* The same with tensor i stored as fmt[i] (a stored format of the model
 * file, kern_quant.h's bytes; each rows whole blocks of it): a format with
 * a scale per row has its (rows) fp32 scales right after it, at the next
 * aligned offset. A CUDA stage's device block (MODEL.md "Quantized weights
 * on the GPU"). */
void wan_layout_make_formats(const wan_config *c, wan_group g, const kern_dtype *fmt,
                             wan_layout *out);
/* Index of a tensor by name in a layout, or -1. */
int wan_layout_find(const wan_layout *l, const char *name);

/* Parameters per block (MODEL.md "Configs": 46,440,704 for 1.3B, 351,394,304
 * for 14B). */
int64_t wan_block_params(const wan_config *c);

#endif
