/* The strict JSON reader (see json_in.h). */
#include "json_in.h"

#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

/* ---- messages ------------------------------------------------------------ */

void io_set_err(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

const char *io_printable(const char *s, size_t n, char *buf, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < n && o + 5 < cap; i++) {
    unsigned char c = (unsigned char)s[i];
    if (i == 120) {
      memcpy(buf + o, "...", 3);
      o += 3;
      break;
    }
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      buf[o++] = (char)c;
    } else {
      snprintf(buf + o, cap - o, "\\x%02x", c);
      o += 4;
    }
  }
  buf[o] = '\0';
  return buf;
}

/* ---- duplicate keys -------------------------------------------------------
 * json-c keeps the last of two equal keys without a word, so the JSON text
 * (already known to be valid) is scanned for the keys of every object. Keys
 * are compared decoded ("a" and "\u0061" are the same key). */

typedef struct key_span {
  char *s; /* decoded bytes */
  size_t n;
} key_span;

typedef struct obj_frame {
  int is_object;
  int expect_key;
  key_span *keys;
  size_t nkeys, cap;
} obj_frame;

static int key_cmp(const void *a, const void *b) {
  const key_span *x = a, *y = b;
  if (x->n != y->n) return x->n < y->n ? -1 : 1;
  return memcmp(x->s, y->s, x->n);
}

/* Decodes the JSON string literal at s[0..n) (quotes included). */
static int decode_key(const char *s, size_t n, key_span *out) {
  if (!memchr(s + 1, '\\', n - 2)) {
    out->n = n - 2;
    out->s = malloc(out->n + 1);
    if (!out->s) return -1;
    memcpy(out->s, s + 1, out->n);
    out->s[out->n] = '\0';
    return 0;
  }
  json_tokener *tok = json_tokener_new_ex(2);
  if (!tok) return -1;
  json_object *o = json_tokener_parse_ex(tok, s, (int)n);
  json_tokener_free(tok);
  if (!o || !json_object_is_type(o, json_type_string)) {
    json_object_put(o);
    return -1;
  }
  out->n = (size_t)json_object_get_string_len(o);
  out->s = malloc(out->n + 1);
  if (!out->s) {
    json_object_put(o);
    return -1;
  }
  memcpy(out->s, json_object_get_string(o), out->n);
  out->s[out->n] = '\0';
  json_object_put(o);
  return 0;
}

static int hex4(const char *s, unsigned *v) {
  *v = 0;
  for (int i = 0; i < 4; i++) {
    char c = s[i];
    unsigned d = (c >= '0' && c <= '9') ? (unsigned)(c - '0')
                 : (c >= 'a' && c <= 'f') ? (unsigned)(c - 'a' + 10)
                 : (c >= 'A' && c <= 'F') ? (unsigned)(c - 'A' + 10) : 16u;
    if (d == 16u) return -1;
    *v = *v * 16 + d;
  }
  return 0;
}

/* json-c turns a lone UTF-16 surrogate escape into U+FFFD, so two names
 * that differ only there would collide after decoding: refuse them in the
 * literal s[0..n) (quotes included). */
static int escapes_ok(const char *s, size_t n) {
  for (size_t i = 1; i + 1 < n; i++) {
    if (s[i] != '\\') continue;
    if (s[i + 1] != 'u') {
      i++;
      continue;
    }
    unsigned v, w;
    if (i + 6 > n - 1 || hex4(s + i + 2, &v) != 0) return -1;
    if (v >= 0xdc00 && v <= 0xdfff) return -1;
    if (v >= 0xd800 && v <= 0xdbff) {
      if (i + 12 > n - 1 || s[i + 6] != '\\' || s[i + 7] != 'u' || hex4(s + i + 8, &w) != 0 ||
          w < 0xdc00 || w > 0xdfff)
        return -1;
      i += 6;
    }
    i += 5;
  }
  return 0;
}

static void frame_free(obj_frame *f) {
  for (size_t i = 0; i < f->nkeys; i++) free(f->keys[i].s);
  free(f->keys);
  memset(f, 0, sizeof *f);
}

/* Returns 0, or -1 with a message. *top_keys gets the number of keys of
 * the root object (cross-checked against what json-c kept). */
static int scan_keys(const char *s, size_t n, size_t *top_keys, char *err, size_t errlen) {
  obj_frame st[IO_JSON_MAX_DEPTH + 2];
  int depth = 0, rc = -1;
  char pb[512];
  memset(st, 0, sizeof st);
  *top_keys = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '"') {
      size_t j = i + 1;
      while (j < n && s[j] != '"') j += (s[j] == '\\') ? 2 : 1;
      if (j >= n) {
        io_set_err(err, errlen, "header: unterminated string");
        goto out;
      }
      if (escapes_ok(s + i, j - i + 1) != 0) {
        io_set_err(err, errlen, "header: string at byte %zu has a lone UTF-16 surrogate escape "
                             "(not valid UTF-8)", i);
        goto out;
      }
      obj_frame *f = depth > 0 ? &st[depth - 1] : NULL;
      if (f && f->is_object && f->expect_key) {
        f->expect_key = 0;
        if (f->nkeys == f->cap) {
          size_t cap = f->cap ? f->cap * 2 : 16;
          key_span *k = realloc(f->keys, cap * sizeof *k);
          if (!k) {
            io_set_err(err, errlen, "header: out of memory scanning keys");
            goto out;
          }
          f->keys = k;
          f->cap = cap;
        }
        key_span *k = &f->keys[f->nkeys];
        if (decode_key(s + i, j - i + 1, k) != 0) {
          io_set_err(err, errlen, "header: key at byte %zu cannot be decoded", i);
          goto out;
        }
        f->nkeys++;
        if (memchr(k->s, '\0', k->n)) {
          io_set_err(err, errlen, "key '%s': contains a NUL character",
                  io_printable(k->s, k->n, pb, sizeof pb));
          goto out;
        }
        if (io_utf8_check((const unsigned char *)k->s, k->n) != k->n) {
          io_set_err(err, errlen, "key '%s': not valid UTF-8 after unescaping",
                  io_printable(k->s, k->n, pb, sizeof pb));
          goto out;
        }
      }
      i = j;
    } else if (c == '{' || c == '[') {
      if (depth >= IO_JSON_MAX_DEPTH + 1) {
        io_set_err(err, errlen, "header: JSON nested deeper than %d levels", IO_JSON_MAX_DEPTH);
        goto out;
      }
      st[depth].is_object = (c == '{');
      st[depth].expect_key = (c == '{');
      depth++;
    } else if (c == '}' || c == ']') {
      if (depth == 0) {
        io_set_err(err, errlen, "header: unbalanced '%c'", c);
        goto out;
      }
      obj_frame *f = &st[depth - 1];
      if (f->is_object && f->nkeys > 1) {
        qsort(f->keys, f->nkeys, sizeof *f->keys, key_cmp);
        for (size_t k = 1; k < f->nkeys; k++) {
          if (key_cmp(&f->keys[k - 1], &f->keys[k]) == 0) {
            io_set_err(err, errlen, "%s '%s': duplicate key (JSON would silently keep the last)",
                    depth == 1 ? "tensor" : "key",
                    io_printable(f->keys[k].s, f->keys[k].n, pb, sizeof pb));
            goto out;
          }
        }
      }
      if (depth == 1) *top_keys = f->nkeys;
      frame_free(f);
      depth--;
    } else if (c == ',') {
      if (depth > 0 && st[depth - 1].is_object) st[depth - 1].expect_key = 1;
    }
  }
  rc = 0;
out:
  for (int d = 0; d < depth; d++) frame_free(&st[d]);
  return rc;
}


/* ---- the reader ---------------------------------------------------------- */

int io_json_parse(const char *json, size_t len, size_t max_len, struct json_object **out,
                       char *err, size_t errlen) {
  json_tokener *tok = NULL;
  json_object *root = NULL;
  *out = NULL;
  if (len > max_len) {
    io_set_err(err, errlen, "header length %zu exceeds the %zu-byte bound", len, max_len);
    goto fail;
  }
  if (len == 0) {
    io_set_err(err, errlen, "header is empty (not a JSON object)");
    goto fail;
  }
  const char *nul = memchr(json, '\0', len);
  if (nul) {
    io_set_err(err, errlen, "header: NUL byte at offset %zu", (size_t)(nul - json));
    goto fail;
  }
  size_t bad = io_utf8_check((const unsigned char *)json, len);
  if (bad != len) {
    io_set_err(err, errlen, "header: not valid UTF-8 at byte %zu", bad);
    goto fail;
  }
  tok = json_tokener_new_ex(IO_JSON_MAX_DEPTH);
  if (!tok) {
    io_set_err(err, errlen, "header: out of memory");
    goto fail;
  }
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
  root = json_tokener_parse_ex(tok, json, (int)len);
  enum json_tokener_error je = json_tokener_get_error(tok);
  if (!root || je != json_tokener_success) {
    if (je == json_tokener_error_depth)
      io_set_err(err, errlen, "header: JSON nested deeper than %d levels", IO_JSON_MAX_DEPTH);
    else
      io_set_err(err, errlen, "header: invalid JSON near byte %zu (%s)",
              json_tokener_get_parse_end(tok),
              je == json_tokener_continue ? "unexpected end" : json_tokener_error_desc(je));
    goto fail;
  }
  for (size_t i = json_tokener_get_parse_end(tok); i < len; i++) {
    if (json[i] != ' ' && json[i] != '\t' && json[i] != '\n' && json[i] != '\r') {
      io_set_err(err, errlen, "header: bytes after the JSON object at offset %zu", i);
      goto fail;
    }
  }
  if (!json_object_is_type(root, json_type_object)) {
    io_set_err(err, errlen, "header: not a JSON object");
    goto fail;
  }
  size_t top_keys = 0;
  if (scan_keys(json, len, &top_keys, err, errlen) != 0) goto fail;
  int n = json_object_object_length(root);
  if (n < 0 || (size_t)n != top_keys) {
    io_set_err(err, errlen, "header: %zu keys in the text but %d parsed (duplicate key)", top_keys,
            n);
    goto fail;
  }
  json_tokener_free(tok);
  *out = root;
  return 0;
fail:
  json_object_put(root);
  if (tok) json_tokener_free(tok);
  return -1;
}
