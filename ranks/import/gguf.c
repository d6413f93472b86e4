/* Hostile-input GGUF header parser (gguf.h). Order of checks: header
 * (magic, version, counts) -> metadata pairs (keys, types, lengths) ->
 * duplicate keys -> general.alignment -> tensor infos (names, dims, types,
 * sizes) -> duplicate names -> each tensor's bytes inside the data section,
 * aligned, apart from the others -> comfy.gguf.orig_shape. Every count and
 * length is checked against the bytes the file has left before it sizes an
 * allocation, so memory stays proportional to the file. */
#include "gguf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_in.h"
#include "utf8.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "GGUF files are read as little-endian; this reader assumes a little-endian host"
#endif

static const struct {
  const char *name;
  unsigned size; /* 0: string, array */
} vtypes[RANK_GGUF_VTYPE_COUNT] = {
    [RANK_GGUF_U8] = {"u8", 1},      [RANK_GGUF_I8] = {"i8", 1},
    [RANK_GGUF_U16] = {"u16", 2},    [RANK_GGUF_I16] = {"i16", 2},
    [RANK_GGUF_U32] = {"u32", 4},    [RANK_GGUF_I32] = {"i32", 4},
    [RANK_GGUF_F32] = {"f32", 4},    [RANK_GGUF_BOOL] = {"bool", 1},
    [RANK_GGUF_STRING] = {"string", 0}, [RANK_GGUF_ARRAY] = {"array", 0},
    [RANK_GGUF_U64] = {"u64", 8},    [RANK_GGUF_I64] = {"i64", 8},
    [RANK_GGUF_F64] = {"f64", 8},
};

const char *rank_gguf_vtype_name(rank_gguf_vtype t) {
  return (int)t >= 0 && t < RANK_GGUF_VTYPE_COUNT ? vtypes[t].name : "?";
}

/* ggml's type names, for messages about the types staticpipe does not read. */
static const char *ggml_type_name(uint32_t t) {
  static const char *const names[] = {
      "F32", "F16", "Q4_0", "Q4_1", "Q4_2 (removed)", "Q4_3 (removed)", "Q5_0", "Q5_1",
      "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS",
      "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64",
      "F64", "IQ1_M", "BF16", "Q4_0_4_4 (removed)", "Q4_0_4_8 (removed)",
      "Q4_0_8_8 (removed)", "TQ1_0", "TQ2_0", "IQ4_NL_4_4 (removed)",
      "IQ4_NL_4_8 (removed)", "IQ4_NL_8_8 (removed)", "MXFP4", "NVFP4", "Q1_0"};
  return t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

/* ---- the cursor ----------------------------------------------------------- */

typedef struct gcur {
  const uint8_t *p;
  size_t len;         /* bytes of p */
  uint64_t file_size; /* bytes of the file p starts */
  size_t pos;
  int more;           /* a read ran past len but not past the file: read more */
  uint64_t need;
  char *err;
  size_t errlen;
} gcur;

/* Bytes of the file after the cursor. */
static uint64_t left(const gcur *c) { return c->file_size - c->pos; }

/* n bytes at the cursor into *out (and past them), or -1: past the end of
 * the file (message: where and what), or past len (c->more, no message). */
static int take(gcur *c, uint64_t n, const uint8_t **out, const char *where, const char *what) {
  if (n > left(c)) {
    io_set_err(c->err, c->errlen,
                    "truncated: %s%s%s (%llu bytes at offset %zu) runs past the end of the "
                    "file (%llu bytes)", where, *where ? ": " : "", what, (unsigned long long)n,
                    c->pos, (unsigned long long)c->file_size);
    return -1;
  }
  if (n > c->len - c->pos) {
    c->more = 1;
    c->need = c->pos + n;
    return -1;
  }
  *out = c->p + c->pos;
  c->pos += (size_t)n;
  return 0;
}

static uint64_t le(const uint8_t *b, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | b[i];
  return v;
}

static int rd_u32(gcur *c, uint32_t *v, const char *where, const char *what) {
  const uint8_t *b;
  if (take(c, 4, &b, where, what) != 0) return -1;
  *v = (uint32_t)le(b, 4);
  return 0;
}

static int rd_u64(gcur *c, uint64_t *v, const char *where, const char *what) {
  const uint8_t *b;
  if (take(c, 8, &b, where, what) != 0) return -1;
  *v = le(b, 8);
  return 0;
}

/* A string: its bytes at *s (in the buffer, not terminated) and length. */
static int rd_str(gcur *c, const uint8_t **s, uint64_t *n, const char *where, const char *what) {
  if (rd_u64(c, n, where, what) != 0) return -1;
  return take(c, *n, s, where, what);
}

/* A key or tensor name: 1..max bytes, UTF-8, no NUL or control character;
 * copied (NUL-terminated) into *out. what names it in the message. */
static int rd_name(gcur *c, size_t max, char **out, const char *where, const char *what) {
  const uint8_t *s;
  uint64_t n;
  char pb[160];
  if (rd_str(c, &s, &n, where, what) != 0) return -1;
  if (n == 0 || n > max) {
    io_set_err(c->err, c->errlen, "%s: %s of %llu bytes (must be 1..%zu)", where, what,
                    (unsigned long long)n, max);
    return -1;
  }
  const size_t bad = io_utf8_check(s, (size_t)n);
  if (bad != n) {
    io_set_err(c->err, c->errlen, "%s: %s '%s' is not valid UTF-8 (byte %zu)", where, what,
                    io_printable((const char *)s, (size_t)n, pb, sizeof pb), bad);
    return -1;
  }
  for (uint64_t i = 0; i < n; i++)
    if (s[i] < 0x20 || s[i] == 0x7f) {
      io_set_err(c->err, c->errlen, "%s: %s '%s' has a control character", where, what,
                      io_printable((const char *)s, (size_t)n, pb, sizeof pb));
      return -1;
    }
  *out = malloc((size_t)n + 1);
  if (!*out) {
    io_set_err(c->err, c->errlen, "%s: out of memory", where);
    return -1;
  }
  memcpy(*out, s, (size_t)n);
  (*out)[n] = '\0';
  return 0;
}

static void *dup_bytes(const uint8_t *s, uint64_t n) {
  char *d = malloc((size_t)n + 1);
  if (d) {
    memcpy(d, s, (size_t)n);
    d[n] = '\0';
  }
  return d;
}

/* ---- metadata values -------------------------------------------------------- */

/* A scalar of type t (not STRING or ARRAY) into kv's u / i / f. */
static void scalar_set(rank_gguf_kv *kv, rank_gguf_vtype t, const uint8_t *b) {
  const int n = (int)vtypes[t].size;
  const uint64_t raw = le(b, n);
  switch (t) {
  case RANK_GGUF_I8: kv->i = (int8_t)raw; break;
  case RANK_GGUF_I16: kv->i = (int16_t)raw; break;
  case RANK_GGUF_I32: kv->i = (int32_t)raw; break;
  case RANK_GGUF_I64: kv->i = (int64_t)raw; break;
  case RANK_GGUF_F32: {
    float f;
    uint32_t u = (uint32_t)raw;
    memcpy(&f, &u, 4);
    kv->f = f;
    break;
  }
  case RANK_GGUF_F64: memcpy(&kv->f, &raw, 8); break;
  default: kv->u = raw; break;
  }
}

/* An array of strings: count strings into one block and kv->strs. */
static int array_strings(gcur *c, rank_gguf_kv *kv, const char *where) {
  const size_t start = c->pos;
  uint64_t total = 0;
  for (uint64_t j = 0; j < kv->count; j++) { /* first pass: lengths, all in the file */
    const uint8_t *s;
    uint64_t n;
    if (rd_str(c, &s, &n, where, "array string") != 0) return -1;
    total += n + 1; /* n <= file size, so no overflow */
  }
  c->pos = start;
  kv->str_block = malloc((size_t)total + 1);
  kv->strs = malloc((size_t)kv->count * sizeof *kv->strs + 1);
  kv->str_lens = malloc((size_t)kv->count * sizeof *kv->str_lens + 1);
  if (!kv->str_block || !kv->strs || !kv->str_lens) {
    io_set_err(c->err, c->errlen, "%s: out of memory for %llu strings", where,
                    (unsigned long long)kv->count);
    return -1;
  }
  char *dst = kv->str_block;
  for (uint64_t j = 0; j < kv->count; j++) {
    const uint8_t *s;
    uint64_t n;
    if (rd_str(c, &s, &n, where, "array string") != 0) return -1; /* passed above */
    memcpy(dst, s, (size_t)n);
    dst[n] = '\0';
    kv->strs[j] = dst;
    kv->str_lens[j] = n;
    dst += n + 1;
  }
  return 0;
}

static int parse_array(gcur *c, rank_gguf_kv *kv, const char *where) {
  uint32_t et;
  if (rd_u32(c, &et, where, "array element type") != 0 ||
      rd_u64(c, &kv->count, where, "array length") != 0)
    return -1;
  if (et >= RANK_GGUF_VTYPE_COUNT) {
    io_set_err(c->err, c->errlen, "%s: unknown array element type %u", where, et);
    return -1;
  }
  if (et == RANK_GGUF_ARRAY) {
    io_set_err(c->err, c->errlen, "%s: an array of arrays (not read, as ggml reads none)",
                    where);
    return -1;
  }
  kv->elem_type = (rank_gguf_vtype)et;
  const uint64_t min = et == RANK_GGUF_STRING ? 8 : vtypes[et].size;
  if (kv->count > left(c) / min) {
    io_set_err(c->err, c->errlen,
                    "truncated: %s: an array of %llu %s (at least %llu bytes each) runs past the "
                    "end of the file (%llu bytes left)", where, (unsigned long long)kv->count,
                    vtypes[et].name, (unsigned long long)min, (unsigned long long)left(c));
    return -1;
  }
  if (et == RANK_GGUF_STRING) return array_strings(c, kv, where);
  const uint8_t *b;
  if (take(c, kv->count * min, &b, where, "array elements") != 0) return -1;
  if (et == RANK_GGUF_BOOL)
    for (uint64_t j = 0; j < kv->count; j++)
      if (b[j] > 1) {
        io_set_err(c->err, c->errlen, "%s: bool element %llu is %u (must be 0 or 1)", where,
                        (unsigned long long)j, b[j]);
        return -1;
      }
  kv->data = dup_bytes(b, kv->count * min);
  if (!kv->data) {
    io_set_err(c->err, c->errlen, "%s: out of memory", where);
    return -1;
  }
  return 0;
}

static int parse_kv(gcur *c, int64_t idx, rank_gguf_kv *kv) {
  char where[220], pb[160];
  snprintf(where, sizeof where, "metadata pair %lld", (long long)idx);
  if (rd_name(c, RANK_GGUF_MAX_KEY, &kv->key, where, "key") != 0) return -1;
  snprintf(where, sizeof where, "metadata '%s'",
           io_printable(kv->key, strlen(kv->key), pb, sizeof pb));
  uint32_t t;
  if (rd_u32(c, &t, where, "value type") != 0) return -1;
  if (t >= RANK_GGUF_VTYPE_COUNT) {
    io_set_err(c->err, c->errlen, "%s: unknown value type %u", where, t);
    return -1;
  }
  kv->type = (rank_gguf_vtype)t;
  kv->count = 1;
  if (t == RANK_GGUF_ARRAY) return parse_array(c, kv, where);
  const uint8_t *b;
  if (t == RANK_GGUF_STRING) {
    if (rd_str(c, &b, &kv->str_len, where, "string") != 0) return -1;
    kv->str = dup_bytes(b, kv->str_len);
    if (!kv->str) {
      io_set_err(c->err, c->errlen, "%s: out of memory", where);
      return -1;
    }
    return 0;
  }
  if (take(c, vtypes[t].size, &b, where, "value") != 0) return -1;
  if (t == RANK_GGUF_BOOL && b[0] > 1) {
    io_set_err(c->err, c->errlen, "%s: bool is %u (must be 0 or 1)", where, b[0]);
    return -1;
  }
  scalar_set(kv, kv->type, b);
  return 0;
}

/* ---- tensor infos ------------------------------------------------------------ */

static int parse_tensor(gcur *c, int64_t idx, rank_gguf_tensor *t) {
  char where[220], pb[160];
  snprintf(where, sizeof where, "tensor %lld", (long long)idx);
  if (rd_name(c, RANK_GGUF_MAX_NAME, &t->name, where, "name") != 0) return -1;
  snprintf(where, sizeof where, "tensor '%s'",
           io_printable(t->name, strlen(t->name), pb, sizeof pb));
  uint32_t nd;
  if (rd_u32(c, &nd, where, "n_dims") != 0) return -1;
  if (nd < 1 || nd > RANK_GGUF_MAX_DIMS) {
    io_set_err(c->err, c->errlen, "%s: n_dims %u (must be 1..%d)", where, nd,
                    RANK_GGUF_MAX_DIMS);
    return -1;
  }
  t->n_dims = (int)nd;
  t->numel = 1;
  for (uint32_t d = 0; d < nd; d++) {
    uint64_t v;
    if (rd_u64(c, &v, where, "dims") != 0) return -1;
    if (v < 1 || v > (uint64_t)INT64_MAX) {
      io_set_err(c->err, c->errlen, "%s: dim %u is %llu (must be 1..2^63-1)", where, d,
                      (unsigned long long)v);
      return -1;
    }
    t->ne[d] = (int64_t)v;
    if (__builtin_mul_overflow(t->numel, v, &t->numel) || t->numel > (uint64_t)INT64_MAX) {
      io_set_err(c->err, c->errlen, "%s: the element count of its dims overflows 63 bits",
                      where);
      return -1;
    }
  }
  uint32_t type;
  if (rd_u32(c, &type, where, "type") != 0 || rd_u64(c, &t->offset, where, "offset") != 0)
    return -1;
  t->ggml_type = (int)type;
  if (type > INT32_MAX || kern_qfmt_from_ggml((int)type, &t->fmt) != 0) {
    io_set_err(c->err, c->errlen, "%s: ggml type %u (%s) is not one staticpipe reads (%s)",
                    where, type, ggml_type_name(type), kern_qfmt_ggml_list());
    return -1;
  }
  t->cols = t->ne[0];
  t->rows = (int64_t)(t->numel / (uint64_t)t->ne[0]);
  uint64_t scale_bytes;
  char qerr[200];
  if (kern_qfmt_bytes(t->fmt, t->rows, t->cols, &t->bytes, &scale_bytes, qerr, sizeof qerr)) {
    io_set_err(c->err, c->errlen, "%s: %s", where, qerr);
    return -1;
  }
  t->shape_dims = t->n_dims;
  for (int d = 0; d < t->n_dims; d++) t->shape[d] = t->ne[t->n_dims - 1 - d];
  return 0;
}

/* ---- whole-header checks ------------------------------------------------------- */

static int cmp_kv(const void *a, const void *b) {
  return strcmp((*(const rank_gguf_kv *const *)a)->key, (*(const rank_gguf_kv *const *)b)->key);
}
static int cmp_name(const void *a, const void *b) {
  return strcmp((*(const rank_gguf_tensor *const *)a)->name,
                (*(const rank_gguf_tensor *const *)b)->name);
}
static int cmp_offset(const void *a, const void *b) {
  const rank_gguf_tensor *x = *(const rank_gguf_tensor *const *)a;
  const rank_gguf_tensor *y = *(const rank_gguf_tensor *const *)b;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int check_unique_keys(const rank_gguf_header *h, char *err, size_t errlen) {
  if (h->nkv < 2) return 0;
  const rank_gguf_kv **ord = malloc((size_t)h->nkv * sizeof *ord);
  if (!ord) {
    io_set_err(err, errlen, "metadata: out of memory");
    return -1;
  }
  for (int64_t i = 0; i < h->nkv; i++) ord[i] = &h->kv[i];
  qsort(ord, (size_t)h->nkv, sizeof *ord, cmp_kv);
  int rc = 0;
  for (int64_t i = 1; i < h->nkv && !rc; i++)
    if (strcmp(ord[i - 1]->key, ord[i]->key) == 0) {
      char pb[160];
      io_set_err(err, errlen, "metadata '%s' appears twice",
                      io_printable(ord[i]->key, strlen(ord[i]->key), pb, sizeof pb));
      rc = -1;
    }
  free(ord);
  return rc;
}

static int read_alignment(rank_gguf_header *h, char *err, size_t errlen) {
  h->alignment = RANK_GGUF_DEFAULT_ALIGNMENT;
  const rank_gguf_kv *a = rank_gguf_kv_find(h, "general.alignment");
  if (!a) return 0;
  if (a->type != RANK_GGUF_U32 || a->u == 0 || (a->u & (a->u - 1))) {
    io_set_err(err, errlen, "metadata 'general.alignment': %s %llu (must be a u32 power of "
                    "two)", rank_gguf_vtype_name(a->type),
                    (unsigned long long)(a->type == RANK_GGUF_U32 ? a->u : 0));
    return -1;
  }
  h->alignment = a->u;
  return 0;
}

/* Names unique (h->by_name made, sorted); every tensor's bytes aligned,
 * inside the data section of data_bytes bytes, apart from the others. */
static int check_tensors(rank_gguf_header *h, uint64_t data_bytes, char *err, size_t errlen) {
  if (h->ntensors == 0) return 0;
  char pa[160], pc[160];
  const rank_gguf_tensor **ord = malloc((size_t)h->ntensors * sizeof *ord);
  h->by_name = malloc((size_t)h->ntensors * sizeof *h->by_name);
  if (!ord || !h->by_name) {
    free(ord);
    io_set_err(err, errlen, "tensors: out of memory");
    return -1;
  }
  int rc = -1;
  for (int64_t i = 0; i < h->ntensors; i++) {
    h->by_name[i] = &h->t[i];
    ord[i] = &h->t[i];
  }
  qsort(h->by_name, (size_t)h->ntensors, sizeof *h->by_name, cmp_name);
  for (int64_t i = 1; i < h->ntensors; i++)
    if (strcmp(h->by_name[i - 1]->name, h->by_name[i]->name) == 0) {
      const char *n = h->by_name[i]->name;
      io_set_err(err, errlen, "tensor '%s' appears twice",
                      io_printable(n, strlen(n), pa, sizeof pa));
      goto out;
    }
  for (int64_t i = 0; i < h->ntensors; i++) {
    const rank_gguf_tensor *t = &h->t[i];
    const char *n = io_printable(t->name, strlen(t->name), pa, sizeof pa);
    if (t->offset % h->alignment) {
      io_set_err(err, errlen, "tensor '%s': offset %llu is not a multiple of the alignment "
                      "%llu", n, (unsigned long long)t->offset,
                      (unsigned long long)h->alignment);
      goto out;
    }
    if (t->offset > data_bytes || t->bytes > data_bytes - t->offset) {
      io_set_err(err, errlen, "tensor '%s': bytes [%llu, +%llu) of the data section run "
                      "past the end of the file (the section has %llu bytes)", n,
                      (unsigned long long)t->offset, (unsigned long long)t->bytes,
                      (unsigned long long)data_bytes);
      goto out;
    }
  }
  qsort(ord, (size_t)h->ntensors, sizeof *ord, cmp_offset);
  for (int64_t i = 1; i < h->ntensors; i++)
    if (ord[i - 1]->offset + ord[i - 1]->bytes > ord[i]->offset) {
      const rank_gguf_tensor *a = ord[i], *b = ord[i - 1];
      io_set_err(err, errlen, "tensor '%s': bytes [%llu, +%llu) overlap tensor '%s' [%llu, "
                      "+%llu)", io_printable(a->name, strlen(a->name), pa, sizeof pa),
                      (unsigned long long)a->offset, (unsigned long long)a->bytes,
                      io_printable(b->name, strlen(b->name), pc, sizeof pc),
                      (unsigned long long)b->offset, (unsigned long long)b->bytes);
      goto out;
    }
  rc = 0;
out:
  free(ord);
  return rc;
}

const rank_gguf_tensor *rank_gguf_header_tensor(const rank_gguf_header *h, const char *name) {
  int64_t lo = 0, hi = h->ntensors - 1;
  while (lo <= hi && h->by_name) {
    const int64_t mid = lo + (hi - lo) / 2;
    const int c = strcmp(h->by_name[mid]->name, name);
    if (c == 0) return h->by_name[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return NULL;
}

/* ComfyUI-GGUF's comfy.gguf.orig_shape.NAME: the PyTorch shape of a tensor
 * stored reshaped, an array of i32 > 0 whose product is the element count. */
static int apply_orig_shapes(rank_gguf_header *h, char *err, size_t errlen) {
  static const char prefix[] = "comfy.gguf.orig_shape.";
  char pb[160];
  for (int64_t i = 0; i < h->nkv; i++) {
    const rank_gguf_kv *kv = &h->kv[i];
    if (strncmp(kv->key, prefix, sizeof prefix - 1) != 0) continue;
    rank_gguf_tensor *t =
        (rank_gguf_tensor *)rank_gguf_header_tensor(h, kv->key + sizeof prefix - 1);
    const char *k = io_printable(kv->key, strlen(kv->key), pb, sizeof pb);
    if (!t) {
      io_set_err(err, errlen, "metadata '%s': no tensor of that name", k);
      return -1;
    }
    if (kv->type != RANK_GGUF_ARRAY || kv->elem_type != RANK_GGUF_I32 || kv->count < 1 ||
        kv->count > RANK_GGUF_MAX_SHAPE) {
      io_set_err(err, errlen, "metadata '%s': not an array of 1..%d i32", k,
                      RANK_GGUF_MAX_SHAPE);
      return -1;
    }
    uint64_t numel = 1;
    int64_t shape[RANK_GGUF_MAX_SHAPE];
    for (uint64_t d = 0; d < kv->count; d++) {
      const int32_t v = (int32_t)le((const uint8_t *)kv->data + 4 * d, 4);
      if (v < 1 || __builtin_mul_overflow(numel, (uint64_t)v, &numel)) {
        io_set_err(err, errlen, "metadata '%s': dim %llu is %d (must be >= 1)", k,
                        (unsigned long long)d, v);
        return -1;
      }
      shape[d] = v;
    }
    if (numel != t->numel) {
      io_set_err(err, errlen, "metadata '%s': %llu elements, the tensor has %llu", k,
                      (unsigned long long)numel, (unsigned long long)t->numel);
      return -1;
    }
    t->shape_dims = (int)kv->count;
    memcpy(t->shape, shape, (size_t)kv->count * sizeof *shape);
  }
  return 0;
}

/* ---- the header ------------------------------------------------------------------ */

void rank_gguf_header_free(rank_gguf_header *h) {
  if (!h) return;
  for (int64_t i = 0; i < h->nkv; i++) {
    rank_gguf_kv *kv = &h->kv[i];
    free(kv->key), free(kv->str), free(kv->data), free(kv->strs), free(kv->str_lens),
        free(kv->str_block);
  }
  free(h->kv);
  for (int64_t i = 0; i < h->ntensors; i++) free(h->t[i].name);
  free(h->t);
  free(h->by_name);
  memset(h, 0, sizeof *h);
}

const rank_gguf_kv *rank_gguf_kv_find(const rank_gguf_header *h, const char *key) {
  for (int64_t i = 0; i < h->nkv; i++)
    if (strcmp(h->kv[i].key, key) == 0) return &h->kv[i];
  return NULL;
}

/* Magic, version and the two counts, bounded by what the file can hold (a
 * pair takes at least 14 bytes, a tensor info 33). */
static int parse_start(gcur *c, rank_gguf_header *h, uint64_t *nkv, uint64_t *nt) {
  const uint8_t *m;
  if (take(c, 4, &m, "", "magic") != 0) return -1;
  if (memcmp(m, "GGUF", 4) != 0) {
    char pb[40];
    io_set_err(c->err, c->errlen, "bad magic '%s' (a GGUF file starts with 'GGUF')",
                    io_printable((const char *)m, 4, pb, sizeof pb));
    return -1;
  }
  if (rd_u32(c, &h->version, "", "version") != 0) return -1;
  if (h->version != 2 && h->version != 3) {
    const uint32_t v = h->version, swapped = (v >> 24) | ((v >> 8) & 0xff00) |
                                             ((v << 8) & 0xff0000) | (v << 24);
    if (swapped == 2 || swapped == 3)
      io_set_err(c->err, c->errlen, "big-endian GGUF (version %u byte-swapped) is not read",
                      swapped);
    else
      io_set_err(c->err, c->errlen, "version %u is not read (GGUF versions 2 and 3 are)", v);
    return -1;
  }
  if (rd_u64(c, nt, "", "tensor count") != 0 || rd_u64(c, nkv, "", "metadata count") != 0)
    return -1;
  if (*nkv > left(c) / 14 || *nt > (left(c) - *nkv * 14) / 33) {
    io_set_err(c->err, c->errlen, "%llu metadata pairs and %llu tensors cannot fit in the "
                    "%llu bytes the file has left", (unsigned long long)*nkv,
                    (unsigned long long)*nt, (unsigned long long)left(c));
    return -1;
  }
  return 0;
}

int rank_gguf_parse(const uint8_t *buf, size_t len, uint64_t file_size, rank_gguf_header *out,
                    uint64_t *need, char *err, size_t errlen) {
  rank_gguf_header h;
  memset(&h, 0, sizeof h);
  memset(out, 0, sizeof *out);
  gcur c = {.p = buf, .len = len, .file_size = file_size, .err = err, .errlen = errlen};
  uint64_t nkv, nt;
  if (len > file_size) {
    io_set_err(err, errlen, "buffer of %zu bytes for a file of %llu", len,
                    (unsigned long long)file_size);
    return -1;
  }
  if (parse_start(&c, &h, &nkv, &nt) != 0) goto fail;
  h.kv = calloc((size_t)nkv + 1, sizeof *h.kv);
  h.t = calloc((size_t)nt + 1, sizeof *h.t);
  if (!h.kv || !h.t) {
    io_set_err(err, errlen, "out of memory for %llu metadata pairs and %llu tensors",
                    (unsigned long long)nkv, (unsigned long long)nt);
    goto fail;
  }
  for (; h.nkv < (int64_t)nkv; h.nkv++) /* counted as parsed: header_free frees a half pair */
    if (parse_kv(&c, h.nkv, &h.kv[h.nkv]) != 0) {
      h.nkv++;
      goto fail;
    }
  if (check_unique_keys(&h, err, errlen) != 0 || read_alignment(&h, err, errlen) != 0) goto fail;
  for (; h.ntensors < (int64_t)nt; h.ntensors++)
    if (parse_tensor(&c, h.ntensors, &h.t[h.ntensors]) != 0) {
      h.ntensors++;
      goto fail;
    }
  h.data_start = c.pos + (h.alignment - c.pos % h.alignment) % h.alignment;
  if (h.ntensors > 0 && h.data_start > file_size) {
    io_set_err(err, errlen, "truncated: the data section would start at %llu, past the end "
                    "of the file (%llu bytes)", (unsigned long long)h.data_start,
                    (unsigned long long)file_size);
    goto fail;
  }
  if (check_tensors(&h, h.ntensors ? file_size - h.data_start : 0, err, errlen) != 0 ||
      apply_orig_shapes(&h, err, errlen) != 0)
    goto fail;
  *out = h;
  return 0;
fail:
  rank_gguf_header_free(&h);
  if (c.more) {
    *need = c.need > len ? c.need : (uint64_t)len + 1;
    return 1;
  }
  return -1;
}
