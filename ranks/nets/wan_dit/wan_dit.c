/* The DiT's description (wan_dit.h). */
#include "wan_dit.h"

#include <stdio.h>

#include "layout.h"

#define FIELD(T, f, dims) NET_FIELD_OF(wan_config, T, f)
static const net_field config_fields[] = {WAN_CONFIG_FIELDS(FIELD)};
#undef FIELD

static int config_check(const void *c, char *err, size_t errlen) {
  return wan_config_check(c, err, errlen);
}

static int tensor_count(const void *config) {
  const wan_config *c = config;
  return WAN_EMBED_T_COUNT + (int)c->layers * WAN_BLOCK_T_COUNT + WAN_HEAD_T_COUNT;
}

/* Group g's tensors into out, under prefix; returns the next entry. */
static net_tensor *group_tensors(const wan_layout *l, const char *prefix, net_tensor *out) {
  for (int i = 0; i < l->count; i++, out++) {
    snprintf(out->name, sizeof out->name, "%s%s", prefix, l->t[i].name);
    out->ndim = l->t[i].ndim;
    for (int d = 0; d < NET_TENSOR_MAX_DIMS; d++) out->shape[d] = d < out->ndim ? l->t[i].shape[d] : 0;
  }
  return out;
}

/* The embeddings, blocks.0. .. blocks.N-1., the head: the official keys. */
static void tensors(const void *config, net_tensor *out) {
  const wan_config *c = config;
  wan_layout l;
  char prefix[32];
  wan_layout_make(c, WAN_GROUP_EMBED, KERN_DTYPE_F32, &l);
  out = group_tensors(&l, "", out);
  wan_layout_make(c, WAN_GROUP_BLOCK, KERN_DTYPE_F32, &l);
  for (int64_t b = 0; b < c->layers; b++) {
    snprintf(prefix, sizeof prefix, "blocks.%lld.", (long long)b);
    out = group_tensors(&l, prefix, out);
  }
  wan_layout_make(c, WAN_GROUP_HEAD, KERN_DTYPE_F32, &l);
  group_tensors(&l, "", out);
}

static int layout(const void *shape, void *out, char *err, size_t errlen) {
  return plan_layout_make(shape, out, err, errlen);
}

static const net_desc desc = {
    .name = "wan_dit",
    .arch = WAN_ARCH,
    .noun = "DiT",
    .config_size = sizeof(wan_config),
    .config_fields = config_fields,
    .config_count = (int)(sizeof config_fields / sizeof config_fields[0]),
    .config_check = config_check,
    .tensor_count = tensor_count,
    .tensors = tensors,
    .layout = layout,
};

const net_desc *wan_dit_net(void) { return &desc; }
