/* What the tokenizer's files share inside ranks/text/ (not an API). */
#ifndef RANK_TOK_INTERNAL_H
#define RANK_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

/* A byte trie of pieces: edges in an open-addressing hash keyed by
 * (node, byte); node 0 is the root and never a child, so 0 means "none". */
typedef struct tok_trie {
  uint64_t *keys;   /* (mask + 1) (node << 8 | byte) + 1; 0 = empty slot */
  uint32_t *child;  /* (mask + 1) */
  uint64_t mask;
  int32_t *value;   /* (n_nodes) piece id ending at the node, or -1 */
  uint32_t n_nodes;
} tok_trie;

static inline uint32_t tok_trie_next(const tok_trie *t, uint32_t node, uint8_t c) {
  uint64_t key = (((uint64_t)node << 8) | c) + 1;
  uint64_t h = key * 0x9E3779B97F4A7C15ull;
  for (uint64_t i = (h ^ (h >> 29)) & t->mask;; i = (i + 1) & t->mask) {
    if (t->keys[i] == key) return t->child[i];
    if (t->keys[i] == 0) return 0;
  }
}

struct tok_model {
  tok_spec s;             /* own copy of the arrays */
  tok_trie pieces;        /* NORMAL, USER_DEFINED and UNUSED pieces: segmentation */
  tok_trie reserved;      /* CONTROL, UNKNOWN and BYTE pieces: looked up by name only */
  int has_user_defined;
  float min_score;        /* over NORMAL pieces (SentencePiece's min_score) */
  float max_score;        /* likewise, starting from FLT_MIN as SentencePiece does */
  int32_t byte_id[256];   /* <0xNN> pieces when byte_fallback, else -1 */
  const uint32_t *darts;  /* (darts_units) the map's double array, NULL when none */
  uint32_t darts_units;
  const uint8_t *norm;    /* (norm_bytes) NUL-terminated replacement strings */
  uint32_t norm_bytes;
};

/* A growing byte buffer bounded by TOK_MAX_NORMALIZED_BYTES: past it,
 * `over` is set and nothing more is stored. */
typedef struct tok_buf {
  uint8_t *p;
  size_t n, cap;
  int over;
} tok_buf;
void tok_buf_put(tok_buf *b, const void *s, size_t n);

void tok_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* An input text's admission: at most TOK_MAX_TEXT_BYTES and valid UTF-8.
 * 0, or -1 with err set ("WHAT%zu bytes, at most ..." or "invalid UTF-8 at
 * byte B"; what leads the size, "" or e.g. "text of "). */
int tok_text_check(const char *text, size_t len, const char *what, char *err, size_t errlen);

/* Id of a piece in the combined vocabulary, SentencePiece's PieceToId
 * without the unknown fallback: -1 when absent. */
int32_t tok_spec_find(const tok_spec *s, const char *piece, size_t len);

/* Allocates the arrays of a spec for n pieces of total_bytes bytes. */
int tok_spec_alloc(tok_spec *s, size_t n, size_t total_bytes, char *err, size_t errlen);

/* Finds the special ids of a parsed vocabulary by piece name (unk from the
 * UNKNOWN type; eos "</s>", pad "<pad>", bos "<s>" or the names given). */
int tok_spec_special_ids(tok_spec *s, const char *eos, const char *pad, const char *bos, char *err,
                         size_t errlen);

#endif
