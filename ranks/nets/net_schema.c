/* The networks a model file can hold, and the schema helpers (see
 * net_schema.h). */
#include "net_schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "net.h"

const net_schema *net_schema_of(const char *arch) {
  const net_desc *nets[32];
  const int n = net_all(nets, 32);
  for (int i = 0; i < n; i++)
    if (nets[i]->schema && strcmp(nets[i]->schema->arch, arch) == 0) return nets[i]->schema;
  return NULL;
}

int net_attr_find(const net_schema *s, const char *name) {
  for (int i = 0; i < s->nattrs; i++)
    if (strcmp(s->attrs[i].name, name) == 0) return i;
  return -1;
}

int64_t net_attr_get(const net_attr *a, const void *config, int k) {
  const char *p = (const char *)config + a->offset;
  switch (a->field) {
  case NET_FIELD_INT: return ((const int *)p)[k];
  case NET_FIELD_F64: return (int64_t)((const double *)p)[k];
  default: return ((const int64_t *)p)[k];
  }
}

void net_tensor_finish(net_tensor *t) {
  t->numel = 1;
  for (int d = 0; d < t->ndim; d++) t->numel *= t->shape[d];
  if (!t->key[0]) memcpy(t->key, t->name, sizeof t->name);
  if (!t->synth_prefix) t->synth_prefix = "";
}

void net_tensor_init(net_tensor *t, const char *group, const char *name, int ndim,
                     const int64_t *shape) {
  memset(t, 0, sizeof *t);
  snprintf(t->group, NET_PATH_MAX, "%s", group);
  snprintf(t->name, NET_NAME_MAX, "%s", name);
  t->ndim = ndim;
  for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
  net_tensor_finish(t);
}

const char *net_preset_names_join(const char *(*name)(int i), int count, char *list,
                                  size_t size) {
  if (!list[0])
    for (int i = 0; i < count; i++)
      snprintf(list + strlen(list), size - strlen(list), "%s%s", i ? ", " : "", name(i));
  return list;
}

int net_config_same(const net_schema *s, const void *a, const void *b) {
  for (int i = 0; i < s->nattrs; i++) {
    const net_attr *t = &s->attrs[i];
    if (t->optional) continue;
    int n = t->count;
    if (t->count_attr) {
      const int c = net_attr_find(s, t->count_attr);
      if (c < 0) return 0;
      /* the count attribute came first and is equal in both */
      n = (int)net_attr_get(&s->attrs[c], a, 0) + t->count_add;
    }
    for (int k = 0; k < n; k++)
      if (net_attr_get(t, a, k) != net_attr_get(t, b, k)) return 0;
  }
  return 1;
}

const char *net_preset_find(const net_schema *s, const char *(*name)(int i), int count,
                            const void *config) {
  void *p = sp_xmalloc(s->config_size);
  const char *found = NULL;
  for (int i = 0; !found && i < count; i++) {
    memset(p, 0, s->config_size);
    s->preset(name(i), p);
    if (net_config_same(s, p, config)) found = name(i);
  }
  free(p);
  return found;
}

int net_preset_index(const char *(*name)(int i), int count, const char *want) {
  for (int i = 0; i < count; i++)
    if (strcmp(want, name(i)) == 0) return i;
  return -1;
}
