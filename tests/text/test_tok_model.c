/* The tokenizer on a hand-made vocabulary whose segmentations are worked
 * out by hand below; the spec's round trip through its arrays; hostile
 * specs, protobuf and tokenizer.json refused; the prompt rules (empty,
 * truncation with the dropped count, invalid UTF-8). The parity with the
 * sentencepiece library on trained models is test_spm_parity.sh. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sp_test.h"
#include "tokenizer.h"

typedef struct row {
  const char *piece;
  float score;
  int type;
} row;

#define SP "\xe2\x96\x81" /* U+2581 */

/* ids:            0        1       2        3      4     5      6          7       8    9 */
static const row kVocab[] = {
    {"<pad>", 0, TOK_CONTROL}, {"</s>", 0, TOK_CONTROL}, {"<unk>", 0, TOK_UNKNOWN},
    {SP, -2.0f, TOK_NORMAL},   {"a", -3.0f, TOK_NORMAL},  {"b", -3.5f, TOK_NORMAL},
    {SP "ab", -4.0f, TOK_NORMAL}, {"ab", -2.5f, TOK_NORMAL}, {"c", -5.0f, TOK_NORMAL},
    {"zz", -1.0f, TOK_UNUSED},
};
#define NV ((int)(sizeof kVocab / sizeof kVocab[0]))

static void spec_build(tok_spec *s, const row *v, int n) {
  memset(s, 0, sizeof *s);
  size_t bytes = 0;
  for (int i = 0; i < n; i++) bytes += strlen(v[i].piece);
  s->n_pieces = n;
  s->piece_bytes = malloc(bytes);
  s->piece_offsets = calloc((size_t)n + 1, sizeof *s->piece_offsets);
  s->scores = malloc((size_t)n * sizeof *s->scores);
  s->types = malloc((size_t)n);
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    memcpy(s->piece_bytes + off, v[i].piece, strlen(v[i].piece));
    off += strlen(v[i].piece);
    s->piece_offsets[i + 1] = (uint32_t)off;
    s->scores[i] = v[i].score;
    s->types[i] = (uint8_t)v[i].type;
  }
  s->unk_id = 2, s->eos_id = 1, s->pad_id = 0, s->bos_id = -1;
  s->add_dummy_prefix = s->remove_extra_whitespaces = s->escape_whitespaces = 1;
}

static int ids_eq(const tok_model *m, const char *text, const int32_t *want, size_t nwant) {
  char err[256];
  int32_t *ids = NULL;
  size_t n = 0;
  if (tok_model_encode(m, text, strlen(text), &ids, &n, err, sizeof err)) {
    printf("encode '%s' failed: %s\n", text, err);
    return 0;
  }
  int ok = n == nwant && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
  if (!ok) {
    printf("'%s': got", text);
    for (size_t i = 0; i < n; i++) printf(" %d", ids[i]);
    printf(", want");
    for (size_t i = 0; i < nwant; i++) printf(" %d", want[i]);
    printf("\n");
  }
  free(ids);
  return ok;
}

#define IDS(...) ((const int32_t[]){__VA_ARGS__}), sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t)

/* Segmentations worked out from the scores:
 *   "ab"  -> "▁ab": ▁ab -4 beats ▁+ab -4.5 and ▁+a+b -8.5           -> 6
 *   "b a" -> "▁b▁a": ▁+b (-5.5), ▁+a (-5)                          -> 3 5 3 4
 *   "xy"  -> "▁xy": ▁ then two unknown characters, merged into one   -> 3 2
 *   "x ab y" -> ▁ x(unk) ▁ab ▁ y(unk): unknowns apart stay apart    -> 3 2 6 3 2
 *   "zz"  -> the unused piece never segments: ▁ + two unknowns       -> 3 2
 *   "  a   b  " -> spaces trimmed and collapsed: "▁a▁b"              -> 3 4 3 5 */
static void check_segmentation(const tok_model *m) {
  CHECK(ids_eq(m, "ab", IDS(6)), "ab");
  CHECK(ids_eq(m, "b a", IDS(3, 5, 3, 4)), "b a");
  CHECK(ids_eq(m, "xy", IDS(3, 2)), "xy");
  CHECK(ids_eq(m, "x ab y", IDS(3, 2, 6, 3, 2)), "x ab y");
  CHECK(ids_eq(m, "zz", IDS(3, 2)), "zz");
  CHECK(ids_eq(m, "  a   b  ", IDS(3, 4, 3, 5)), "spaces");
  CHECK(ids_eq(m, "", NULL, 0), "empty");
  CHECK(ids_eq(m, "    ", NULL, 0), "only spaces");
}

static tok_model *create_ok(const tok_spec *s) {
  char err[256];
  tok_model *m = NULL;
  if (tok_model_create(s, &m, err, sizeof err)) {
    printf("create failed: %s\n", err);
    return NULL;
  }
  return m;
}

static void check_refused(tok_spec *s, const char *what) {
  char err[256] = "";
  tok_model *m = NULL;
  int rc = tok_model_create(s, &m, err, sizeof err);
  CHECK(rc == -1 && m == NULL && err[0], "%s: accepted", what);
  if (rc == 0) tok_model_free(m);
  else printf("refused as expected (%s): %s\n", what, err);
}

/* Each mutation of a good spec must be refused with a message. */
static void check_hostile_specs(void) {
  tok_spec s;
  tok_model *m;
#define MUTATE(what, stmt)   \
  do {                       \
    spec_build(&s, kVocab, NV); \
    stmt;                    \
    check_refused(&s, what); \
    tok_spec_free(&s);       \
  } while (0)
  MUTATE("duplicate piece", memcpy(s.piece_bytes + s.piece_offsets[5], "a", 1));
  MUTATE("type 7", s.types[4] = 7);
  MUTATE("nan score", s.scores[4] = NAN);
  MUTATE("unk id on a normal piece", s.unk_id = 4);
  MUTATE("second unknown", s.types[8] = TOK_UNKNOWN);
  MUTATE("eos on a normal piece", s.eos_id = 3);
  MUTATE("eos out of range", s.eos_id = NV);
  MUTATE("empty piece", s.piece_offsets[5] = s.piece_offsets[4]);
  MUTATE("invalid utf-8 piece", s.piece_bytes[s.piece_offsets[4]] = (uint8_t)0xff);
  MUTATE("byte piece without byte_fallback", s.types[4] = TOK_BYTE);
  MUTATE("byte_fallback without byte pieces", s.byte_fallback = 1);
  MUTATE("offsets past the bytes", s.piece_offsets[NV] = 1u << 30);
  MUTATE("flag 2", s.add_dummy_prefix = 2);
  /* Normalisation maps: the 4-byte trie size, units, strings. */
  static const uint8_t root_only[] = {4, 0, 0, 0, 0, 0, 0, 0, 'x', 0};
  static const uint8_t no_nul[] = {4, 0, 0, 0, 0, 0, 0, 0, 'x'};
  static const uint8_t odd_trie[] = {5, 0, 0, 0, 0, 0, 0, 0, 0, 'x', 0};
  static const uint8_t trie_past_end[] = {200, 0, 0, 0, 0, 0, 0, 0, 'x', 0};
  /* Two units: root offset 0; unit 1 has label 1, the leaf flag and
   * offset 64 (bits 10+), so its value unit 1 ^ 64 lies outside. */
  static const uint8_t root_out[] = {8, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x01, 0x01, 0x00, 'x', 0};
  /* Darts units (little-endian uint32): label in bits 0-7, leaf flag bit
   * 8, offset from bit 10; a leaf's value unit holds the string offset.
   * Root offset 0, child label 1 at unit 1 (leaf, offset 3 -> unit 2),
   * whose value 0x70000000 lies far past the 2 string bytes. */
  static const uint8_t value_out[] = {12, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x0d, 0, 0,
                                      0, 0, 0, 0x70, 'x', 0};
  const struct {
    const char *what;
    const uint8_t *p;
    uint32_t n;
  } maps[] = {{"map without NUL", no_nul, sizeof no_nul},
              {"trie size not a multiple of 4", odd_trie, sizeof odd_trie},
              {"trie past the end", trie_past_end, sizeof trie_past_end},
              {"value unit outside", root_out, sizeof root_out},
              {"leaf value outside the strings", value_out, sizeof value_out}};
  for (size_t i = 0; i < sizeof maps / sizeof maps[0]; i++) {
    spec_build(&s, kVocab, NV);
    s.charsmap = malloc(maps[i].n);
    memcpy(s.charsmap, maps[i].p, maps[i].n);
    s.charsmap_bytes = maps[i].n;
    check_refused(&s, maps[i].what);
    tok_spec_free(&s);
  }
  /* A map "x" -> "ab": root offset 121 so 'x' (120) lands on unit 1
   * (121 ^ 120); unit 1: label 'x', leaf, offset 3 -> unit 2; unit 2: a
   * value unit (top bit set) with value 0, the string "ab". Then "x" reads
   * as "ab" (-> ▁ab, id 6) and "xx" as "abab" (▁ab -4 + ab -2.5 beats
   * ▁ + ab + ab -7: ids 6 7). */
  static const uint8_t x_to_ab[] = {12, 0, 0, 0, 0x00, 0xe4, 0x01, 0x00, 0x78, 0x0d, 0, 0,
                                    0, 0, 0, 0x80, 'a', 'b', 0};
  spec_build(&s, kVocab, NV);
  s.charsmap = malloc(sizeof x_to_ab);
  memcpy(s.charsmap, x_to_ab, sizeof x_to_ab);
  s.charsmap_bytes = sizeof x_to_ab;
  m = create_ok(&s);
  CHECK(m != NULL, "x -> ab map refused");
  if (m) {
    CHECK(ids_eq(m, "x", IDS(6)), "map x");
    CHECK(ids_eq(m, "xx", IDS(6, 7)), "map xx");
    CHECK(ids_eq(m, "b x", IDS(3, 5, 6)), "map b x");
  }
  tok_model_free(m);
  tok_spec_free(&s);
  /* A map with a root and nothing else is valid: identity. */
  spec_build(&s, kVocab, NV);
  s.charsmap = malloc(sizeof root_only);
  memcpy(s.charsmap, root_only, sizeof root_only);
  s.charsmap_bytes = sizeof root_only;
  m = create_ok(&s);
  CHECK(m != NULL, "root-only map refused");
  if (m) check_segmentation(m);
  tok_model_free(m);
  tok_spec_free(&s);
#undef MUTATE
}

/* ---- a protobuf writer for the test (independent of the parser) ---------- */

typedef struct pbw {
  uint8_t b[4096];
  size_t n;
} pbw;

static void w_varint(pbw *w, uint64_t v) {
  do {
    uint8_t c = v & 0x7f;
    v >>= 7;
    w->b[w->n++] = c | (v ? 0x80 : 0);
  } while (v);
}
static void w_bytes(pbw *w, int field, const void *p, size_t n) {
  w_varint(w, (uint64_t)field << 3 | 2);
  w_varint(w, n);
  memcpy(w->b + w->n, p, n);
  w->n += n;
}
static void w_uint(pbw *w, int field, uint64_t v) {
  w_varint(w, (uint64_t)field << 3);
  w_varint(w, v);
}

static void proto_of(const row *v, int n, pbw *out, int extra_trainer_field) {
  out->n = 0;
  for (int i = 0; i < n; i++) {
    pbw p = {.n = 0};
    w_bytes(&p, 1, v[i].piece, strlen(v[i].piece));
    w_varint(&p, 2 << 3 | 5);
    memcpy(p.b + p.n, &v[i].score, 4); /* little-endian host (x86, arm64) */
    p.n += 4;
    if (v[i].type != TOK_NORMAL) w_uint(&p, 3, (uint64_t)v[i].type);
    w_bytes(out, 1, p.b, p.n);
  }
  pbw t = {.n = 0};
  w_uint(&t, 3, 1);      /* model_type UNIGRAM */
  w_uint(&t, 40, 2);     /* unk_id */
  w_uint(&t, 43, 0);     /* pad_id */
  w_uint(&t, 41, (uint64_t)-1); /* bos_id -1: a 10-byte varint */
  w_bytes(&t, 2, "prefix", 6);
  if (extra_trainer_field) w_uint(&t, extra_trainer_field, 1);
  w_bytes(out, 2, t.b, t.n);
  pbw z = {.n = 0};
  w_bytes(&z, 1, "identity", 8);
  w_uint(&z, 3, 1);
  w_bytes(out, 3, z.b, z.n);
  w_uint(out, 99, 12345); /* an unknown field, skipped */
}

static void check_protobuf(void) {
  pbw w;
  tok_spec s;
  char err[256];
  proto_of(kVocab, NV, &w, 0);
  CHECK(tok_spm_parse(w.b, w.n, &s, err, sizeof err) == 0, "parse: %s", err);
  tok_model *m = create_ok(&s);
  CHECK(m != NULL && s.eos_id == 1 && s.pad_id == 0 && s.unk_id == 2 && s.bos_id == -1,
        "special ids %d %d %d %d", s.eos_id, s.pad_id, s.unk_id, s.bos_id);
  if (m) check_segmentation(m);
  tok_model_free(m);
  tok_spec_free(&s);
  /* Refusals. */
  proto_of(kVocab, NV, &w, 24); /* treat_whitespace_as_suffix */
  CHECK(tok_spm_parse(w.b, w.n, &s, err, sizeof err) == -1, "suffix accepted");
  const uint8_t long_varint[] = {0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
  const uint8_t len_past_end[] = {0x0a, 0x7f, 0x0a, 0x01};
  const uint8_t group[] = {0x0b, 0x0c};
  const uint8_t field0[] = {0x00, 0x01};
  const uint8_t bad_type[] = {0x0a, 0x05, 0x0a, 0x01, 'a', 0x18, 0x09};
  const uint8_t bad_wire[] = {0x0a, 0x04, 0x0d, 0x00, 0x00, 0x00};
  const struct {
    const char *what;
    const uint8_t *p;
    size_t n;
  } bad[] = {{"11-byte varint", long_varint, sizeof long_varint},
             {"length past the end", len_past_end, sizeof len_past_end},
             {"group", group, sizeof group},
             {"field 0", field0, sizeof field0},
             {"piece type 9", bad_type, sizeof bad_type},
             {"piece text as fixed32 truncated", bad_wire, sizeof bad_wire}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = 0;
    int rc = tok_spm_parse(bad[i].p, bad[i].n, &s, err, sizeof err);
    CHECK(rc == -1 && err[0], "%s accepted", bad[i].what);
    if (rc == 0) tok_spec_free(&s);
  }
  /* Every truncation of a good model: refused, or a valid shorter model. */
  proto_of(kVocab, NV, &w, 0);
  for (size_t n = 0; n < w.n; n++) {
    if (tok_spm_parse(w.b, n, &s, err, sizeof err) == 0) {
      tok_model *t = NULL;
      if (tok_model_create(&s, &t, err, sizeof err) == 0) tok_model_free(t);
      tok_spec_free(&s);
    }
  }
}

static void check_hfjson(void) {
  const char *json =
      "{\"added_tokens\":[{\"id\":0,\"content\":\"<pad>\",\"special\":true},"
      "{\"id\":1,\"content\":\"</s>\",\"special\":true},{\"id\":2,\"content\":\"<unk>\",\"special\":true},"
      "{\"id\":10,\"content\":\"<extra_id_0>\",\"special\":true}],"
      "\"normalizer\":null,"
      "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"add_prefix_space\":true},"
      "\"model\":{\"type\":\"Unigram\",\"unk_id\":2,\"vocab\":[[\"<pad>\",0],[\"</s>\",0],[\"<unk>\",0],"
      "[\"\\u2581\",-2],[\"a\",-3],[\"b\",-3.5],[\"\\u2581ab\",-4],[\"ab\",-2.5],[\"c\",-5],[\"zz\",-1]]}}";
  tok_spec s;
  char err[256];
  CHECK(tok_hfjson_parse(json, strlen(json), &s, err, sizeof err) == 0, "json: %s", err);
  /* "zz" is a normal piece here (JSON has no unused type): "zz" -> ▁ zz. */
  tok_model *m = create_ok(&s);
  CHECK(m != NULL, "json model refused");
  if (m) {
    CHECK(ids_eq(m, "ab", IDS(6)), "json ab");
    CHECK(ids_eq(m, "x ab y", IDS(3, 2, 6, 3, 2)), "json x ab y");
    CHECK(ids_eq(m, "zz", IDS(3, 9)), "json zz");
  }
  tok_model_free(m);
  tok_spec_free(&s);
  const char *bad[] = {
      "{\"model\":{\"type\":\"BPE\"}}",
      "{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"a\"]]}}",
      "{\"model\":{\"type\":\"Unigram\",\"unk_id\":5,\"vocab\":[[\"a\",0]]},"
      "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\"}}",
      "{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"a\",0]]},"
      "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"_\"}}",
      "{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"a\",0]]},"
      "\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"!!!!\"},"
      "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\"}}",
      "{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"unk_id\":0,\"vocab\":[]}}",
      "{\"model\":",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = 0;
    int rc = tok_hfjson_parse(bad[i], strlen(bad[i]), &s, err, sizeof err);
    CHECK(rc == -1 && err[0], "bad json %zu accepted", i);
    if (rc == 0) tok_spec_free(&s);
  }
}

/* The arrays a model hands out rebuild a model with the same ids. */
static void check_round_trip(const tok_model *m) {
  tok_model *m2 = create_ok(tok_model_spec(m));
  CHECK(m2 != NULL, "round trip refused");
  if (!m2) return;
  const char alphabet[] = "abcxz  ";
  for (int t = 0; t < 200; t++) {
    char text[64];
    int n = (int)sp_rand_int(0, 40);
    for (int i = 0; i < n; i++) text[i] = alphabet[sp_rand_int(0, (int64_t)sizeof alphabet - 2)];
    text[n] = 0;
    char err[128];
    int32_t *a, *b;
    size_t na, nb;
    CHECK(tok_model_encode(m, text, (size_t)n, &a, &na, err, sizeof err) == 0, "%s", err);
    CHECK(tok_model_encode(m2, text, (size_t)n, &b, &nb, err, sizeof err) == 0, "%s", err);
    CHECK(na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0), "round trip differs: '%s'", text);
    free(a);
    free(b);
  }
  tok_model_free(m2);
}

/* Prompts: "a" repeated k times is k words "▁a" of two tokens each
 * (▁ -2 plus a -3 is the only path), so 600 words are 1200 tokens: 511
 * kept, 689 dropped, EOS last. */
static void check_prompts(const tok_model *m) {
  int32_t ids[TOK_CONTEXT];
  size_t n = 0, dropped = 99;
  CHECK(tok_prompt_encode(m, "", 0, TOK_CONTEXT, ids, &n, &dropped) == SP_OK && n == 1 &&
            ids[0] == 1 && dropped == 0,
        "empty prompt");
  CHECK(tok_prompt_encode(m, " \t\n ", 4, TOK_CONTEXT, ids, &n, &dropped) == SP_OK && n == 1 &&
            ids[0] == 1,
        "blank prompt");
  char *longp = malloc(1200 + 1);
  for (int i = 0; i < 600; i++) memcpy(longp + 2 * i, "a ", 2);
  longp[1200] = 0;
  CHECK(tok_prompt_encode(m, longp, 1200, TOK_CONTEXT, ids, &n, &dropped) == SP_OK && n == 512 &&
            dropped == 689 && ids[511] == 1 && ids[509] == 4 && ids[510] == 3,
        "long prompt: n %zu dropped %zu", n, dropped);
  CHECK(tok_prompt_encode(m, longp, 1200, 8, ids, &n, &dropped) == SP_OK && n == 8 && dropped == 1193,
        "cut at 8: n %zu dropped %zu", n, dropped);
  free(longp);
  CHECK(tok_prompt_encode(m, "ok\xff", 3, TOK_CONTEXT, ids, &n, &dropped) == SP_ERR_INPUT &&
            strstr(sp_log_last_error(), "invalid UTF-8 at byte 2"),
        "invalid UTF-8: %s", sp_log_last_error());
  /* Cleaning: entities twice, whitespace collapsed: "&amp;lt;b&amp;gt;" is "<b>". */
  char *out;
  size_t len;
  char err[128];
  const char *dirty = " &amp;lt;b&amp;gt; \t\n x\xe3\x80\x80y ";
  CHECK(tok_clean_wan(dirty, strlen(dirty), &out, &len, err, sizeof err) == 0 &&
            strcmp(out, "<b> x y") == 0,
        "clean: '%s'", out);
  free(out);
}

int main(void) {
  sp_test_begin("text.tok_model");
  tok_spec s;
  spec_build(&s, kVocab, NV);
  tok_model *m = create_ok(&s);
  tok_spec_free(&s);
  CHECK(m != NULL, "the hand-made vocabulary is refused");
  if (m) {
    check_segmentation(m);
    check_round_trip(m);
    check_prompts(m);
  }
  tok_model_free(m);
  check_hostile_specs();
  check_protobuf();
  check_hfjson();
  return sp_test_end();
}
