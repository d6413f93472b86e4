/* The attention backends by name (--attn), for every build: the CPU build
 * parses and reports the flag too, and kern_attn.h runs the backends. The
 * rule auto follows is here too, as a plain function of the shape, so the
 * CPU tests check it. */
#ifndef KERN_ATTN_BACKEND_H
#define KERN_ATTN_BACKEND_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  KERN_ATTN_AUTO = 0,
  KERN_ATTN_CUDNN = 1,
  KERN_ATTN_FLASH = 2,
  KERN_ATTN_SIMPLE = 3,
  KERN_ATTN_FA3 = 4,      /* own Hopper kernel (sm_90); elsewhere what auto does */
  KERN_ATTN_FA3_INT8 = 5, /* its 8-bit scheme (Q, K int8) where kern_attn_int8_rule says;
                           * only when asked for, sm_90 only */
  KERN_ATTN_FA3_FP8 = 6,  /* all-8-bit: fa3-int8's Q K^T, P and V in e4m3 for P V; the
                           * same rule and limits as fa3-int8 */
} kern_attn_backend;

/* "auto" | "cudnn" | "flash" | "simple" | "fa3" | "fa3-int8" | "fa3-fp8" -> *out;
 * SP_OK, or SP_ERR_INPUT (logged, naming the value and the choices; for
 * "cudnn-fp8", naming fa3-int8 as the 8-bit attention) for anything else. */
int kern_attn_backend_parse(const char *s, kern_attn_backend *out);
const char *kern_attn_backend_name(kern_attn_backend b);

/* One attention call's shape: Lq queries and Lk keys per head, heads
 * heads of width hd (kern_attn_params' sizes). */
typedef struct kern_attn_shape {
  int64_t Lq, Lk, heads, hd;
} kern_attn_shape;

/* Where auto starts for a shape: KERN_ATTN_FA3 (the own Hopper kernel) or
 * KERN_ATTN_CUDNN (cuDNN, which falls back to flash where it refuses the
 * shape: kern_attn_run). fa3: 1 when this build and GPU have the Hopper
 * kernel (kern_attn_fa3_available). fa3 where it was measured faster than
 * cuDNN (attn_backend.c has the numbers): head dim 128 and at least
 * KERN_ATTN_FA3_MIN_KEYS keys, the self-attention of Wan's video lengths;
 * cuDNN elsewhere (the 512-key cross-attention, shorter sequences, head
 * dim 64, where nothing was measured).
 * It reads s->hd and s->Lk only: never the query count or the heads, so
 * every chunk of queries (rows of one rank in turn) and every Ulysses rank
 * (all tokens of a share of the heads) run the same kernel for the same
 * attention, and the outputs stay bit-identical across layouts. */
kern_attn_backend kern_attn_auto_rule(const kern_attn_shape *s, int fa3);
#define KERN_ATTN_FA3_MIN_KEYS 32760

/* What --attn fa3-int8 and fa3-fp8 run for a shape: `eight` (the 8-bit
 * kernel asked for, KERN_ATTN_FA3_INT8 or KERN_ATTN_FA3_FP8), or
 * KERN_ATTN_CUDNN (what auto runs there) at head dim 128 with
 * fewer than KERN_ATTN_FA3_MIN_KEYS keys: on Wan's 512-key cross-attention
 * the 8-bit kernel measured 322 TFLOP/s against cuDNN's 594 on an H100
 * (its quantisation passes and four key tiles against the loads of Q and O),
 * so it would cost time and precision there. Head dim 64 has no other
 * kernel than fa3's, so it stays 8-bit at every length. Like auto's rule it
 * reads s->hd and s->Lk only (every chunk and Ulysses rank agree). */
kern_attn_backend kern_attn_8bit_rule(const kern_attn_shape *s, kern_attn_backend eight);
/* kern_attn_8bit_rule for fa3-int8 */
kern_attn_backend kern_attn_int8_rule(const kern_attn_shape *s);

/* fa3-fp8's key order inside each group of 16 keys, so that the S
 * accumulator of the P V step, converted to e4m3 in place, is the A
 * fragment of the 8-bit wgmma (m64nNk32) with no shuffles (PTX ISA,
 * wgmma: the fp32 D fragment gives a thread columns 8i + 2 (lane % 4) + e
 * of rows g, g + 8; the 8-bit A fragment gives its register r, byte b the
 * k index 4 (lane % 4) + b + 16 (r / 2) of row g + 8 (r % 2)).
 * KERN_ATTN_FP8_P_SRC(r, b): the accumulator register (of the 16 that
 * hold a 32-key step: register 4i + 2h + e is column 8i + 2 (lane % 4) +
 * e of row g + 8h) packed into byte b of A register r. The k slot that
 * byte meets is then 4 (lane % 4) + 2 (b / 2) + (b % 2) of its 16-group,
 * and it carries key 2 (lane % 4) + (b % 2) + 8 (b / 2): so the V^T copy
 * puts key w (0..15 of its group) at KERN_ATTN_FP8_SLOT(w).
 * tests/kernels/test_fa3_fp8_layout.c checks both against the PTX tables. */
#define KERN_ATTN_FP8_P_SRC(r, b) (4 * (2 * ((r) / 2) + (b) / 2) + 2 * ((r) % 2) + (b) % 2)
#define KERN_ATTN_FP8_SLOT(w) (4 * (((w) % 8) / 2) + 2 * ((w) / 8) + (w) % 2)
/* fa3-fp8's P is 2^KERN_ATTN_FP8_PLOG2 times the softmax weights 2^(s - m)
 * (cuda/sm90a/fa3_fp8.cu says why). */
#define KERN_ATTN_FP8_PLOG2 8

#ifdef __cplusplus
}
#endif

#endif
