/* The 8-bit attention schemes of --attn fa3-int8 and fa3-fp8 (kern_attn.h,
 * kernels/cuda/sm90a/fa3_int8.cu, fa3_fp8.cu) on the CPU, written from their
 * descriptions, as the "plain implementation" whose error the GPU's is held to
 * (STYLE.md 9): tests/gpu/test_attention.c. */
#ifndef SP_TEST_ATTN8_H
#define SP_TEST_ATTN8_H

#include <stdint.h>

/* An attention's inputs and the rows computed: q (Lq, heads, hd), k, v
 * (Lk, heads, hd), the fp32 values of the bf16 inputs; the softmax scale;
 * the kernel's tiles of bm query rows and bn keys; the query rows
 * rows[0..nrows) whose output is made. */
typedef struct sp_test_attn8_in {
  const float *q, *k, *v;
  int64_t Lq, Lk, heads, hd;
  double scale;
  int bm, bn;
  const int64_t *rows;
  int64_t nrows;
  int l_e4m3; /* fa3-fp8: l sums the e4m3 P (kern_attn_fa3_fp8_l_e4m3), else the fp32 P */
} sp_test_attn8_in;

/* fa3-int8: K minus its mean over the tokens (per head and channel, double);
 * Q per tile of bm query rows and the smoothed K per tile of bn keys, per
 * head, quantised to int8 at scale amax / 127 (x / scale rounded to nearest
 * even in fp32, clamped to +-127); scores = the integer dot product times
 * both tiles' scales and `scale`; softmax in double; the probabilities
 * rounded to bf16 for P V, their sum taken unrounded; the output rounded to
 * bf16. out (nrows, heads, hd). */
void sp_test_attn_int8(const sp_test_attn8_in *a, float *out);

/* fa3-fp8: Q and K as sp_test_attn_int8; V per head and channel: amax over
 * the keys, codes e4m3(v (448 / amax)) (the product in fp32, round to
 * nearest even, saturating), scale amax / 448 (1 for an all-zero channel);
 * the softmax online over the key tiles of bn keys, last tile first, as the
 * kernel takes them (in double, log2 domain): per tile the running max m,
 * the earlier O and l times 2^(m_old - m), P = 2^KERN_ATTN_FP8_PLOG2 2^(s - m)
 * (kern_attn_backend.h) rounded to e4m3 for P V, and summed into l rounded
 * (l_e4m3) or not; the output (O / l) times the channel's scale, rounded
 * to bf16. */
void sp_test_attn_fp8(const sp_test_attn8_in *a, float *out);

#endif
