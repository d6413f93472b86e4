/* Binding typed weight structs to packed groups (see wan_weights.h). */
#include "wan_weights.h"

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
