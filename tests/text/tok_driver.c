/* Test driver of the tokenizer (ranks/text/tokenizer.h), for the parity
 * tests against the sentencepiece library (spm_parity.py):
 *
 *   tok_driver MODEL TEXT...            ids of each text (SentencePiece EncodeAsIds)
 *   tok_driver --prompt MODEL TEXT...   Wan's prompt ids: cleaned, cut, EOS appended
 *   tok_driver --clean TEXT...          Wan's cleaned text
 *   --file F instead of TEXT...         the texts of F, each as a 4-byte
 *                                       little-endian length and its bytes
 *
 * One output line per text: the ids separated by spaces (--prompt adds
 * " | dropped N"), the cleaned text, or "ERR <message>" when the text is
 * refused. MODEL is a spiece.model or tokenizer.json, or a text encoder
 * (a T5 model file, a synth: spec) whose tokenizer is used. Exit 2 when
 * the model is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mfile.h"
#include "t5_file.h"
#include "tokenizer.h"

static void run_one(int mode, const tok_model *m, const char *t, size_t len) {
  char err[512];
  if (mode == 2) {
    char *out;
    size_t n;
    if (tok_clean_wan(t, len, &out, &n, err, sizeof err)) {
      printf("ERR %s\n", err);
      return;
    }
    fwrite(out, 1, n, stdout);
    putchar('\n');
    free(out);
  } else if (mode == 1) {
    int32_t ids[TOK_CONTEXT];
    size_t n, dropped;
    if (tok_prompt_encode(m, t, len, TOK_CONTEXT, ids, &n, &dropped) != SP_OK) {
      printf("ERR %s\n", sp_log_last_error());
      return;
    }
    for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf(" | dropped %zu\n", dropped);
  } else {
    int32_t *ids;
    size_t n;
    if (tok_model_encode(m, t, len, &ids, &n, err, sizeof err)) {
      printf("ERR %s\n", err);
      return;
    }
    for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    putchar('\n');
    free(ids);
  }
}

int main(int argc, char **argv) {
  int mode = 0, a = 1;
  if (a < argc && strcmp(argv[a], "--prompt") == 0) mode = 1, a++;
  else if (a < argc && strcmp(argv[a], "--clean") == 0) mode = 2, a++;
  tok_model *own = NULL;
  const tok_model *m = NULL;
  t5_model *t5 = NULL;
  if (mode != 2) {
    if (a >= argc) {
      fprintf(stderr, "usage: tok_driver [--prompt] MODEL (TEXT... | --file F); tok_driver --clean ...\n");
      return 2;
    }
    const char *path = argv[a++];
    char arch[64];
    if (strncmp(path, "synth:", 6) == 0 ||
        (mfile_arch(path, arch, sizeof arch) == 0 && strcmp(arch, T5_MODEL_ARCH) == 0)) {
      if (t5_model_open(path, 1, &t5) != SP_OK) return 2;
      if (!(m = t5_model_tokenizer(t5))) {
        fprintf(stderr, "tok_driver: %s has no tokenizer\n", path);
        return 2;
      }
    } else {
      if (tok_model_load(path, &own) != SP_OK) return 2;
      m = own;
    }
  }
  if (a + 1 < argc && strcmp(argv[a], "--file") == 0) {
    FILE *f = fopen(argv[a + 1], "rb");
    if (!f) {
      fprintf(stderr, "tok_driver: cannot open %s\n", argv[a + 1]);
      return 2;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
      n += got;
      if (n == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    for (size_t s = 0; s < n;) {
      if (n - s < 4) {
        fprintf(stderr, "tok_driver: %s: truncated length at byte %zu\n", argv[a + 1], s);
        return 2;
      }
      const unsigned char *u = (const unsigned char *)buf + s;
      size_t len = (size_t)u[0] | (size_t)u[1] << 8 | (size_t)u[2] << 16 | (size_t)u[3] << 24;
      if (len > n - s - 4) {
        fprintf(stderr, "tok_driver: %s: text at byte %zu runs past the end\n", argv[a + 1], s);
        return 2;
      }
      run_one(mode, m, buf + s + 4, len);
      s += 4 + len;
    }
    free(buf);
  } else {
    for (; a < argc; a++) run_one(mode, m, argv[a], strlen(argv[a]));
  }
  tok_model_free(own);
  t5_model_close(t5);
  return 0;
}
