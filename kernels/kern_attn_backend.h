/* The attention backends by name (--attn), for every build: the CPU build
 * parses and reports the flag too, and kern_attn.h runs the backends. */
#ifndef KERN_ATTN_BACKEND_H
#define KERN_ATTN_BACKEND_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  KERN_ATTN_AUTO = 0,
  KERN_ATTN_CUDNN = 1,
  KERN_ATTN_FLASH = 2,
  KERN_ATTN_SIMPLE = 3,
  KERN_ATTN_CUDNN_FP8 = 4, /* fp8 e4m3 through cuDNN; only when asked for, never by auto */
  KERN_ATTN_FA3 = 5,       /* own Hopper kernel (sm_90); elsewhere what auto does */
  KERN_ATTN_FA3_INT8 = 6,  /* its 8-bit scheme (Q, K int8); only when asked for, sm_90 only */
} kern_attn_backend;

/* "auto" | "cudnn" | "flash" | "simple" | "cudnn-fp8" | "fa3" | "fa3-int8" -> *out; SP_OK, or SP_ERR_INPUT
 * (logged, naming the value and the choices) for anything else. */
int kern_attn_backend_parse(const char *s, kern_attn_backend *out);
const char *kern_attn_backend_name(kern_attn_backend b);

#ifdef __cplusplus
}
#endif

#endif
