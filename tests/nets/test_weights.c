/* The typed weight structs of wan_weights.h against the packed layout, for
 * every preset, group and dtype: every field a bind fills points at the
 * tensor whose key its list line names (looked up here by name, the path
 * the binds do not take), wan_block_*_index inverts the bind, and the
 * per-block parameter counts are MODEL.md's. */
#include <stdlib.h>
#include <string.h>

#include "sp_test.h"
#include "wan_weights.h"

/* Checks one bound field: the pointer is base + the offset of `key`. */
static void check_field(const char *what, const wan_layout *l, const void *base, const char *key,
                        const void *got) {
  int i = wan_layout_find(l, key);
  CHECK(i >= 0, "%s: %s is not in the layout", what, key);
  if (i < 0) return;
  CHECK(got == (const char *)base + l->t[i].offset, "%s: %s bound at the wrong offset", what,
        key);
}

#define CHECK_FIELD(field, key, shape) check_field(what, l, base, key, out.field);

static void check_preset(const char *preset) {
  wan_config c;
  CHECK(wan_preset(preset, &c) == 0, "preset %s", preset);
  for (int d = 0; d < 2; d++) {
    const kern_dtype dt = d ? KERN_DTYPE_BF16 : KERN_DTYPE_F32;
    wan_layout le, lb, lh;
    wan_layout_make(&c, WAN_GROUP_EMBED, dt, &le);
    wan_layout_make(&c, WAN_GROUP_BLOCK, dt, &lb);
    wan_layout_make(&c, WAN_GROUP_HEAD, dt, &lh);
    CHECK(le.count == WAN_EMBED_T_COUNT && lb.count == WAN_BLOCK_T_COUNT &&
              lh.count == WAN_HEAD_T_COUNT,
          "%s: layout counts %d %d %d", preset, le.count, lb.count, lh.count);
    /* The binds only compute addresses: one buffer as large as the
     * largest group serves as every base. */
    size_t max = le.packed_bytes > lb.packed_bytes ? le.packed_bytes : lb.packed_bytes;
    if (lh.packed_bytes > max) max = lh.packed_bytes;
    char *buf = malloc(max);
    const char *what = preset;
    if (d == 0) {
      const float *base = (const float *)buf;
      {
        const wan_layout *l = &le;
        wan_embed_f32 out;
        wan_embed_f32_bind(l, base, &out);
        WAN_EMBED_TENSORS(CHECK_FIELD)
      }
      {
        const wan_layout *l = &lb;
        wan_block_f32 out;
        wan_block_f32_bind(l, base, &out);
        WAN_BLOCK_TENSORS(CHECK_FIELD)
        for (int i = 0; i < l->count; i++)
          CHECK(wan_block_f32_index(&out, (const char *)base + l->t[i].offset) == i,
                "%s: fp32 index of tensor %d", preset, i);
        CHECK(wan_block_f32_index(&out, buf + 1) == -1, "%s: index of a non-tensor", preset);
      }
      {
        const wan_layout *l = &lh;
        wan_head_f32 out;
        wan_head_f32_bind(l, base, &out);
        WAN_HEAD_TENSORS(CHECK_FIELD)
      }
    } else {
      const uint16_t *base = (const uint16_t *)buf;
      {
        const wan_layout *l = &le;
        wan_embed_bf16 out;
        wan_embed_bf16_bind(l, base, &out);
        WAN_EMBED_TENSORS(CHECK_FIELD)
      }
      {
        const wan_layout *l = &lb;
        wan_block_bf16 out;
        wan_block_bf16_bind(l, base, &out);
        WAN_BLOCK_TENSORS(CHECK_FIELD)
        for (int i = 0; i < l->count; i++)
          CHECK(wan_block_bf16_index(&out, (const char *)base + l->t[i].offset) == i,
                "%s: bf16 index of tensor %d", preset, i);
      }
      {
        const wan_layout *l = &lh;
        wan_head_bf16 out;
        wan_head_bf16_bind(l, base, &out);
        WAN_HEAD_TENSORS(CHECK_FIELD)
      }
    }
    free(buf);
  }
}

int main(void) {
  sp_test_begin("test_weights");
  for (int i = 0; wan_preset_names[i]; i++) check_preset(wan_preset_names[i]);
  wan_config c;
  wan_preset("wan2.1-1.3b", &c);
  CHECK(wan_block_params(&c) == 46440704, "1.3B block params %lld",
        (long long)wan_block_params(&c));
  wan_preset("wan2.1-14b", &c);
  CHECK(wan_block_params(&c) == 351394304, "14B block params %lld",
        (long long)wan_block_params(&c));
  /* Shapes of the list lines, spot-checked against MODEL.md. */
  wan_layout l;
  wan_layout_make(&c, WAN_GROUP_EMBED, KERN_DTYPE_F32, &l);
  const wan_tensor *t = &l.t[WAN_EMBED_T_patch_embedding_w];
  CHECK(t->ndim == 5 && t->shape[0] == 5120 && t->shape[1] == 16 && t->shape[2] == 1 &&
            t->shape[3] == 2 && t->shape[4] == 2,
        "patch_embedding.weight shape");
  wan_layout_make(&c, WAN_GROUP_BLOCK, KERN_DTYPE_F32, &l);
  t = &l.t[WAN_BLOCK_T_modulation];
  CHECK(t->ndim == 3 && t->shape[0] == 1 && t->shape[1] == 6 && t->shape[2] == 5120,
        "modulation shape");
  t = &l.t[WAN_BLOCK_T_ffn_0_w];
  CHECK(t->ndim == 2 && t->shape[0] == 13824 && t->shape[1] == 5120, "ffn.0.weight shape");
  wan_layout_make(&c, WAN_GROUP_HEAD, KERN_DTYPE_F32, &l);
  t = &l.t[WAN_HEAD_T_head_head_w];
  CHECK(t->ndim == 2 && t->shape[0] == 64 && t->shape[1] == 5120, "head.head.weight shape");
  return sp_test_end();
}
