/* Encoding: SentencePiece's normaliser, the unigram Viterbi segmentation
 * and the id post-processing (tokenizer.h, TOKENIZER.md "Encoding"). */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "tok_internal.h"

static const char kSpace[] = "\xe2\x96\x81"; /* U+2581, SentencePiece's escaped space */

/* Length of the UTF-8 character starting with byte c, from its lead byte
 * alone, as SentencePiece's OneCharLen. */
static size_t one_char_len(uint8_t c) { return (size_t)("\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[c >> 4]); }

/* ---- normalisation ------------------------------------------------------------ */

static inline uint32_t darts_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

/* SentencePiece's NormalizePrefix: the longest user-defined piece at s
 * (kept as it is), else the longest match in the map (its replacement),
 * else one character unchanged. Sets *rep, *rep_len and returns the input
 * bytes consumed (>= 1). The text is valid UTF-8 (checked on entry). */
static size_t normalize_prefix(const tok_model *m, const uint8_t *s, size_t n, const uint8_t **rep,
                               size_t *rep_len) {
  if (m->has_user_defined) {
    size_t best = 0;
    uint32_t node = 0;
    for (size_t k = 0; k < n; k++) {
      node = tok_trie_next(&m->pieces, node, s[k]);
      if (!node) break;
      int32_t id = m->pieces.value[node];
      if (id >= 0 && m->s.types[id] == TOK_USER_DEFINED) best = k + 1;
    }
    if (best) {
      *rep = s;
      *rep_len = best;
      return best;
    }
  }
  if (m->darts) {
    const uint32_t *a = m->darts;
    const uint32_t units = m->darts_units;
    size_t best = 0;
    uint32_t value = 0, pos = darts_offset(a[0]);
    for (size_t k = 0; k < n; k++) {
      pos ^= s[k];
      if (pos >= units) break;
      uint32_t u = a[pos];
      if ((u & ((1u << 31) | 0xffu)) != s[k]) break;
      pos ^= darts_offset(u);
      if ((u >> 8) & 1) {
        if (pos >= units) break; /* tok_model_create ruled this out */
        best = k + 1;
        value = a[pos] & ((1u << 31) - 1);
      }
    }
    if (best && value < m->norm_bytes) {
      *rep = m->norm + value;
      *rep_len = strlen((const char *)*rep); /* the strings end with NUL (checked) */
      return best;
    }
  }
  size_t len = one_char_len(s[0]);
  if (len > n) len = n;
  *rep = s;
  *rep_len = len;
  return len;
}

/* SentencePiece's Normalizer::Normalize for a model without
 * treat_whitespace_as_suffix (refused at import). */
static void normalize(const tok_model *m, const uint8_t *s, size_t n, tok_buf *out) {
  const tok_spec *sp = &m->s;
  const uint8_t *rep;
  size_t rep_len;
  if (sp->remove_extra_whitespaces) {
    while (n) {
      size_t used = normalize_prefix(m, s, n, &rep, &rep_len);
      if (!(rep_len == 1 && rep[0] == ' ')) break;
      s += used, n -= used;
    }
  }
  if (!n) return;
  if (sp->add_dummy_prefix) tok_buf_put(out, sp->escape_whitespaces ? kSpace : " ", sp->escape_whitespaces ? 3 : 1);
  int prev_space = sp->remove_extra_whitespaces;
  while (n) {
    size_t used = normalize_prefix(m, s, n, &rep, &rep_len);
    while (prev_space && rep_len && rep[0] == ' ') rep++, rep_len--;
    if (rep_len) {
      for (size_t k = 0; k < rep_len; k++) {
        if (sp->escape_whitespaces && rep[k] == ' ')
          tok_buf_put(out, kSpace, 3);
        else
          tok_buf_put(out, rep + k, 1);
      }
      prev_space = rep[rep_len - 1] == ' ';
    }
    s += used, n -= used;
    if (!sp->remove_extra_whitespaces) prev_space = 0;
  }
  if (sp->remove_extra_whitespaces) {
    const char *space = sp->escape_whitespaces ? kSpace : " ";
    size_t sl = sp->escape_whitespaces ? 3 : 1;
    while (out->n >= sl && memcmp(out->p + out->n - sl, space, sl) == 0) out->n -= sl;
  }
}

/* ---- Viterbi ---------------------------------------------------------------------
 * SentencePiece's optimised unigram encoder: positions are bytes; for each
 * end position the best path's score, its last piece and where that piece
 * starts. Scores and comparisons follow its C++ types exactly: a piece's
 * score is widened to double (a user-defined piece scores
 * length_in_bytes * max_score - 0.1), added to the float path score in
 * double, compared in double with the stored float and stored as float;
 * the unknown piece (min_score - 10, in float) is added and compared in
 * float. Ties keep the first candidate: shorter pieces and earlier starts
 * come first. */

typedef struct best {
  float score;
  int32_t id;
  int32_t start; /* -1: not reached */
} best;

typedef struct seg {
  int32_t id;
  size_t start, end;
} seg;

static seg *viterbi(const tok_model *m, const uint8_t *s, size_t size, size_t *n_out) {
  best *b = sp_xmalloc((size + 1) * sizeof *b);
  for (size_t i = 0; i <= size; i++) b[i] = (best){0.0f, -1, -1};
  const float unk_score = m->min_score - 10.0f; /* SentencePiece's kUnkPenalty */
  size_t start = 0;
  while (start < size) {
    const float here = b[start].score;
    size_t mblen = one_char_len(s[start]);
    if (mblen > size - start) mblen = size - start;
    int single = 0;
    uint32_t node = 0;
    for (size_t k = start; k < size; k++) {
      node = tok_trie_next(&m->pieces, node, s[k]);
      if (!node) break;
      int32_t id = m->pieces.value[node];
      if (id < 0 || m->s.types[id] == TOK_UNUSED) continue;
      size_t length = k + 1 - start;
      double score = m->s.types[id] == TOK_USER_DEFINED
                         ? (double)((float)length * m->max_score) - 0.1
                         : (double)m->s.scores[id];
      double cand = score + (double)here;
      best *t = &b[k + 1];
      if (t->start == -1 || cand > (double)t->score) {
        t->score = (float)cand;
        t->start = (int32_t)start;
        t->id = id;
      }
      if (length == mblen) single = 1;
    }
    if (!single) {
      best *t = &b[start + mblen];
      float cand = unk_score + here;
      if (t->start == -1 || cand > t->score) {
        t->score = cand;
        t->start = (int32_t)start;
        t->id = m->s.unk_id;
      }
    }
    start += mblen;
  }
  size_t count = 0;
  for (size_t end = size; end > 0; end = (size_t)b[end].start) count++;
  seg *out = sp_xmalloc((count ? count : 1) * sizeof *out);
  size_t i = count;
  for (size_t end = size; end > 0; end = (size_t)b[end].start)
    out[--i] = (seg){b[end].id, (size_t)b[end].start, end};
  free(b);
  *n_out = count;
  return out;
}

/* ---- ids ------------------------------------------------------------------------- */

int tok_model_encode(const tok_model *m, const char *text, size_t len, int32_t **ids, size_t *n,
                     char *err, size_t errlen) {
  if (tok_text_check(text, len, "text of ", err, errlen) != 0) return -1;
  tok_buf norm = {0};
  normalize(m, (const uint8_t *)text, len, &norm);
  if (norm.over) {
    free(norm.p);
    tok_err(err, errlen, "text normalises to more than %u bytes", TOK_MAX_NORMALIZED_BYTES);
    return -1;
  }
  size_t nseg = 0;
  seg *segs = norm.n ? viterbi(m, norm.p, norm.n, &nseg) : NULL;
  /* Unknown pieces: each byte as its <0xNN> piece with byte fallback, else
   * a run of them merged into one unknown id (SentencePiece's
   * PopulateSentencePieceText). */
  size_t cap = 0;
  for (size_t i = 0; i < nseg; i++)
    cap += segs[i].id == m->s.unk_id && m->s.byte_fallback ? segs[i].end - segs[i].start : 1;
  int32_t *out = cap ? sp_xmalloc(cap * sizeof *out) : NULL;
  size_t k = 0;
  int prev_unk = 0;
  for (size_t i = 0; i < nseg; i++) {
    int unk = segs[i].id == m->s.unk_id;
    if (unk && m->s.byte_fallback) {
      for (size_t j = segs[i].start; j < segs[i].end; j++) out[k++] = m->byte_id[norm.p[j]];
    } else if (!(unk && prev_unk)) {
      out[k++] = segs[i].id;
    }
    prev_unk = unk;
  }
  free(segs);
  free(norm.p);
  *ids = out;
  *n = k;
  return 0;
}

int tok_prompt_encode(const tok_model *m, const char *prompt, size_t len, int max_tokens,
                      int32_t *ids, size_t *n, size_t *dropped) {
  char err[256];
  if (max_tokens < 2 || max_tokens > TOK_CONTEXT) {
    sp_log_error("prompt: max_tokens %d, accepted 2..%d", max_tokens, TOK_CONTEXT);
    return SP_ERR_INPUT;
  }
  char *clean = NULL;
  size_t clean_len = 0;
  if (tok_clean_wan(prompt, len, &clean, &clean_len, err, sizeof err)) {
    sp_log_error("prompt: %s", err);
    return SP_ERR_INPUT;
  }
  int32_t *all = NULL;
  size_t count = 0;
  if (tok_model_encode(m, clean, clean_len, &all, &count, err, sizeof err)) {
    free(clean);
    sp_log_error("prompt (after cleaning): %s", err);
    return SP_ERR_INPUT;
  }
  free(clean);
  if (count == 0) sp_log_warn("prompt is empty: it is encoded as the end-of-sequence token alone");
  size_t keep = count < (size_t)max_tokens - 1 ? count : (size_t)max_tokens - 1;
  if (keep < count)
    sp_log_warn("prompt is %zu tokens, more than the %d a prompt holds: the last %zu tokens are "
                "dropped",
                count + 1, max_tokens, count - keep);
  if (keep) memcpy(ids, all, keep * sizeof *ids);
  ids[keep] = m->s.eos_id;
  free(all);
  *n = keep + 1;
  *dropped = count - keep;
  return SP_OK;
}
