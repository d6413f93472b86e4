/* The tokenizers built into the binary (tok_model_builtin, tokenizer.h):
 * each a spiece.model whose bytes the build turns into a C array
 * (ranks/text/embed_file.cmake), parsed and checked as any other. */
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "tokenizer.h"

/* ranks/text/tiny/spiece-tiny.model (the generated tok_tiny_model.c). */
extern const unsigned char tok_tiny_model[];
extern const size_t tok_tiny_model_bytes;

static const struct {
  const char *name;
  const unsigned char *bytes;
  const size_t *n;
} builtin[] = {
    {TOK_BUILTIN_TINY, tok_tiny_model, &tok_tiny_model_bytes},
};
enum { N_BUILTIN = sizeof builtin / sizeof builtin[0] };

int tok_model_builtin(const char *name, tok_model **out) {
  for (int i = 0; i < N_BUILTIN; i++) {
    if (strcmp(name, builtin[i].name) != 0) continue;
    char err[512];
    tok_spec spec = {0};
    int rc = tok_spm_parse(builtin[i].bytes, *builtin[i].n, &spec, err, sizeof err);
    if (rc == 0) rc = tok_model_create(&spec, out, err, sizeof err);
    tok_spec_free(&spec);
    if (rc != 0) { /* the build embedded a file the checks refuse */
      sp_log_error("the built-in tokenizer '%s': %s", name, err);
      return SP_ERR_RUNTIME;
    }
    return SP_OK;
  }
  sp_log_error("no built-in tokenizer is named '%s' (known: %s)", name, TOK_BUILTIN_TINY);
  return SP_ERR_INPUT;
}
