/* Hugging Face `tokenizer.json` for a SentencePiece unigram model
 * (tokenizer.h, TOKENIZER.md "tokenizer.json").
 *
 * Read: model {type "Unigram", unk_id, vocab [[piece, score], ...],
 * byte_fallback}; the Precompiled normaliser's precompiled_charsmap
 * (base64, alone or inside a Sequence); the Metaspace pre-tokeniser
 * (alone or inside a Sequence): replacement must be "▁", and
 * add_prefix_space / prepend_scheme ("always", "first": the text is one
 * sequence; "never") give add_dummy_prefix; added_tokens: special ones are
 * control pieces, the others user-defined, as Hugging Face's converter
 * made them from SentencePiece's types; added tokens with ids past the
 * vocabulary are not pieces and are left out (TOKENIZER.md). The JSON itself goes through the
 * strict JSON reader (io_json_parse, ranks/io/json_in.h). */
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json_in.h"
#include "log.h"
#include "tok_internal.h"

static json_object *get(json_object *o, const char *key, json_type type) {
  json_object *v = NULL;
  if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
    return NULL;
  return json_object_is_type(v, type) ? v : NULL;
}

static const char *get_str(json_object *o, const char *key) {
  json_object *v = get(o, key, json_type_string);
  return v ? json_object_get_string(v) : NULL;
}

/* Finds the first object of the given "type" in o, or in o's list under
 * list_key when o is a Sequence. */
static json_object *find_typed(json_object *o, const char *list_key, const char *type) {
  const char *t = get_str(o, "type");
  if (!t) return NULL;
  if (strcmp(t, type) == 0) return o;
  if (strcmp(t, "Sequence") != 0) return NULL;
  json_object *list = get(o, list_key, json_type_array);
  if (!list) return NULL;
  size_t n = json_object_array_length(list);
  for (size_t i = 0; i < n; i++) {
    json_object *e = json_object_array_get_idx(list, i);
    const char *et = get_str(e, "type");
    if (et && strcmp(et, type) == 0) return e;
  }
  return NULL;
}

/* Strict base64 (RFC 4648, padded, no whitespace). Returns the byte count
 * or -1. */
static long long base64_decode(const char *in, size_t n, uint8_t *out) {
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  if (n % 4) return -1;
  size_t o = 0;
  for (size_t i = 0; i < n; i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (int k = 0; k < 4; k++) {
      char c = in[i + k];
      const char *p = c ? strchr(tab, c) : NULL;
      if (c == '=' && i + 4 == n && k >= 2 && (k == 3 || in[i + 3] == '=')) {
        pad++;
        v <<= 6;
      } else if (p && !pad) {
        v = (v << 6) | (uint32_t)(p - tab);
      } else {
        return -1;
      }
    }
    out[o++] = (uint8_t)(v >> 16);
    if (pad < 2) out[o++] = (uint8_t)(v >> 8);
    if (pad < 1) out[o++] = (uint8_t)v;
  }
  return (long long)o;
}

static int parse_charsmap(json_object *root, tok_spec *s, char *err, size_t errlen) {
  json_object *norm = NULL;
  json_object_object_get_ex(root, "normalizer", &norm);
  json_object *pre = norm ? find_typed(norm, "normalizers", "Precompiled") : NULL;
  if (!pre) return 0; /* no map: identity */
  const char *b64 = get_str(pre, "precompiled_charsmap");
  if (!b64) {
    tok_err(err, errlen, "normalizer: Precompiled without a precompiled_charsmap string");
    return -1;
  }
  size_t n = strlen(b64);
  if (n / 4 * 3 > TOK_MAX_CHARSMAP_BYTES) {
    tok_err(err, errlen, "normalizer: precompiled_charsmap larger than %u bytes",
            TOK_MAX_CHARSMAP_BYTES);
    return -1;
  }
  if (n == 0) return 0;
  s->charsmap = sp_xmalloc(n / 4 * 3 + 3);
  long long got = base64_decode(b64, n, s->charsmap);
  if (got <= 0) {
    tok_err(err, errlen, "normalizer: precompiled_charsmap is not valid base64");
    return -1;
  }
  s->charsmap_bytes = (uint32_t)got;
  return 0;
}

static int parse_metaspace(json_object *root, tok_spec *s, char *err, size_t errlen) {
  json_object *pt = NULL;
  json_object_object_get_ex(root, "pre_tokenizer", &pt);
  json_object *ms = pt ? find_typed(pt, "pretokenizers", "Metaspace") : NULL;
  if (!ms) {
    tok_err(err, errlen, "pre_tokenizer: no Metaspace (SentencePiece's whitespace handling)");
    return -1;
  }
  const char *rep = get_str(ms, "replacement");
  if (!rep || strcmp(rep, "\xe2\x96\x81") != 0) {
    tok_err(err, errlen, "pre_tokenizer: Metaspace replacement must be \"\\u2581\"");
    return -1;
  }
  const char *scheme = get_str(ms, "prepend_scheme");
  json_object *aps = get(ms, "add_prefix_space", json_type_boolean);
  if (scheme) {
    if (strcmp(scheme, "always") == 0 || strcmp(scheme, "first") == 0) {
      s->add_dummy_prefix = 1;
    } else if (strcmp(scheme, "never") == 0) {
      s->add_dummy_prefix = 0;
    } else {
      tok_err(err, errlen, "pre_tokenizer: Metaspace prepend_scheme '%.32s' unknown", scheme);
      return -1;
    }
  } else if (aps) {
    s->add_dummy_prefix = json_object_get_boolean(aps) ? 1 : 0;
  } else {
    s->add_dummy_prefix = 1; /* Metaspace's default */
  }
  s->escape_whitespaces = 1;
  s->remove_extra_whitespaces = 1;
  return 0;
}

static int parse_vocab(json_object *model, tok_spec *s, char *err, size_t errlen) {
  json_object *vocab = get(model, "vocab", json_type_array);
  if (!vocab) {
    tok_err(err, errlen, "model: no vocab array");
    return -1;
  }
  size_t n = json_object_array_length(vocab), bytes = 0;
  for (size_t i = 0; i < n; i++) {
    json_object *e = json_object_array_get_idx(vocab, i);
    json_object *p = e && json_object_is_type(e, json_type_array) && json_object_array_length(e) == 2
                         ? json_object_array_get_idx(e, 0)
                         : NULL;
    json_object *sc = p ? json_object_array_get_idx(e, 1) : NULL;
    if (!p || !json_object_is_type(p, json_type_string) || !sc ||
        !(json_object_is_type(sc, json_type_double) || json_object_is_type(sc, json_type_int))) {
      tok_err(err, errlen, "model: vocab entry %zu is not [piece, score]", i);
      return -1;
    }
    bytes += (size_t)json_object_get_string_len(p);
    if (bytes > TOK_MAX_VOCAB_BYTES) break; /* tok_spec_alloc says so */
  }
  if (tok_spec_alloc(s, n, bytes, err, errlen)) return -1;
  size_t off = 0;
  for (size_t i = 0; i < n; i++) {
    json_object *e = json_object_array_get_idx(vocab, i);
    json_object *p = json_object_array_get_idx(e, 0);
    double score = json_object_get_double(json_object_array_get_idx(e, 1));
    size_t len = (size_t)json_object_get_string_len(p);
    if (!isfinite(score) || fabs(score) > 3.0e38) {
      tok_err(err, errlen, "model: vocab entry %zu has a score outside float32", i);
      return -1;
    }
    memcpy(s->piece_bytes + off, json_object_get_string(p), len);
    off += len;
    s->piece_offsets[i + 1] = (uint32_t)off;
    s->scores[i] = (float)score;
    s->types[i] = TOK_NORMAL;
  }
  return 0;
}

static int parse_types(json_object *root, json_object *model, tok_spec *s, char *err,
                       size_t errlen) {
  json_object *added = get(root, "added_tokens", json_type_array);
  size_t n = added ? json_object_array_length(added) : 0;
  for (size_t i = 0; i < n; i++) {
    json_object *t = json_object_array_get_idx(added, i);
    json_object *id = get(t, "id", json_type_int);
    json_object *content = get(t, "content", json_type_string);
    json_object *special = get(t, "special", json_type_boolean);
    if (!id || !content) {
      tok_err(err, errlen, "added_tokens[%zu]: no integer id or string content", i);
      return -1;
    }
    int64_t k = json_object_get_int64(id);
    if (k >= s->n_pieces) continue; /* beyond the vocabulary: text never segments into it */
    if (k < 0 ||
        (size_t)json_object_get_string_len(content) !=
            s->piece_offsets[k + 1] - s->piece_offsets[k] ||
        memcmp(s->piece_bytes + s->piece_offsets[k], json_object_get_string(content),
               s->piece_offsets[k + 1] - s->piece_offsets[k]) != 0) {
      tok_err(err, errlen, "added_tokens[%zu]: id %lld is not that piece of the vocabulary", i,
              (long long)k);
      return -1;
    }
    s->types[k] = special && json_object_get_boolean(special) ? TOK_CONTROL : TOK_USER_DEFINED;
  }
  json_object *bf = get(model, "byte_fallback", json_type_boolean);
  s->byte_fallback = bf && json_object_get_boolean(bf);
  if (s->byte_fallback)
    for (int32_t i = 0; i < s->n_pieces; i++) {
      const uint8_t *p = s->piece_bytes + s->piece_offsets[i];
      size_t len = s->piece_offsets[i + 1] - s->piece_offsets[i];
      if (s->types[i] == TOK_NORMAL && len == 6 && memcmp(p, "<0x", 3) == 0 && p[5] == '>')
        s->types[i] = TOK_BYTE;
    }
  json_object *unk = get(model, "unk_id", json_type_int);
  if (!unk) {
    tok_err(err, errlen, "model: no integer unk_id");
    return -1;
  }
  int64_t u = json_object_get_int64(unk);
  if (u < 0 || u >= s->n_pieces) {
    tok_err(err, errlen, "model: unk_id %lld outside the %d pieces", (long long)u, s->n_pieces);
    return -1;
  }
  s->types[u] = TOK_UNKNOWN;
  return 0;
}

int tok_hfjson_parse(const char *json, size_t n, tok_spec *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  json_object *root = NULL;
  if (io_json_parse(json, n, TOK_MAX_FILE_BYTES, &root, err, errlen)) return -1;
  tok_spec s = {0};
  int rc = -1;
  json_object *model = get(root, "model", json_type_object);
  const char *type = get_str(model, "type");
  if (!type || strcmp(type, "Unigram") != 0) {
    tok_err(err, errlen, "model: type must be \"Unigram\" (SentencePiece unigram)");
    goto done;
  }
  if (parse_vocab(model, &s, err, errlen) || parse_types(root, model, &s, err, errlen) ||
      parse_charsmap(root, &s, err, errlen) || parse_metaspace(root, &s, err, errlen) ||
      tok_spec_special_ids(&s, "</s>", "<pad>", "<s>", err, errlen))
    goto done;
  *out = s;
  rc = 0;
done:
  if (rc) tok_spec_free(&s);
  json_object_put(root);
  return rc;
}
