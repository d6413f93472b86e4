/* Binding typed weight structs to packed groups (see wan_weights.h). */
#include "wan_weights.h"

#include <stdio.h>
#include <string.h>

#include "log.h"

/* The layout must be the struct's group (its tensor count) in the struct's
 * dtype (its element size): a bind is by index, not by name. */
static void bind_check(const wan_layout *l, int count, size_t elem, const char *what) {
  if (l->count != count || l->t[0].bytes != (size_t)l->t[0].numel * elem)
    sp_fatal("internal: %s bound to a layout of %d tensors of %zu-byte elements", what,
             l->count, l->count ? l->t[0].bytes / (size_t)l->t[0].numel : (size_t)0);
}

/* One field per list line, in list order, which is the layout's order. */
#define BIND_FIELD(field, key, shape) \
  out->field = (const void *)((const char *)base + l->t[i++].offset);
#define DEFINE_BIND(fn, list, count, type, elem)                   \
  void fn(const wan_layout *l, const elem *base, type *out) {     \
    bind_check(l, count, sizeof(elem), #type);                     \
    int i = 0;                                                     \
    list(BIND_FIELD)                                               \
  }

DEFINE_BIND(wan_embed_f32_bind, WAN_EMBED_TENSORS, WAN_EMBED_T_COUNT, wan_embed_f32, float)
DEFINE_BIND(wan_block_f32_bind, WAN_BLOCK_TENSORS, WAN_BLOCK_T_COUNT, wan_block_f32, float)
DEFINE_BIND(wan_head_f32_bind, WAN_HEAD_TENSORS, WAN_HEAD_T_COUNT, wan_head_f32, float)
DEFINE_BIND(wan_embed_bf16_bind, WAN_EMBED_TENSORS, WAN_EMBED_T_COUNT, wan_embed_bf16, uint16_t)
DEFINE_BIND(wan_block_bf16_bind, WAN_BLOCK_TENSORS, WAN_BLOCK_T_COUNT, wan_block_bf16, uint16_t)
DEFINE_BIND(wan_head_bf16_bind, WAN_HEAD_TENSORS, WAN_HEAD_T_COUNT, wan_head_bf16, uint16_t)

#define INDEX_FIELD(field, key, shape) \
  if ((const void *)w->field == p) return WAN_BLOCK_T_##field;

int wan_block_f32_index(const wan_block_f32 *w, const void *p) {
  WAN_BLOCK_TENSORS(INDEX_FIELD)
  return -1;
}

int wan_block_bf16_index(const wan_block_bf16 *w, const void *p) {
  WAN_BLOCK_TENSORS(INDEX_FIELD)
  return -1;
}

#define LINEAR_INDEX(field, in, out) WAN_BLOCK_T_##field,
static const int linear_index[] = {WAN_BLOCK_LINEARS(LINEAR_INDEX)};
_Static_assert(sizeof linear_index / sizeof linear_index[0] == WAN_BLOCK_LINEAR_COUNT,
               "WAN_BLOCK_LINEAR_COUNT counts WAN_BLOCK_LINEARS");

int wan_block_linear_of(int i) {
  for (int j = 0; j < WAN_BLOCK_LINEAR_COUNT; j++)
    if (linear_index[j] == i) return j;
  return -1;
}

/* Indexed by wan_precision: the one list of the --precision words. */
static const char *const precision_names[] = {"bf16", "fp8", "int8"};
enum { N_PRECISIONS = (int)(sizeof precision_names / sizeof *precision_names) };
_Static_assert(N_PRECISIONS == WAN_PRECISION_INT8 + 1, "a name per wan_precision");

const char *wan_precision_name(wan_precision p) {
  return (int)p >= 0 && (int)p < N_PRECISIONS ? precision_names[p] : "?";
}

int wan_precision_parse(const char *s, wan_precision *out) {
  for (int i = 0; i < N_PRECISIONS; i++)
    if (s && strcmp(s, precision_names[i]) == 0) {
      *out = (wan_precision)i;
      return SP_OK;
    }
  /* "bf16, fp8 or int8" */
  char said[64] = "";
  for (int i = 0; i < N_PRECISIONS; i++)
    snprintf(said + strlen(said), sizeof said - strlen(said), "%s%s",
             i == 0 ? "" : i == N_PRECISIONS - 1 ? " or " : ", ", precision_names[i]);
  sp_log_error("--precision: '%s' is not %s", s ? s : "(null)", said);
  return SP_ERR_INPUT;
}

kern_dtype wan_precision_weight_dtype(wan_precision p) {
  return p == WAN_PRECISION_FP8 ? KERN_DTYPE_E4M3 : p == WAN_PRECISION_INT8 ? KERN_DTYPE_I8
                                                                              : KERN_DTYPE_BF16;
}
