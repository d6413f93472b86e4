/* SentencePiece's `spiece.model`: a protobuf ModelProto (proto2) read with
 * a small wire-format reader that trusts no length (tokenizer.h).
 *
 * Fields read (sentencepiece_model.proto): ModelProto.pieces = 1
 * {piece = 1, score = 2, type = 3}, trainer_spec = 2 {model_type = 3,
 * treat_whitespace_as_suffix = 24, byte_fallback = 35, unk_piece = 45,
 * bos_piece = 46, eos_piece = 47, pad_piece = 48}, normalizer_spec = 3
 * {precompiled_charsmap = 2, add_dummy_prefix = 3,
 * remove_extra_whitespaces = 4, escape_whitespaces = 5}. Every other field
 * is skipped by its wire type. A field given twice keeps its last value,
 * as protobuf merges. */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "tok_internal.h"

typedef struct pb {
  const uint8_t *p, *end;
} pb;

enum { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_I32 = 5 };

static int pb_varint(pb *r, uint64_t *v, const char *where, char *err, size_t errlen) {
  uint64_t x = 0;
  for (int i = 0; i < 10; i++) {
    if (r->p >= r->end) {
      tok_err(err, errlen, "%s: varint runs past the end", where);
      return -1;
    }
    uint8_t b = *r->p++;
    if (i == 9 && b > 1) {
      tok_err(err, errlen, "%s: varint longer than 64 bits", where);
      return -1;
    }
    x |= (uint64_t)(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      *v = x;
      return 0;
    }
  }
  tok_err(err, errlen, "%s: varint longer than 10 bytes", where);
  return -1;
}

/* The next field's number and wire type; groups (3, 4) and unknown wire
 * types are refused. */
static int pb_tag(pb *r, uint32_t *field, int *wire, const char *where, char *err, size_t errlen) {
  uint64_t t;
  if (pb_varint(r, &t, where, err, errlen)) return -1;
  *field = (uint32_t)(t >> 3);
  *wire = (int)(t & 7);
  if (t >> 3 == 0 || t >> 3 > 0x1fffffff) {
    tok_err(err, errlen, "%s: field number %llu outside 1..2^29-1", where,
            (unsigned long long)(t >> 3));
    return -1;
  }
  if (*wire != PB_VARINT && *wire != PB_I64 && *wire != PB_LEN && *wire != PB_I32) {
    tok_err(err, errlen, "%s: field %u has wire type %d (groups and unknown types refused)", where,
            *field, *wire);
    return -1;
  }
  return 0;
}

static int pb_len(pb *r, pb *sub, const char *where, char *err, size_t errlen) {
  uint64_t n;
  if (pb_varint(r, &n, where, err, errlen)) return -1;
  if (n > (uint64_t)(r->end - r->p)) {
    tok_err(err, errlen, "%s: length %llu runs past the end (%zu bytes left)", where,
            (unsigned long long)n, (size_t)(r->end - r->p));
    return -1;
  }
  sub->p = r->p;
  sub->end = r->p + n;
  r->p += n;
  return 0;
}

static int pb_fixed(pb *r, size_t n, uint8_t *out, const char *where, char *err, size_t errlen) {
  if ((size_t)(r->end - r->p) < n) {
    tok_err(err, errlen, "%s: fixed field runs past the end", where);
    return -1;
  }
  memcpy(out, r->p, n);
  r->p += n;
  return 0;
}

static int pb_skip(pb *r, int wire, const char *where, char *err, size_t errlen) {
  uint64_t v;
  uint8_t tmp[8];
  pb sub;
  switch (wire) {
  case PB_VARINT: return pb_varint(r, &v, where, err, errlen);
  case PB_I64: return pb_fixed(r, 8, tmp, where, err, errlen);
  case PB_I32: return pb_fixed(r, 4, tmp, where, err, errlen);
  default: return pb_len(r, &sub, where, err, errlen);
  }
}

static int want_wire(int wire, int expected, uint32_t field, const char *where, char *err,
                     size_t errlen) {
  if (wire == expected) return 0;
  tok_err(err, errlen, "%s: field %u has wire type %d, expected %d", where, field, wire, expected);
  return -1;
}

/* ---- the messages ------------------------------------------------------------ */

typedef struct spm_names {
  pb eos, pad, bos; /* empty (p == NULL) when absent */
  uint64_t model_type;
  uint64_t suffix;
  uint64_t byte_fallback;
} spm_names;

static int parse_trainer(pb r, spm_names *t, char *err, size_t errlen) {
  const char *w = "trainer_spec";
  while (r.p < r.end) {
    uint32_t f;
    int wire;
    if (pb_tag(&r, &f, &wire, w, err, errlen)) return -1;
    uint64_t *flag = f == 3 ? &t->model_type : f == 24 ? &t->suffix : f == 35 ? &t->byte_fallback : NULL;
    pb *name = f == 47 ? &t->eos : f == 48 ? &t->pad : f == 46 ? &t->bos : NULL;
    if (flag) {
      if (want_wire(wire, PB_VARINT, f, w, err, errlen) || pb_varint(&r, flag, w, err, errlen))
        return -1;
    } else if (name) {
      if (want_wire(wire, PB_LEN, f, w, err, errlen) || pb_len(&r, name, w, err, errlen)) return -1;
    } else if (pb_skip(&r, wire, w, err, errlen)) {
      return -1;
    }
  }
  return 0;
}

static int parse_normalizer(pb r, tok_spec *s, pb *charsmap, char *err, size_t errlen) {
  const char *w = "normalizer_spec";
  while (r.p < r.end) {
    uint32_t f;
    int wire;
    uint64_t v;
    if (pb_tag(&r, &f, &wire, w, err, errlen)) return -1;
    if (f == 2) {
      if (want_wire(wire, PB_LEN, f, w, err, errlen) || pb_len(&r, charsmap, w, err, errlen))
        return -1;
    } else if (f >= 3 && f <= 5) {
      if (want_wire(wire, PB_VARINT, f, w, err, errlen) || pb_varint(&r, &v, w, err, errlen))
        return -1;
      uint8_t b = v != 0;
      if (f == 3) s->add_dummy_prefix = b;
      if (f == 4) s->remove_extra_whitespaces = b;
      if (f == 5) s->escape_whitespaces = b;
    } else if (pb_skip(&r, wire, w, err, errlen)) {
      return -1;
    }
  }
  return 0;
}

/* One SentencePiece message: its text, score and type (defaults: score 0,
 * type NORMAL). Unknown type numbers are refused. */
static int parse_piece(pb r, int32_t idx, pb *text, float *score, uint8_t *type, char *err,
                       size_t errlen) {
  char w[48];
  snprintf(w, sizeof w, "piece %d", idx);
  text->p = text->end = NULL;
  *score = 0.0f;
  *type = TOK_NORMAL;
  while (r.p < r.end) {
    uint32_t f;
    int wire;
    if (pb_tag(&r, &f, &wire, w, err, errlen)) return -1;
    if (f == 1) {
      if (want_wire(wire, PB_LEN, f, w, err, errlen) || pb_len(&r, text, w, err, errlen)) return -1;
    } else if (f == 2) {
      uint8_t b[4];
      if (want_wire(wire, PB_I32, f, w, err, errlen) || pb_fixed(&r, 4, b, w, err, errlen)) return -1;
      uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
      memcpy(score, &u, 4);
    } else if (f == 3) {
      uint64_t v;
      if (want_wire(wire, PB_VARINT, f, w, err, errlen) || pb_varint(&r, &v, w, err, errlen))
        return -1;
      if (v < TOK_NORMAL || v > TOK_BYTE) {
        tok_err(err, errlen, "%s: type %llu, accepted 1..6", w, (unsigned long long)v);
        return -1;
      }
      *type = (uint8_t)v;
    } else if (pb_skip(&r, wire, w, err, errlen)) {
      return -1;
    }
  }
  if (!text->p || text->p == text->end) {
    tok_err(err, errlen, "%s: empty or missing text", w);
    return -1;
  }
  return 0;
}

/* A special piece's name from trainer_spec, or the default when absent or
 * empty (as SentencePiece does). */
static int name_or(const pb *name, const char *def, char *out, size_t cap, char *err,
                   size_t errlen) {
  int given = name->p && name->end > name->p;
  size_t n = given ? (size_t)(name->end - name->p) : strlen(def);
  if (n >= cap) {
    tok_err(err, errlen, "trainer_spec: a special piece name of %zu bytes, at most %zu", n, cap - 1);
    return -1;
  }
  memcpy(out, given ? (const char *)name->p : def, n);
  out[n] = '\0';
  return 0;
}

int tok_spm_parse(const uint8_t *buf, size_t n, tok_spec *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (n > TOK_MAX_FILE_BYTES) {
    tok_err(err, errlen, "%zu bytes, at most %u accepted", n, TOK_MAX_FILE_BYTES);
    return -1;
  }
  /* Pass 1: the structure, the piece count and bytes; the two specs. */
  tok_spec s = {0};
  s.add_dummy_prefix = s.remove_extra_whitespaces = s.escape_whitespaces = 1; /* proto defaults */
  spm_names names = {.model_type = 1};
  pb charsmap = {0}, r = {buf, buf + n};
  size_t count = 0, bytes = 0;
  while (r.p < r.end) {
    uint32_t f;
    int wire;
    pb sub;
    if (pb_tag(&r, &f, &wire, "model", err, errlen)) return -1;
    if (f < 1 || f > 3) {
      if (pb_skip(&r, wire, "model", err, errlen)) return -1;
      continue;
    }
    if (want_wire(wire, PB_LEN, f, "model", err, errlen) || pb_len(&r, &sub, "model", err, errlen))
      return -1;
    if (f == 1) {
      pb text;
      float score;
      uint8_t type;
      if (count >= TOK_MAX_PIECES) {
        tok_err(err, errlen, "more than %d pieces", TOK_MAX_PIECES);
        return -1;
      }
      if (parse_piece(sub, (int32_t)count, &text, &score, &type, err, errlen)) return -1;
      count++;
      bytes += (size_t)(text.end - text.p); /* bounded by n */
    } else if (f == 2) {
      if (parse_trainer(sub, &names, err, errlen)) return -1;
    } else if (parse_normalizer(sub, &s, &charsmap, err, errlen)) {
      return -1;
    }
  }
  if (names.model_type != 1) {
    tok_err(err, errlen, "trainer_spec: model_type %llu, only 1 (unigram) is accepted",
            (unsigned long long)names.model_type);
    return -1;
  }
  if (names.suffix) {
    tok_err(err, errlen, "trainer_spec: treat_whitespace_as_suffix is not supported");
    return -1;
  }
  s.byte_fallback = names.byte_fallback != 0;
  if (charsmap.p && (size_t)(charsmap.end - charsmap.p) > TOK_MAX_CHARSMAP_BYTES) {
    tok_err(err, errlen, "normalizer_spec: precompiled_charsmap of %zu bytes, at most %u",
            (size_t)(charsmap.end - charsmap.p), TOK_MAX_CHARSMAP_BYTES);
    return -1;
  }
  if (count == 0) {
    tok_err(err, errlen, "no pieces");
    return -1;
  }
  if (tok_spec_alloc(&s, count, bytes, err, errlen)) return -1;

  /* Pass 2: the pieces, already known to parse. */
  r.p = buf;
  size_t i = 0, off = 0;
  while (r.p < r.end) {
    uint32_t f;
    int wire;
    pb sub;
    pb_tag(&r, &f, &wire, "model", err, errlen);
    if (f != 1) {
      pb_skip(&r, wire, "model", err, errlen);
      continue;
    }
    pb_len(&r, &sub, "model", err, errlen);
    pb text;
    parse_piece(sub, (int32_t)i, &text, &s.scores[i], &s.types[i], err, errlen);
    size_t len = (size_t)(text.end - text.p);
    memcpy(s.piece_bytes + off, text.p, len);
    off += len;
    s.piece_offsets[++i] = (uint32_t)off;
  }
  if (charsmap.p && charsmap.end > charsmap.p) {
    s.charsmap_bytes = (uint32_t)(charsmap.end - charsmap.p);
    s.charsmap = sp_xmalloc(s.charsmap_bytes);
    memcpy(s.charsmap, charsmap.p, s.charsmap_bytes);
  }
  char eos[64], pad[64], bos[64];
  if (name_or(&names.eos, "</s>", eos, sizeof eos, err, errlen) ||
      name_or(&names.pad, "<pad>", pad, sizeof pad, err, errlen) ||
      name_or(&names.bos, "<s>", bos, sizeof bos, err, errlen) ||
      tok_spec_special_ids(&s, eos, pad, bos, err, errlen)) {
    tok_spec_free(&s);
    return -1;
  }
  *out = s;
  return 0;
}
