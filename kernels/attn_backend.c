/* The attention backends by name and auto's rule (kern_attn_backend.h). */
#include <string.h>

#include "kern_attn_backend.h"
#include "log.h"

static const char *const names[] = {"auto", "cudnn", "flash", "simple", "fa3", "fa3-int8",
                                    "fa3-fp8"};
enum { NNAMES = (int)(sizeof names / sizeof *names) };

int kern_attn_backend_parse(const char *s, kern_attn_backend *out) {
  for (int i = 0; i < NNAMES; i++)
    if (s && strcmp(s, names[i]) == 0) {
      *out = (kern_attn_backend)i;
      return SP_OK;
    }
  if (s && strcmp(s, "cudnn-fp8") == 0) {
    sp_log_error("--attn: 'cudnn-fp8' is not a backend (cuDNN's fp8 attention did not rerun "
                 "bit-identically); the 8-bit attentions are fa3-int8 and fa3-fp8");
    return SP_ERR_INPUT;
  }
  sp_log_error("--attn: '%s' is not auto, cudnn, flash, simple, fa3, fa3-int8 or fa3-fp8",
               s ? s : "(null)");
  return SP_ERR_INPUT;
}

const char *kern_attn_backend_name(kern_attn_backend b) {
  return (int)b >= 0 && (int)b < NNAMES ? names[b] : "?";
}

/* Measured on one H100 80GB (cuDNN 9.14 at run time, bf16, 40 heads of
 * 128, kernels/cuda/sm90a/README.md "Measured"; test_attention_bench
 * --bench in one run), TFLOP/s:
 *
 *   shape                    cudnn    fa3
 *   self 32,760 x 32,760     568.0    647.1
 *   self 75,600 x 75,600     577.8    651.9
 *   cross 32,760 x 512       594.3    515.4
 *   cross 75,600 x 512       592.8    509.2
 *
 * (other H100 runs: fa3 665-694 at the self shapes, cuDNN 589-604 beside
 * it). fa3 wins by 12-14% once the keys are many and loses by 13% at 512
 * keys, where loading Q and writing O weigh more against four key tiles.
 * The rule takes fa3 from the shortest key count measured faster and
 * leaves everything unmeasured (keys between 512 and 32,760, head dim 64)
 * to cuDNN, the fallback that was there before. */
kern_attn_backend kern_attn_auto_rule(const kern_attn_shape *s, int fa3) {
  if (fa3 && s->hd == 128 && s->Lk >= KERN_ATTN_FA3_MIN_KEYS) return KERN_ATTN_FA3;
  return KERN_ATTN_CUDNN;
}

kern_attn_backend kern_attn_8bit_rule(const kern_attn_shape *s, kern_attn_backend eight) {
  if (s->hd == 128 && s->Lk < KERN_ATTN_FA3_MIN_KEYS) return KERN_ATTN_CUDNN;
  return eight;
}

kern_attn_backend kern_attn_int8_rule(const kern_attn_shape *s) {
  return kern_attn_8bit_rule(s, KERN_ATTN_FA3_INT8);
}
