/* Hostile-input safetensors reader (see safetensors.h). Order of checks:
 * bytes (UTF-8, no NUL) -> JSON syntax (json-c, strict, depth-limited) ->
 * duplicate keys (own scan: json-c keeps the last silently) -> fields of
 * every entry -> byte ranges against the data buffer. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_read.h"
#include "json_in.h"
#include "log.h"
#include "utf8.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this reader assumes a little-endian host"
#endif

static const struct {
  const char *name;
  size_t size;
} st_dtypes[] = {
    [RANK_ST_BOOL] = {"BOOL", 1},  [RANK_ST_U8] = {"U8", 1},
    [RANK_ST_I8] = {"I8", 1},      [RANK_ST_F8_E4M3] = {"F8_E4M3", 1},
    [RANK_ST_F8_E5M2] = {"F8_E5M2", 1}, [RANK_ST_I16] = {"I16", 2},
    [RANK_ST_U16] = {"U16", 2},    [RANK_ST_F16] = {"F16", 2},
    [RANK_ST_BF16] = {"BF16", 2},  [RANK_ST_I32] = {"I32", 4},
    [RANK_ST_U32] = {"U32", 4},    [RANK_ST_F32] = {"F32", 4},
    [RANK_ST_I64] = {"I64", 8},    [RANK_ST_U64] = {"U64", 8},
    [RANK_ST_F64] = {"F64", 8},
};
#define ST_NDTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

const char *rank_st_dtype_name(rank_st_dtype t) { return st_dtypes[t].name; }
size_t rank_st_dtype_size(rank_st_dtype t) { return st_dtypes[t].size; }

/* ---- fields -------------------------------------------------------------- */

/* A JSON integer >= 0 that fits in int64 (json-c saturates larger ones). */
static int get_count(json_object *v, uint64_t *out) {
  if (!json_object_is_type(v, json_type_int)) return -1;
  errno = 0;
  int64_t s = json_object_get_int64(v);
  if (s < 0) return -2;
  if (s == INT64_MAX) return -3; /* saturated, or too close to matter */
  *out = (uint64_t)s;
  return 0;
}

/* The tensor's "dtype" (jd) into t->dtype; pn: its name, printable. */
static int parse_dtype(const char *pn, json_object *jd, rank_st_tensor *t, char *err,
                       size_t errlen) {
  if (!json_object_is_type(jd, json_type_string)) {
    io_set_err(err, errlen, "tensor '%s': dtype is not a string", pn);
    return -1;
  }
  const char *ds = json_object_get_string(jd);
  size_t dl = (size_t)json_object_get_string_len(jd);
  int found = -1;
  for (int i = 0; i < ST_NDTYPES; i++)
    if (strlen(st_dtypes[i].name) == dl && memcmp(st_dtypes[i].name, ds, dl) == 0) found = i;
  if (found < 0) {
    char db[512];
    io_set_err(err, errlen, "tensor '%s': unknown dtype '%s'", pn, io_printable(ds, dl, db, sizeof db));
    return -1;
  }
  t->dtype = (rank_st_dtype)found;
  return 0;
}

/* The tensor's "shape" (js) into t->ndim, t->shape, t->numel. */
static int parse_shape(const char *pn, json_object *js, rank_st_tensor *t, char *err,
                       size_t errlen) {
  if (!json_object_is_type(js, json_type_array)) {
    io_set_err(err, errlen, "tensor '%s': shape is not an array", pn);
    return -1;
  }
  size_t nd = json_object_array_length(js);
  if (nd > RANK_ST_MAX_NDIM) {
    io_set_err(err, errlen, "tensor '%s': shape has %zu dims (at most %d)", pn, nd,
            RANK_ST_MAX_NDIM);
    return -1;
  }
  t->ndim = (int)nd;
  t->numel = 1;
  for (size_t i = 0; i < nd; i++) {
    uint64_t d;
    int r = get_count(json_object_array_get_idx(js, i), &d);
    if (r != 0) {
      io_set_err(err, errlen, "tensor '%s': shape[%zu] %s", pn, i,
              r == -1 ? "is not an integer" : r == -2 ? "is negative" : "is too large");
      return -1;
    }
    t->shape[i] = (int64_t)d;
    if (__builtin_mul_overflow(t->numel, d, &t->numel) || t->numel > (uint64_t)INT64_MAX) {
      io_set_err(err, errlen, "tensor '%s': element count of the shape overflows 64 bits", pn);
      return -1;
    }
  }
  return 0;
}

/* The bytes of t's shape and dtype, when they fit 63 bits. */
static int shape_bytes(const char *pn, const rank_st_tensor *t, uint64_t *out, char *err,
                       size_t errlen) {
  uint64_t bytes;
  if (__builtin_mul_overflow(t->numel, (uint64_t)st_dtypes[t->dtype].size, &bytes) ||
      bytes > (uint64_t)INT64_MAX) {
    io_set_err(err, errlen, "tensor '%s': byte size of the shape overflows 64 bits", pn);
    return -1;
  }
  *out = bytes;
  return 0;
}

/* The tensor's "data_offsets" (jo) into t->begin, t->end, in order. */
static int parse_offsets(const char *pn, json_object *jo, rank_st_tensor *t, char *err,
                         size_t errlen) {
  if (!json_object_is_type(jo, json_type_array) || json_object_array_length(jo) != 2) {
    io_set_err(err, errlen, "tensor '%s': data_offsets is not an array [begin, end]", pn);
    return -1;
  }
  uint64_t be[2];
  for (size_t i = 0; i < 2; i++) {
    int r = get_count(json_object_array_get_idx(jo, i), &be[i]);
    if (r != 0) {
      io_set_err(err, errlen, "tensor '%s': data_offsets[%zu] %s", pn, i,
              r == -1 ? "is not an integer" : r == -2 ? "is negative" : "is too large");
      return -1;
    }
  }
  t->begin = be[0];
  t->end = be[1];
  if (t->begin > t->end) {
    io_set_err(err, errlen, "tensor '%s': data_offsets [%llu, %llu] reversed (begin > end)", pn,
            (unsigned long long)t->begin, (unsigned long long)t->end);
    return -1;
  }
  return 0;
}

/* One header entry {dtype, shape, data_offsets} of tensor name into t,
 * every field checked and its byte span consistent with shape x dtype. */
static int parse_tensor(const char *name, json_object *v, rank_st_tensor *t, char *err,
                        size_t errlen) {
  char pb[512];
  const char *pn = io_printable(name, strlen(name), pb, sizeof pb);
  if (!json_object_is_type(v, json_type_object)) {
    io_set_err(err, errlen, "tensor '%s': entry is not a JSON object", pn);
    return -1;
  }
  json_object *jd = NULL, *js = NULL, *jo = NULL;
  json_object_object_foreach(v, k, fv) {
    if (strcmp(k, "dtype") == 0) jd = fv;
    else if (strcmp(k, "shape") == 0) js = fv;
    else if (strcmp(k, "data_offsets") == 0) jo = fv;
    else {
      char kb[512];
      io_set_err(err, errlen, "tensor '%s': unknown field '%s'", pn,
              io_printable(k, strlen(k), kb, sizeof kb));
      return -1;
    }
  }
  if (!jd || !js || !jo) {
    io_set_err(err, errlen, "tensor '%s': missing field '%s'", pn,
            !jd ? "dtype" : !js ? "shape" : "data_offsets");
    return -1;
  }
  uint64_t bytes;
  if (parse_dtype(pn, jd, t, err, errlen) != 0 || parse_shape(pn, js, t, err, errlen) != 0 ||
      shape_bytes(pn, t, &bytes, err, errlen) != 0 ||
      parse_offsets(pn, jo, t, err, errlen) != 0)
    return -1;
  if (t->end - t->begin != bytes) {
    io_set_err(err, errlen,
            "tensor '%s': size mismatch: data_offsets span %llu bytes, shape x %s needs %llu", pn,
            (unsigned long long)(t->end - t->begin), st_dtypes[t->dtype].name,
            (unsigned long long)bytes);
    return -1;
  }
  return 0;
}

static int parse_metadata(json_object *v, rank_st_header *h, char *err, size_t errlen) {
  char pb[512];
  if (!json_object_is_type(v, json_type_object)) {
    io_set_err(err, errlen, "__metadata__: not a JSON object (a string-to-string map)");
    return -1;
  }
  int n = json_object_object_length(v);
  h->meta_key = calloc((size_t)n + 1, sizeof *h->meta_key);
  h->meta_val = calloc((size_t)n + 1, sizeof *h->meta_val);
  if (!h->meta_key || !h->meta_val) {
    io_set_err(err, errlen, "__metadata__: out of memory");
    return -1;
  }
  json_object_object_foreach(v, k, fv) {
    if (!json_object_is_type(fv, json_type_string)) {
      io_set_err(err, errlen, "__metadata__ '%s': value is not a string",
              io_printable(k, strlen(k), pb, sizeof pb));
      return -1;
    }
    size_t vl = (size_t)json_object_get_string_len(fv);
    const char *vs = json_object_get_string(fv);
    if (memchr(vs, '\0', vl) || io_utf8_check((const unsigned char *)vs, vl) != vl) {
      io_set_err(err, errlen, "__metadata__ '%s': value has a NUL or invalid UTF-8",
              io_printable(k, strlen(k), pb, sizeof pb));
      return -1;
    }
    h->meta_key[h->nmeta] = strdup(k);
    h->meta_val[h->nmeta] = strdup(vs);
    h->nmeta++; /* counted before the check so header_free frees a half pair */
    if (!h->meta_key[h->nmeta - 1] || !h->meta_val[h->nmeta - 1]) {
      io_set_err(err, errlen, "__metadata__: out of memory");
      return -1;
    }
  }
  return 0;
}

/* ---- byte ranges ----------------------------------------------------------- */

static int range_cmp(const void *a, const void *b) {
  const rank_st_tensor *x = *(const rank_st_tensor *const *)a;
  const rank_st_tensor *y = *(const rank_st_tensor *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return 0;
}

static int check_ranges(rank_st_header *h, uint64_t data_len, char *err, size_t errlen) {
  char pa[512], pc[512];
  for (int i = 0; i < h->count; i++) {
    const rank_st_tensor *t = &h->t[i];
    if (t->end > data_len) {
      io_set_err(err, errlen,
              "tensor '%s': data_offsets [%llu, %llu] past the end of the data (%llu bytes)",
              io_printable(t->name, strlen(t->name), pa, sizeof pa), (unsigned long long)t->begin,
              (unsigned long long)t->end, (unsigned long long)data_len);
      return -1;
    }
  }
  uint64_t pos = 0;
  const rank_st_tensor *prev = NULL;
  if (h->count > 0) {
    const rank_st_tensor **ord = malloc((size_t)h->count * sizeof *ord);
    if (!ord) {
      io_set_err(err, errlen, "header: out of memory");
      return -1;
    }
    for (int i = 0; i < h->count; i++) ord[i] = &h->t[i];
    qsort(ord, (size_t)h->count, sizeof *ord, range_cmp);
    for (int i = 0; i < h->count; i++) {
      const rank_st_tensor *t = ord[i];
      if (t->begin < pos) {
        io_set_err(err, errlen, "tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s'",
                io_printable(t->name, strlen(t->name), pa, sizeof pa),
                (unsigned long long)t->begin, (unsigned long long)t->end,
                io_printable(prev->name, strlen(prev->name), pc, sizeof pc));
        free(ord);
        return -1;
      }
      if (t->begin > pos) {
        io_set_err(err, errlen, "tensor '%s': gap of %llu unused bytes before its data_offsets",
                io_printable(t->name, strlen(t->name), pa, sizeof pa),
                (unsigned long long)(t->begin - pos));
        free(ord);
        return -1;
      }
      pos = t->end;
      prev = t;
    }
    free(ord);
  }
  if (pos != data_len) {
    io_set_err(err, errlen,
            "file length mismatch: tensors cover %llu bytes of data, the file holds %llu",
            (unsigned long long)pos, (unsigned long long)data_len);
    return -1;
  }
  return 0;
}

/* ---- header -------------------------------------------------------------- */

void rank_st_header_free(rank_st_header *h) {
  if (!h) return;
  for (int i = 0; i < h->count; i++) free(h->t[i].name);
  free(h->t);
  for (int i = 0; i < h->nmeta; i++) {
    free(h->meta_key[i]);
    free(h->meta_val[i]);
  }
  free(h->meta_key);
  free(h->meta_val);
  memset(h, 0, sizeof *h);
}

int rank_st_parse_header(const char *json, size_t len, uint64_t data_len, rank_st_header *out,
                         char *err, size_t errlen) {
  rank_st_header h;
  json_object *root = NULL;
  int rc = -1;
  memset(&h, 0, sizeof h);
  memset(out, 0, sizeof *out);
  if (io_json_parse(json, len, RANK_ST_MAX_HEADER, &root, err, errlen) != 0) goto out;
  int n = json_object_object_length(root);
  h.t = calloc((size_t)n + 1, sizeof *h.t);
  if (!h.t) {
    io_set_err(err, errlen, "header: out of memory");
    goto out;
  }
  json_object_object_foreach(root, key, val) {
    size_t kl = strlen(key);
    if (strcmp(key, "__metadata__") == 0) {
      if (parse_metadata(val, &h, err, errlen) != 0) goto out;
      continue;
    }
    if (kl == 0 || kl > RANK_ST_MAX_NAME) {
      io_set_err(err, errlen, "tensor name of %zu bytes (must be 1..%d)", kl, RANK_ST_MAX_NAME);
      goto out;
    }
    for (size_t i = 0; i < kl; i++) {
      unsigned char c = (unsigned char)key[i];
      if (c < 0x20 || c == 0x7f) {
        char pb[512];
        io_set_err(err, errlen, "tensor '%s': name has a control character",
                io_printable(key, kl, pb, sizeof pb));
        goto out;
      }
    }
    rank_st_tensor *t = &h.t[h.count];
    if (parse_tensor(key, val, t, err, errlen) != 0) goto out;
    t->name = strdup(key);
    if (!t->name) {
      io_set_err(err, errlen, "header: out of memory");
      goto out;
    }
    h.count++;
  }
  if (check_ranges(&h, data_len, err, errlen) != 0) goto out;
  *out = h;
  memset(&h, 0, sizeof h);
  rc = 0;
out:
  rank_st_header_free(&h);
  json_object_put(root);
  return rc;
}

/* ---- file ---------------------------------------------------------------- */

void rank_st_close(rank_st_file *f) {
  if (!f) return;
  if (f->fd >= 0) close(f->fd);
  rank_st_header_free(&f->h);
  free(f->path);
  free(f);
}

int rank_st_open(const char *path, rank_st_file **out) {
  char err[1024];
  char *json = NULL;
  int rc = SP_ERR_INPUT;
  rank_st_file *f = calloc(1, sizeof *f);
  if (!f) {
    sp_log_error("%s: out of memory", path);
    return SP_ERR_RUNTIME;
  }
  f->fd = -1;
  f->path = strdup(path);
  if (!f->path) {
    sp_log_error("%s: out of memory", path);
    rc = SP_ERR_RUNTIME;
    goto fail;
  }
  /* Non-blocking, and refused unless a regular file (io/file_read.h). */
  if (rank_file_open_read(path, &f->fd) != SP_OK) {
    f->fd = -1;
    goto fail;
  }
  struct stat sb;
  if (fstat(f->fd, &sb) != 0) {
    sp_log_error("%s: cannot stat: %s", path, strerror(errno));
    rc = SP_ERR_RUNTIME;
    goto fail;
  }
  if (!S_ISREG(sb.st_mode)) {
    sp_log_error("%s: not a regular file", path);
    goto fail;
  }
  f->file_size = (uint64_t)sb.st_size;
  unsigned char lenb[8];
  size_t got = 0;
  if (rank_file_pread_full(f->fd, lenb, 8, 0, &got) != 0) {
    sp_log_error("%s: read failed: %s", path, strerror(errno));
    rc = SP_ERR_RUNTIME;
    goto fail;
  }
  if (got < 8 || f->file_size < 8) {
    sp_log_error("%s: truncated: %llu bytes, shorter than the 8-byte header length", path,
                 (unsigned long long)f->file_size);
    goto fail;
  }
  uint64_t hl = 0;
  for (int i = 7; i >= 0; i--) hl = (hl << 8) | lenb[i];
  if (hl > RANK_ST_MAX_HEADER) {
    sp_log_error("%s: header length %llu exceeds the %u-byte bound", path,
                 (unsigned long long)hl, RANK_ST_MAX_HEADER);
    goto fail;
  }
  if (hl > f->file_size - 8) {
    sp_log_error("%s: truncated: header length %llu runs past the end of the file (%llu bytes)",
                 path, (unsigned long long)hl, (unsigned long long)f->file_size);
    goto fail;
  }
  json = malloc((size_t)hl + 1);
  if (!json) {
    sp_log_error("%s: out of memory for a %llu-byte header", path, (unsigned long long)hl);
    rc = SP_ERR_RUNTIME;
    goto fail;
  }
  if (rank_file_pread_full(f->fd, json, (size_t)hl, 8, &got) != 0) {
    sp_log_error("%s: read failed: %s", path, strerror(errno));
    rc = SP_ERR_RUNTIME;
    goto fail;
  }
  if (got != hl) {
    sp_log_error("%s: truncated while reading the header", path);
    goto fail;
  }
  json[hl] = '\0';
  f->data_start = 8 + hl;
  if (rank_st_parse_header(json, (size_t)hl, f->file_size - f->data_start, &f->h, err,
                           sizeof err) != 0) {
    sp_log_error("%s: %s", path, err);
    goto fail;
  }
  free(json);
  *out = f;
  return SP_OK;
fail:
  free(json);
  rank_st_close(f);
  return rc;
}

int rank_st_read(const rank_st_file *f, const rank_st_tensor *t, uint64_t off, void *dst,
                 size_t n) {
  if (off > t->end - t->begin || n > t->end - t->begin - off) {
    sp_log_error("%s: tensor '%s': read of %zu bytes at %llu outside its data", f->path, t->name,
                 n, (unsigned long long)off);
    return SP_ERR_RUNTIME;
  }
  size_t got = 0;
  if (rank_file_pread_full(f->fd, dst, n, f->data_start + t->begin + off, &got) != 0) {
    sp_log_error("%s: tensor '%s': read failed: %s", f->path, t->name, strerror(errno));
    return SP_ERR_RUNTIME;
  }
  if (got != n) {
    sp_log_error("%s: tensor '%s': file ended early (changed while converting?)", f->path,
                 t->name);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}
