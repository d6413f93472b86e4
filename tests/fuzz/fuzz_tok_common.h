/* What both tokenizer fuzz targets check once a fuzzed file parses: the
 * model builds or is refused with a message; a built model's arrays build
 * the same model again; encoding fixed texts (one per normalisation path:
 * ASCII, spaces, full-width and compatibility characters, CJK, emoji,
 * invalid UTF-8) never fails on valid text and yields only ids of pieces
 * that segmentation may produce. A silently wrong acceptance is an abort,
 * not only a memory error. */
#ifndef FUZZ_TOK_COMMON_H
#define FUZZ_TOK_COMMON_H

#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

static void fuzz_tok_check(const tok_spec *spec) {
  static const char *texts[] = {"a test", "  runs   of  spaces ", "\xef\xbc\xa1\xef\xbc\xa2 \xe2\x91\xa0 \xef\xac\x81",
                                "\xe5\x8c\x97\xe4\xba\xac <x> </s>", "\xf0\x9f\x98\x80\xe2\x80\x8d", "", "ok\xff"};
  char err[512];
  tok_model *m = NULL, *m2 = NULL;
  if (tok_model_create(spec, &m, err, sizeof err) != 0) {
    if (!err[0]) abort(); /* a refusal always says why */
    return;
  }
  if (tok_model_create(tok_model_spec(m), &m2, err, sizeof err) != 0) abort();
  const tok_spec *s = tok_model_spec(m);
  for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    size_t len = strlen(texts[t]);
    int valid = t + 1 < sizeof texts / sizeof texts[0];
    int ra = tok_model_encode(m, texts[t], len, &a, &na, err, sizeof err);
    int rb = tok_model_encode(m2, texts[t], len, &b, &nb, err, sizeof err);
    if (valid && ra != 0 && !strstr(err, "normalises to more than")) abort();
    if (!valid && ra == 0) abort();
    if (ra != rb || na != nb || (na && memcmp(a, b, na * sizeof *a))) abort();
    for (size_t i = 0; i < na; i++) {
      if (a[i] < 0 || a[i] >= s->n_pieces) abort();
      uint8_t ty = s->types[a[i]];
      if (ty == TOK_CONTROL || ty == TOK_UNUSED) abort();
      if (ty == TOK_BYTE && !s->byte_fallback) abort();
    }
    free(a);
    free(b);
  }
  tok_model_free(m2);
  tok_model_free(m);
}

#endif
