/* A prompt's text as the text encoder takes it (t5_file.h): Wan's default
 * negative prompt, and a prompt cleaned and tokenized. */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "t5_file.h"
#include "tokenizer.h"

const char t5_wan_negative_prompt[] =
    "色调艳丽，过曝，静态，细节模糊不清，字幕，风格，作品，画作，画面，静止，整体发灰，"
    "最差质量，低质量，JPEG压缩残留，丑陋的，残缺的，多余的手指，画得不好的手部，"
    "画得不好的脸部，畸形的，毁容的，形态畸形的肢体，手指融合，静止不动的画面，"
    "杂乱的背景，三条腿，背景人很多，倒着走";

const char *t5_negative_or_default(const char *text) {
  if (!text) return t5_wan_negative_prompt;
  char *clean = NULL, err[256];
  size_t clean_len = 0;
  /* Invalid UTF-8 is kept: t5_prompt_tokenize refuses it, naming it. */
  int blank = tok_clean_wan(text, strlen(text), &clean, &clean_len, err, sizeof err) == 0 &&
              clean_len == 0;
  free(clean);
  return blank ? t5_wan_negative_prompt : text;
}

int t5_prompt_tokenize(const tok_model *tok, const char *text, size_t len, const char *where,
                       int32_t *ids, int64_t *n) {
  char err[256], *clean = NULL;
  size_t clean_len = 0;
  if (tok_clean_wan(text, len, &clean, &clean_len, err, sizeof err) != 0) {
    sp_log_error("%s: %s", where, err);
    return SP_ERR_INPUT;
  }
  free(clean);
  if (clean_len == 0) {
    sp_log_error("%s: the prompt is empty (after Wan's cleaning): there is nothing to encode",
                 where);
    return SP_ERR_INPUT;
  }
  size_t got = 0, dropped = 0;
  if (tok_prompt_encode(tok, text, len, TOK_CONTEXT, ids, &got, &dropped) != SP_OK) {
    sp_log_error("%s: not encoded", where);
    return SP_ERR_INPUT;
  }
  if (dropped) sp_log_warn("%s: %zu tokens dropped (the prompt keeps %zu)", where, dropped, got);
  *n = (int64_t)got;
  return SP_OK;
}
