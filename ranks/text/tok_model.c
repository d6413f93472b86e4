/* The tokenizer model: checking a spec, the piece tries, the normalisation
 * map's bounds, loading a file (tokenizer.h). */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_read.h"
#include "log.h"
#include "tok_internal.h"
#include "utf8.h"

void tok_err(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

int tok_text_check(const char *text, size_t len, const char *what, char *err, size_t errlen) {
  if (len > TOK_MAX_TEXT_BYTES) {
    tok_err(err, errlen, "%s%zu bytes, at most %u accepted", what, len, TOK_MAX_TEXT_BYTES);
    return -1;
  }
  size_t bad = io_utf8_check((const uint8_t *)text, len);
  if (bad != len) {
    tok_err(err, errlen, "invalid UTF-8 at byte %zu", bad);
    return -1;
  }
  return 0;
}

void tok_buf_put(tok_buf *b, const void *s, size_t n) {
  if (b->over) return;
  if (n > TOK_MAX_NORMALIZED_BYTES - b->n) {
    b->over = 1;
    return;
  }
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n) cap *= 2;
    b->p = realloc(b->p, cap);
    if (!b->p) sp_fatal("out of memory: %zu bytes of text", cap);
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
}

/* ---- spec arrays ---------------------------------------------------------- */

void tok_spec_free(tok_spec *s) {
  if (!s) return;
  free(s->piece_bytes);
  free(s->piece_offsets);
  free(s->scores);
  free(s->types);
  free(s->charsmap);
  memset(s, 0, sizeof *s);
}

int tok_spec_alloc(tok_spec *s, size_t n, size_t total_bytes, char *err, size_t errlen) {
  if (n < 1 || n > TOK_MAX_PIECES) {
    tok_err(err, errlen, "vocabulary: %zu pieces, accepted 1..%d", n, TOK_MAX_PIECES);
    return -1;
  }
  if (total_bytes > TOK_MAX_VOCAB_BYTES) {
    tok_err(err, errlen, "vocabulary: %zu bytes of pieces, at most %u accepted", total_bytes,
            TOK_MAX_VOCAB_BYTES);
    return -1;
  }
  s->n_pieces = (int32_t)n;
  s->piece_bytes = sp_xmalloc(total_bytes ? total_bytes : 1);
  s->piece_offsets = sp_xcalloc(n + 1, sizeof *s->piece_offsets);
  s->scores = sp_xcalloc(n, sizeof *s->scores);
  s->types = sp_xcalloc(n, sizeof *s->types);
  return 0;
}

static int piece_eq(const tok_spec *s, int32_t i, const char *p, size_t len) {
  uint32_t a = s->piece_offsets[i], b = s->piece_offsets[i + 1];
  return b - a == len && memcmp(s->piece_bytes + a, p, len) == 0;
}

static int is_reserved_type(uint8_t t) {
  return t == TOK_CONTROL || t == TOK_UNKNOWN || t == TOK_BYTE;
}

int32_t tok_spec_find(const tok_spec *s, const char *piece, size_t len) {
  /* Reserved (control, unknown, byte) pieces first, as PieceToId does. */
  for (int pass = 0; pass < 2; pass++)
    for (int32_t i = 0; i < s->n_pieces; i++)
      if (is_reserved_type(s->types[i]) == (pass == 0) && piece_eq(s, i, piece, len)) return i;
  return -1;
}

int tok_spec_special_ids(tok_spec *s, const char *eos, const char *pad, const char *bos, char *err,
                         size_t errlen) {
  s->unk_id = -1;
  for (int32_t i = 0; i < s->n_pieces; i++) {
    if (s->types[i] != TOK_UNKNOWN) continue;
    if (s->unk_id >= 0) {
      tok_err(err, errlen, "vocabulary: two unknown pieces (%d and %d)", s->unk_id, i);
      return -1;
    }
    s->unk_id = i;
  }
  if (s->unk_id < 0) {
    tok_err(err, errlen, "vocabulary: no unknown piece");
    return -1;
  }
  s->eos_id = tok_spec_find(s, eos, strlen(eos));
  if (s->eos_id < 0) {
    tok_err(err, errlen, "vocabulary: no end-of-sequence piece '%s'", eos);
    return -1;
  }
  /* Padding and begin-of-sequence are optional: only a control piece of
   * that name counts. */
  s->pad_id = tok_spec_find(s, pad, strlen(pad));
  if (s->pad_id >= 0 && s->types[s->pad_id] != TOK_CONTROL) s->pad_id = -1;
  s->bos_id = tok_spec_find(s, bos, strlen(bos));
  if (s->bos_id >= 0 && s->types[s->bos_id] != TOK_CONTROL) s->bos_id = -1;
  return 0;
}

/* ---- tries ---------------------------------------------------------------- */

static void trie_free(tok_trie *t) {
  free(t->keys);
  free(t->child);
  free(t->value);
  memset(t, 0, sizeof *t);
}

/* Room for every byte of the given pieces as its own node. */
static void trie_init(tok_trie *t, size_t bytes) {
  uint64_t cap = 16;
  while (cap < 2 * (uint64_t)bytes + 2) cap <<= 1;
  t->mask = cap - 1;
  t->keys = sp_xcalloc(cap, sizeof *t->keys);
  t->child = sp_xcalloc(cap, sizeof *t->child);
  t->value = sp_xmalloc((bytes + 1) * sizeof *t->value);
  t->value[0] = -1;
  t->n_nodes = 1;
}

/* Inserts piece id; returns the id already there for a duplicate, else -1. */
static int32_t trie_insert(tok_trie *t, const uint8_t *p, size_t len, int32_t id) {
  uint32_t node = 0;
  for (size_t k = 0; k < len; k++) {
    uint32_t next = tok_trie_next(t, node, p[k]);
    if (!next) {
      uint64_t key = (((uint64_t)node << 8) | p[k]) + 1;
      uint64_t h = key * 0x9E3779B97F4A7C15ull;
      uint64_t i = (h ^ (h >> 29)) & t->mask;
      while (t->keys[i]) i = (i + 1) & t->mask;
      next = t->n_nodes++;
      t->keys[i] = key;
      t->child[i] = next;
      t->value[next] = -1;
    }
    node = next;
  }
  if (t->value[node] >= 0) return t->value[node];
  t->value[node] = id;
  return -1;
}

/* ---- the precompiled normalisation map -------------------------------------
 * SentencePiece's layout: uint32 little-endian size of the trie in bytes,
 * the Darts-clone double array (uint32 units), then NUL-terminated
 * replacement strings; a leaf's value is the offset of its string. */

static inline uint32_t darts_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
static inline uint32_t darts_label(uint32_t u) { return u & ((1u << 31) | 0xffu); }
static inline int darts_has_leaf(uint32_t u) { return (u >> 8) & 1; }
static inline uint32_t darts_value(uint32_t u) { return u & ((1u << 31) - 1); }

/* Every node reachable from the root is visited once: each leaf's value
 * unit and each value (an offset into the strings) must lie in bounds, so
 * encoding never reads outside the map. A child is base ^ label, so a
 * base at or past the units rounded up to 256 has no child in the array. */
static int charsmap_check(tok_model *m, char *err, size_t errlen) {
  const uint32_t n = m->darts_units;
  const size_t cap = ((size_t)n + 255) & ~(size_t)255;
  uint8_t *seen = sp_xcalloc(cap, 1);
  uint32_t *stack = sp_xmalloc(cap * sizeof *stack);
  size_t top = 0;
  int rc = -1;
  uint32_t base = darts_offset(m->darts[0]);
  if (base < cap) {
    seen[base] = 1;
    stack[top++] = base;
  }
  while (top) {
    uint32_t b = stack[--top];
    for (uint32_t c = 0; c < 256; c++) {
      uint32_t pos = b ^ c;
      if (pos >= n) continue; /* no such child: the walk stops there too */
      uint32_t u = m->darts[pos];
      if (darts_label(u) != c) continue;
      uint32_t next = pos ^ darts_offset(u);
      if (darts_has_leaf(u) && next >= n) {
        tok_err(err, errlen, "normalisation map: unit %u has its value unit outside %u units", pos, n);
        goto done;
      }
      if (darts_has_leaf(u) && darts_value(m->darts[next]) >= m->norm_bytes) {
        tok_err(err, errlen, "normalisation map: unit %u has value %u outside %u bytes of strings",
                next, darts_value(m->darts[next]), m->norm_bytes);
        goto done;
      }
      if (next < cap && !seen[next]) {
        seen[next] = 1;
        stack[top++] = next;
      }
    }
  }
  rc = 0;
done:
  free(seen);
  free(stack);
  return rc;
}

static int charsmap_open(tok_model *m, char *err, size_t errlen) {
  const uint8_t *b = m->s.charsmap;
  uint32_t n = m->s.charsmap_bytes;
  if (n == 0) return 0;
  if (n > TOK_MAX_CHARSMAP_BYTES || n < 4) {
    tok_err(err, errlen, "normalisation map: %u bytes, accepted 4..%u", n, TOK_MAX_CHARSMAP_BYTES);
    return -1;
  }
  uint32_t trie = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
  if (trie < 4 || trie % 4 != 0 || trie > n - 4 || n - 4 - trie < 1) {
    tok_err(err, errlen,
            "normalisation map: trie of %u bytes in a map of %u (needs a multiple of 4, at least "
            "one unit, and room for the strings after it)",
            trie, n);
    return -1;
  }
  if (b[n - 1] != 0) {
    tok_err(err, errlen, "normalisation map: the replacement strings do not end with a NUL byte");
    return -1;
  }
  /* The copy in m->s is malloc'd, so the units after the 4-byte size are
   * 4-byte aligned. */
  m->darts = (const uint32_t *)(const void *)(b + 4);
  m->darts_units = trie / 4;
  m->norm = b + 4 + trie;
  m->norm_bytes = n - 4 - trie;
  return charsmap_check(m, err, errlen);
}

/* ---- checking a spec -------------------------------------------------------- */

static int byte_piece_value(const uint8_t *p, size_t len) {
  static const char hex[] = "0123456789ABCDEF";
  if (len != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>') return -1;
  const char *h = strchr(hex, p[3]), *l = strchr(hex, p[4]);
  if (!p[3] || !p[4] || !h || !l) return -1;
  return (int)((h - hex) * 16 + (l - hex));
}

static int check_id(const tok_spec *s, int32_t id, const char *what, int optional, uint8_t type,
                    char *err, size_t errlen) {
  if (optional && id == -1) return 0;
  if (id < 0 || id >= s->n_pieces) {
    tok_err(err, errlen, "%s id %d outside the %d pieces", what, id, s->n_pieces);
    return -1;
  }
  if (s->types[id] != type) {
    tok_err(err, errlen, "%s id %d is a piece of type %d, expected %d", what, id, s->types[id], type);
    return -1;
  }
  return 0;
}

static int spec_check(const tok_spec *s, char *err, size_t errlen) {
  if (s->n_pieces < 1 || s->n_pieces > TOK_MAX_PIECES || !s->piece_offsets || !s->piece_bytes ||
      !s->scores || !s->types) {
    tok_err(err, errlen, "vocabulary: %d pieces, accepted 1..%d", s->n_pieces, TOK_MAX_PIECES);
    return -1;
  }
  if (s->piece_offsets[0] != 0 || s->piece_offsets[s->n_pieces] > TOK_MAX_VOCAB_BYTES) {
    tok_err(err, errlen, "vocabulary: piece offsets must start at 0 and end by %u bytes",
            TOK_MAX_VOCAB_BYTES);
    return -1;
  }
  for (int32_t i = 0; i < s->n_pieces; i++) {
    uint32_t a = s->piece_offsets[i], b = s->piece_offsets[i + 1];
    if (b <= a || b - a > TOK_MAX_PIECE_BYTES) {
      tok_err(err, errlen, "piece %d: %lld bytes, accepted 1..%d", i, (long long)b - (long long)a,
              TOK_MAX_PIECE_BYTES);
      return -1;
    }
    size_t bad = io_utf8_check(s->piece_bytes + a, b - a);
    if (bad != b - a || memchr(s->piece_bytes + a, 0, b - a)) {
      tok_err(err, errlen, "piece %d: not valid UTF-8 without NUL (byte %zu)", i, bad);
      return -1;
    }
    if (!isfinite(s->scores[i])) {
      tok_err(err, errlen, "piece %d: score is not finite", i);
      return -1;
    }
    if (s->types[i] < TOK_NORMAL || s->types[i] > TOK_BYTE) {
      tok_err(err, errlen, "piece %d: type %d, accepted 1..6", i, s->types[i]);
      return -1;
    }
    if (s->types[i] == TOK_BYTE && !s->byte_fallback) {
      tok_err(err, errlen, "piece %d: a byte piece although byte_fallback is off", i);
      return -1;
    }
    if (s->types[i] == TOK_BYTE && byte_piece_value(s->piece_bytes + a, b - a) < 0) {
      tok_err(err, errlen, "piece %d: a byte piece not of the form <0xNN>", i);
      return -1;
    }
    if (s->types[i] == TOK_UNKNOWN && i != s->unk_id) {
      tok_err(err, errlen, "piece %d: a second unknown piece (unk id %d)", i, s->unk_id);
      return -1;
    }
  }
  if (s->add_dummy_prefix > 1 || s->remove_extra_whitespaces > 1 || s->escape_whitespaces > 1 ||
      s->byte_fallback > 1) {
    tok_err(err, errlen, "flags must be 0 or 1");
    return -1;
  }
  if (check_id(s, s->unk_id, "unknown", 0, TOK_UNKNOWN, err, errlen) ||
      check_id(s, s->eos_id, "end-of-sequence", 0, TOK_CONTROL, err, errlen) ||
      check_id(s, s->pad_id, "padding", 1, TOK_CONTROL, err, errlen) ||
      check_id(s, s->bos_id, "begin-of-sequence", 1, TOK_CONTROL, err, errlen))
    return -1;
  if ((s->charsmap_bytes == 0) != (s->charsmap == NULL)) {
    tok_err(err, errlen, "normalisation map: pointer and size disagree");
    return -1;
  }
  return 0;
}

static void *dup_bytes(const void *p, size_t n) {
  void *q = sp_xmalloc(n ? n : 1);
  if (n) memcpy(q, p, n);
  return q;
}

int tok_model_create(const tok_spec *spec, tok_model **out, char *err, size_t errlen) {
  if (spec_check(spec, err, errlen)) return -1;
  tok_model *m = sp_xcalloc(1, sizeof *m);
  const size_t n = (size_t)spec->n_pieces, bytes = spec->piece_offsets[n];
  m->s = *spec;
  m->s.piece_bytes = dup_bytes(spec->piece_bytes, bytes);
  m->s.piece_offsets = dup_bytes(spec->piece_offsets, (n + 1) * sizeof *spec->piece_offsets);
  m->s.scores = dup_bytes(spec->scores, n * sizeof *spec->scores);
  m->s.types = dup_bytes(spec->types, n);
  m->s.charsmap = spec->charsmap_bytes ? dup_bytes(spec->charsmap, spec->charsmap_bytes) : NULL;
  const tok_spec *s = &m->s;

  size_t reserved_bytes = 0;
  for (int32_t i = 0; i < s->n_pieces; i++)
    if (is_reserved_type(s->types[i])) reserved_bytes += s->piece_offsets[i + 1] - s->piece_offsets[i];
  trie_init(&m->pieces, bytes - reserved_bytes);
  trie_init(&m->reserved, reserved_bytes);
  m->min_score = FLT_MAX;
  m->max_score = FLT_MIN;
  for (int i = 0; i < 256; i++) m->byte_id[i] = -1;
  for (int32_t i = 0; i < s->n_pieces; i++) {
    const uint8_t *p = s->piece_bytes + s->piece_offsets[i];
    size_t len = s->piece_offsets[i + 1] - s->piece_offsets[i];
    uint8_t t = s->types[i];
    int32_t dup = trie_insert(is_reserved_type(t) ? &m->reserved : &m->pieces, p, len, i);
    if (dup >= 0) {
      tok_err(err, errlen, "piece %d: the same text as piece %d", i, dup);
      tok_model_free(m);
      return -1;
    }
    if (t == TOK_NORMAL) {
      m->min_score = fminf(m->min_score, s->scores[i]);
      m->max_score = fmaxf(m->max_score, s->scores[i]);
    }
    if (t == TOK_USER_DEFINED) m->has_user_defined = 1;
    if (t == TOK_BYTE) m->byte_id[byte_piece_value(p, len)] = i;
  }
  if (s->byte_fallback)
    for (int b = 0; b < 256; b++)
      if (m->byte_id[b] < 0) {
        tok_err(err, errlen, "byte_fallback is on but piece <0x%02X> is missing", b);
        tok_model_free(m);
        return -1;
      }
  if (charsmap_open(m, err, errlen)) {
    tok_model_free(m);
    return -1;
  }
  *out = m;
  return 0;
}

void tok_model_free(tok_model *m) {
  if (!m) return;
  trie_free(&m->pieces);
  trie_free(&m->reserved);
  tok_spec_free(&m->s);
  free(m);
}

const tok_spec *tok_model_spec(const tok_model *m) { return &m->s; }

/* ---- loading a file --------------------------------------------------------- */

int tok_model_load(const char *path, tok_model **out) {
  FILE *f = NULL;
  if (rank_file_fopen_read(path, &f) != SP_OK) return SP_ERR_INPUT; /* io/file_read.h */
  uint8_t *buf = NULL;
  size_t n = 0, cap = 0;
  int rc = SP_ERR_INPUT;
  for (;;) {
    if (n == cap) {
      if (cap >= TOK_MAX_FILE_BYTES) {
        sp_log_error("tokenizer %s: larger than %u bytes", path, TOK_MAX_FILE_BYTES);
        goto done;
      }
      cap = cap ? cap * 2 : (1u << 20);
      if (cap > TOK_MAX_FILE_BYTES) cap = TOK_MAX_FILE_BYTES;
      buf = realloc(buf, cap + 1);
      if (!buf) sp_fatal("out of memory reading %s", path);
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  if (ferror(f)) {
    sp_log_error("tokenizer %s: read error", path);
    rc = SP_ERR_RUNTIME;
    goto done;
  }
  char err[512];
  tok_spec spec = {0};
  size_t i = 0;
  while (i < n && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r')) i++;
  int json = i < n && buf[i] == '{';
  int prc = json ? tok_hfjson_parse((const char *)buf, n, &spec, err, sizeof err)
                 : tok_spm_parse(buf, n, &spec, err, sizeof err);
  if (prc) {
    sp_log_error("tokenizer %s (%s): %s", path, json ? "tokenizer.json" : "spiece.model", err);
    goto done;
  }
  prc = tok_model_create(&spec, out, err, sizeof err);
  tok_spec_free(&spec);
  if (prc) {
    sp_log_error("tokenizer %s: %s", path, err);
    goto done;
  }
  rc = SP_OK;
done:
  free(buf);
  fclose(f);
  return rc;
}
