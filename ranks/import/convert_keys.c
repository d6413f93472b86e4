/* The checkpoint key styles (official, diffusers, ComfyUI) and the mapping
 * of a key to the model file's group, block and tensor name, both ways
 * (convert.h). Shared by convert and the LoRA reader, which names the same
 * weights. */
#include <stdio.h>
#include <string.h>

#include "convert.h"
#include "safetensors.h"

const char *rank_convert_style_name(rank_convert_style s) {
  return s == RANK_CONVERT_DIFFUSERS ? "diffusers" : s == RANK_CONVERT_COMFY ? "comfyui" : "official";
}

/* ---- key mapping ----------------------------------------------------------
 * diffusers renames, as prefixes (exact = whole key). MODEL.md "Parameter names":
 * diffusers' norm2 is the official norm3 (its norm1/norm3 have no weights). */
typedef struct rename_rule {
  const char *from, *to;
  int exact;
} rename_rule;

static const rename_rule diff_embed[] = {
    {"patch_embedding.", "patch_embedding.", 0},
    {"condition_embedder.text_embedder.linear_1.", "text_embedding.0.", 0},
    {"condition_embedder.text_embedder.linear_2.", "text_embedding.2.", 0},
    {"condition_embedder.time_embedder.linear_1.", "time_embedding.0.", 0},
    {"condition_embedder.time_embedder.linear_2.", "time_embedding.2.", 0},
    {"condition_embedder.time_proj.", "time_projection.1.", 0},
    {NULL, NULL, 0},
};
static const rename_rule diff_block[] = {
    {"scale_shift_table", "modulation", 1},
    {"attn1.to_q.", "self_attn.q.", 0},       {"attn1.to_k.", "self_attn.k.", 0},
    {"attn1.to_v.", "self_attn.v.", 0},       {"attn1.to_out.0.", "self_attn.o.", 0},
    {"attn1.norm_q.", "self_attn.norm_q.", 0}, {"attn1.norm_k.", "self_attn.norm_k.", 0},
    {"attn2.to_q.", "cross_attn.q.", 0},      {"attn2.to_k.", "cross_attn.k.", 0},
    {"attn2.to_v.", "cross_attn.v.", 0},      {"attn2.to_out.0.", "cross_attn.o.", 0},
    {"attn2.norm_q.", "cross_attn.norm_q.", 0}, {"attn2.norm_k.", "cross_attn.norm_k.", 0},
    {"norm2.", "norm3.", 0},
    {"ffn.net.0.proj.", "ffn.0.", 0},         {"ffn.net.2.", "ffn.2.", 0},
    {NULL, NULL, 0},
};
static const rename_rule diff_head[] = {
    {"scale_shift_table", "head.modulation", 1},
    {"proj_out.", "head.head.", 0},
    {NULL, NULL, 0},
};

/* Names only: any valid config gives the same names (convert.h). */
const wan_layout *rank_convert_name_layout(wan_group g) {
  static wan_layout l[3];
  static int made = 0;
  if (!made) {
    wan_config c;
    wan_preset("wan2.1-tiny", &c);
    for (int i = 0; i < 3; i++) wan_layout_make(&c, (wan_group)i, KERN_DTYPE_F32, &l[i]);
    made = 1;
  }
  return &l[g];
}

static int apply_rules(const rename_rule *r, const char *key, char *buf, size_t n) {
  for (; r->from; r++) {
    size_t fl = strlen(r->from);
    if (r->exact ? strcmp(key, r->from) == 0 : strncmp(key, r->from, fl) == 0) {
      int w = snprintf(buf, n, "%s%s", r->to, r->exact ? "" : key + fl);
      return (w < 0 || (size_t)w >= n) ? -1 : 0;
    }
  }
  return -1;
}

/* "blocks.N." with N decimal, no leading zero, < 1024 (the layer bound of
 * wan_config_check). Returns the rest of the key, or NULL. */
static const char *block_prefix(const char *key, int *block) {
  if (strncmp(key, "blocks.", 7) != 0) return NULL;
  const char *p = key + 7;
  int v = 0, nd = 0;
  while (*p >= '0' && *p <= '9') {
    if (nd == 4) return NULL;
    v = v * 10 + (*p - '0');
    nd++;
    p++;
  }
  if (nd == 0 || *p != '.' || (nd > 1 && key[7] == '0') || v >= 1024) return NULL;
  *block = v;
  return p + 1;
}

int rank_convert_map_key(rank_convert_style s, const char *key, wan_group *g, int *block,
                         const char **name) {
  char buf[RANK_ST_MAX_NAME + 64];
  if (s == RANK_CONVERT_COMFY) {
    size_t pl = strlen(RANK_CONVERT_COMFY_PREFIX);
    if (strncmp(key, RANK_CONVERT_COMFY_PREFIX, pl) != 0) return -1;
    key += pl;
  }
  int b = -1;
  const char *rest = block_prefix(key, &b);
  wan_group grp;
  const char *official;
  if (rest) {
    grp = WAN_GROUP_BLOCK;
    if (s == RANK_CONVERT_DIFFUSERS) {
      if (apply_rules(diff_block, rest, buf, sizeof buf) != 0) return -1;
      official = buf;
    } else {
      official = rest;
    }
  } else {
    if (s == RANK_CONVERT_DIFFUSERS) {
      if (apply_rules(diff_embed, key, buf, sizeof buf) == 0) grp = WAN_GROUP_EMBED;
      else if (apply_rules(diff_head, key, buf, sizeof buf) == 0) grp = WAN_GROUP_HEAD;
      else return -1;
      official = buf;
    } else {
      official = key;
      grp = strncmp(key, "head.", 5) == 0 ? WAN_GROUP_HEAD : WAN_GROUP_EMBED;
    }
  }
  const wan_layout *l = rank_convert_name_layout(grp);
  int i = wan_layout_find(l, official);
  if (i < 0) return -1;
  *g = grp;
  *block = rest ? b : 0;
  *name = l->t[i].name;
  return 0;
}

void rank_convert_key_for(rank_convert_style s, wan_group g, int block, const char *name,
                          char *buf, size_t n) {
  const char *pre = s == RANK_CONVERT_COMFY ? RANK_CONVERT_COMFY_PREFIX : "";
  char blk[32] = "";
  if (g == WAN_GROUP_BLOCK) snprintf(blk, sizeof blk, "blocks.%d.", block);
  if (s == RANK_CONVERT_DIFFUSERS) {
    const rename_rule *r = g == WAN_GROUP_BLOCK ? diff_block : g == WAN_GROUP_HEAD ? diff_head
                                                                                 : diff_embed;
    for (; r->from; r++) {
      size_t tl = strlen(r->to);
      if (r->exact ? strcmp(name, r->to) == 0 : strncmp(name, r->to, tl) == 0) {
        snprintf(buf, n, "%s%s%s", blk, r->from, r->exact ? "" : name + tl);
        return;
      }
    }
  }
  snprintf(buf, n, "%s%s%s", pre, blk, name);
}
