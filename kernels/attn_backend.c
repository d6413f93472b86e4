/* The attention backends by name (kern_attn_backend.h). */
#include <string.h>

#include "kern_attn_backend.h"
#include "log.h"

static const char *const names[] = {"auto", "cudnn", "flash", "simple", "cudnn-fp8", "fa3",
                                     "fa3-int8"};
enum { NNAMES = (int)(sizeof names / sizeof *names) };

int kern_attn_backend_parse(const char *s, kern_attn_backend *out) {
  for (int i = 0; i < NNAMES; i++)
    if (s && strcmp(s, names[i]) == 0) {
      *out = (kern_attn_backend)i;
      return SP_OK;
    }
  sp_log_error("--attn: '%s' is not auto, cudnn, flash, simple, cudnn-fp8, fa3 or fa3-int8", s ? s : "(null)");
  return SP_ERR_INPUT;
}

const char *kern_attn_backend_name(kern_attn_backend b) {
  return (int)b >= 0 && (int)b < NNAMES ? names[b] : "?";
}
