/* The config attributes of a model file, read and written from the
 * schema's table (net_attr, see mfile_impl.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5_util.h"
#include "log.h"
#include "mfile_impl.h"

/* Elements of attribute a in config: fixed, or from its count attribute
 * (0 or less: not stored). */
static int attr_count(const net_schema *s, const net_attr *a, const void *config) {
  if (!a->count_attr) return a->count;
  int k = net_attr_find(s, a->count_attr);
  return k < 0 ? 0 : (int)net_attr_get(&s->attrs[k], config, 0) + a->count_add;
}

static void attr_set(const net_attr *a, void *config, int k, int64_t iv, double dv) {
  char *p = (char *)config + a->offset;
  if (a->field == NET_FIELD_INT) ((int *)p)[k] = (int)iv;
  else if (a->field == NET_FIELD_F64) ((double *)p)[k] = a->type == NET_ATTR_F64 ? dv : (double)iv;
  else ((int64_t *)p)[k] = iv;
}

/* The line for attribute a that is missing or malformed. */
static int attr_bad(const char *path, const net_schema *s, const net_attr *a, int count) {
  if (a->why)
    sp_log_error("%s: %s", path, a->why);
  else if (s->attr_hint)
    sp_log_error("%s: config attribute %s is missing or malformed (%s)", path, a->name,
                 s->attr_hint);
  else if (a->type == NET_ATTR_F64)
    sp_log_error("%s: config attribute %s is missing or not a number", path, a->name);
  else if (count == 1)
    sp_log_error("%s: config attribute %s is missing or not an integer", path, a->name);
  else
    sp_log_error("%s: config attribute %s is missing or not %d integers", path, a->name, count);
  return SP_ERR_INPUT;
}

/* Attribute a (count elements) into config; present[i] says it was there. */
static int attr_read(hid_t file, const char *path, const net_schema *s, const net_attr *a,
                     int count, void *config) {
  int64_t iv[16];
  double dv[16];
  if (count > 16) return attr_bad(path, s, a, count);
  const int got = a->type == NET_ATTR_F64
                      ? rank_h5_attr_read_num(file, a->name, H5T_NATIVE_DOUBLE, dv, count)
                      : rank_h5_attr_read_num(file, a->name, H5T_NATIVE_INT64, iv, count);
  if (got != 0) return attr_bad(path, s, a, count);
  for (int k = 0; k < count; k++) {
    if (a->ranged && a->type == NET_ATTR_I64 && (iv[k] < a->lo || iv[k] > a->hi)) {
      if (a->why) return attr_bad(path, s, a, count);
      if (count == 1)
        sp_log_error("%s: config attribute %s = %lld is outside %lld..%lld", path, a->name,
                     (long long)iv[k], (long long)a->lo, (long long)a->hi);
      else
        sp_log_error("%s: config attribute %s[%d] = %lld is outside %lld..%lld", path, a->name, k,
                     (long long)iv[k], (long long)a->lo, (long long)a->hi);
      return SP_ERR_INPUT;
    }
    attr_set(a, config, k, a->type == NET_ATTR_I64 ? iv[k] : 0,
             a->type == NET_ATTR_F64 ? dv[k] : 0);
  }
  return SP_OK;
}

int mfile_attrs_read(hid_t file, const char *path, const net_schema *s, void *config) {
  memset(config, 0, s->config_size);
  int *present = sp_xcalloc((size_t)s->nattrs, sizeof *present);
  int rc = SP_OK;
  for (int i = 0; i < s->nattrs && rc == SP_OK; i++) {
    const net_attr *a = &s->attrs[i];
    const int w = a->when ? net_attr_find(s, a->when) : -1;
    if (w >= 0 && !present[w]) continue;
    const int count = attr_count(s, a, config);
    if (count < 1) continue;
    if (a->optional && H5Aexists(file, a->name) <= 0) {
      attr_set(a, config, 0, a->dflt, (double)a->dflt);
      continue;
    }
    rc = attr_read(file, path, s, a, count, config);
    present[i] = rc == SP_OK;
  }
  free(present);
  char err[256];
  if (rc == SP_OK && s->check(config, err, sizeof err) != 0) {
    sp_log_error("%s: %s", path, err);
    rc = SP_ERR_INPUT;
  }
  return rc;
}

int mfile_attrs_write(hid_t file, const net_schema *s, const void *config) {
  int *written = sp_xcalloc((size_t)s->nattrs, sizeof *written);
  int rc = 0;
  for (int i = 0; i < s->nattrs && rc == 0; i++) {
    const net_attr *a = &s->attrs[i];
    const int w = a->when ? net_attr_find(s, a->when) : -1;
    const int count = attr_count(s, a, config);
    if ((w >= 0 && !written[w]) || count < 1 || count > 16) continue;
    if (a->optional && count == 1 && net_attr_get(a, config, 0) == a->dflt) continue;
    const char *p = (const char *)config + a->offset;
    if (a->type == NET_ATTR_F64) {
      rc = rank_h5_attr_write_num(file, a->name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, p,
                                  (hsize_t)count);
    } else {
      int64_t v[16];
      for (int k = 0; k < count; k++) v[k] = net_attr_get(a, config, k);
      rc = rank_h5_attr_write_num(file, a->name, H5T_STD_I64LE, H5T_NATIVE_INT64, v,
                                  (hsize_t)count);
    }
    written[i] = rc == 0;
  }
  free(written);
  return rc;
}
