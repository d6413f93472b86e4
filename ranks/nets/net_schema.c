/* The networks a model file can hold, and the schema helpers (see
 * net_schema.h). */
#include "net_schema.h"

#include <string.h>

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
