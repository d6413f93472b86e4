/* --attn names and auto's rule (kern_attn_backend.h).
 *
 * Names: every name parses to its backend and prints back as itself, fa3,
 * fa3-int8 and fa3-fp8 included; cudnn-fp8, near misses and NULL are refused with
 * SP_ERR_INPUT and leave the output untouched.
 *
 * The rule (kern_attn_auto_rule), against the measurements it rests on
 * (kernels/cuda/sm90a/README.md "Measured", H100, 40 heads of 128): fa3 on
 * the self-attention shapes where it beat cuDNN (32,760 and 75,600
 * tokens), cuDNN on the 512-key cross shapes where it lost, cuDNN wherever
 * fa3 is not available, for head dim 64 and for key counts not measured.
 *
 * fa3-int8's and fa3-fp8's rule (kern_attn_8bit_rule): the 8-bit kernel
 * asked for on the self shapes and at head dim 64, what auto runs on the
 * 512-key cross shapes.
 *
 * Layouts: for each Wan video length and head count, the shapes the CUDA
 * stage's call sites make for one attention (ranks/nets/wan_dit/cuda/):
 * the whole sequence at once, every chunk of queries of several chunk sizes
 * (stage_cuda_block.c: Lq = the chunk's rows, the last one shorter, Lk =
 * all tokens), every Ulysses group size that divides the heads
 * (stage_cuda_seq.c: Lq = Lk = all tokens, heads / U), and the warm-up
 * shapes (stage_cuda_layout.c); each must get the same backend as the
 * whole-sequence call, for self- and cross-attention (Lk = 512 context
 * rows), with fa3 available and without, and for fa3-int8 and fa3-fp8. A rule that read the query count
 * or the heads would fail here. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kern_attn_backend.h"
#include "log.h"
#include "sp_test.h"

static void test_names(void) {
  static const struct { const char *name; kern_attn_backend b; } known[] = {
      {"auto", KERN_ATTN_AUTO},   {"cudnn", KERN_ATTN_CUDNN}, {"flash", KERN_ATTN_FLASH},
      {"simple", KERN_ATTN_SIMPLE}, {"fa3", KERN_ATTN_FA3},   {"fa3-int8", KERN_ATTN_FA3_INT8},
      {"fa3-fp8", KERN_ATTN_FA3_FP8},
  };
  for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
    kern_attn_backend b = (kern_attn_backend)-1;
    CHECK(kern_attn_backend_parse(known[i].name, &b) == SP_OK && b == known[i].b,
          "'%s' did not parse to %d", known[i].name, (int)known[i].b);
    CHECK(strcmp(kern_attn_backend_name(known[i].b), known[i].name) == 0, "name of %d is '%s'",
          (int)known[i].b, kern_attn_backend_name(known[i].b));
  }
  static const char *const bad[] = {"cudnn-fp8", "fp8", "cudnn_fp8", "cudnn-fp8 ", "CUDNN", "",
                                    "cudnn-fp", "FA3", "fa3 ", "fa", "fa3-fp", "fa3_int8",
                                    "fa3-e4m3", "fa3_fp8"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    kern_attn_backend b = KERN_ATTN_FLASH;
    CHECK(kern_attn_backend_parse(bad[i], &b) == SP_ERR_INPUT && b == KERN_ATTN_FLASH,
          "'%s' was accepted or changed the output", bad[i]);
  }
  kern_attn_backend b = KERN_ATTN_FLASH;
  CHECK(kern_attn_backend_parse(NULL, &b) == SP_ERR_INPUT && b == KERN_ATTN_FLASH, "NULL accepted");
  CHECK(strcmp(kern_attn_backend_name((kern_attn_backend)7), "?") == 0, "out of range name");
}

/* mode 0, 1: auto's rule without and with fa3; INT8: fa3-int8's; FP8:
 * fa3-fp8's */
enum { INT8 = 2, FP8 = 3 };
static kern_attn_backend rule(int64_t Lq, int64_t Lk, int64_t heads, int64_t hd, int mode) {
  const kern_attn_shape s = {Lq, Lk, heads, hd};
  if (mode == INT8) return kern_attn_int8_rule(&s);
  if (mode == FP8) return kern_attn_8bit_rule(&s, KERN_ATTN_FA3_FP8);
  return kern_attn_auto_rule(&s, mode);
}

static void test_measured(void) {
  /* {Lq, Lk, faster on the H100} */
  static const struct { int64_t Lq, Lk; kern_attn_backend faster; } m[] = {
      {32760, 32760, KERN_ATTN_FA3},   /* 647.1 vs cudnn 568.0 TFLOP/s */
      {75600, 75600, KERN_ATTN_FA3},   /* 651.9 vs 577.8 */
      {32760, 512, KERN_ATTN_CUDNN},   /* 515.4 vs 594.3 */
      {75600, 512, KERN_ATTN_CUDNN},   /* 509.2 vs 592.8 */
  };
  for (size_t i = 0; i < sizeof m / sizeof *m; i++) {
    CHECK(rule(m[i].Lq, m[i].Lk, 40, 128, 1) == m[i].faster, "%lld x %lld: auto does not take %s",
          (long long)m[i].Lq, (long long)m[i].Lk, kern_attn_backend_name(m[i].faster));
    CHECK(rule(m[i].Lq, m[i].Lk, 40, 128, 0) == KERN_ATTN_CUDNN,
          "%lld x %lld without fa3: not cudnn", (long long)m[i].Lq, (long long)m[i].Lk);
    CHECK(rule(m[i].Lq, m[i].Lk, 40, 64, 1) == KERN_ATTN_CUDNN,
          "%lld x %lld at head dim 64 (not measured): not cudnn", (long long)m[i].Lq,
          (long long)m[i].Lk);
  }
  /* not measured: shorter sequences stay on cuDNN; the threshold is the
   * shortest key count measured faster */
  CHECK(rule(1560, 1560, 12, 128, 1) == KERN_ATTN_CUDNN, "1,560 tokens: not cudnn");
  CHECK(rule(KERN_ATTN_FA3_MIN_KEYS - 1, KERN_ATTN_FA3_MIN_KEYS - 1, 40, 128, 1) ==
            KERN_ATTN_CUDNN,
        "below the threshold: not cudnn");
  CHECK(rule(KERN_ATTN_FA3_MIN_KEYS, KERN_ATTN_FA3_MIN_KEYS, 40, 128, 1) == KERN_ATTN_FA3,
        "at the threshold: not fa3");
}

/* fa3-int8 (kern_attn_int8_rule): the 8-bit kernel on the self shapes, where
 * it measured 700-729 TFLOP/s against cuDNN's 568-604; what auto runs on the
 * 512-key cross shapes, where it measured 322 against cuDNN's 594; head dim
 * 64 (no other kernel takes it) 8-bit at every length. */
static void test_int8(void) {
  static const int64_t self[] = {32760, 75600, KERN_ATTN_FA3_MIN_KEYS};
  for (size_t i = 0; i < sizeof self / sizeof *self; i++) {
    CHECK(rule(self[i], self[i], 40, 128, INT8) == KERN_ATTN_FA3_INT8,
          "fa3-int8, self %lld: not the 8-bit kernel", (long long)self[i]);
    CHECK(rule(self[i], 512, 40, 128, INT8) == rule(self[i], 512, 40, 128, 1),
          "fa3-int8, cross %lld x 512: not what auto runs", (long long)self[i]);
  }
  CHECK(rule(32760, 512, 40, 128, INT8) == KERN_ATTN_CUDNN, "fa3-int8, cross: not cudnn");
  CHECK(rule(KERN_ATTN_FA3_MIN_KEYS - 1, KERN_ATTN_FA3_MIN_KEYS - 1, 40, 128, INT8) ==
            KERN_ATTN_CUDNN,
        "fa3-int8 below the threshold: not cudnn");
  static const int64_t hd64[] = {1, 90, 512, 4099, 32760};
  for (size_t i = 0; i < sizeof hd64 / sizeof *hd64; i++)
    CHECK(rule(hd64[i], hd64[i], 4, 64, INT8) == KERN_ATTN_FA3_INT8,
          "fa3-int8, head dim 64, %lld keys: not the 8-bit kernel", (long long)hd64[i]);
}

/* fa3-fp8: the same rule with its own kernel; the same backend as
 * fa3-int8's wherever that one is not the 8-bit kernel. */
static void test_fp8(void) {
  static const struct { int64_t Lq, Lk, hd; } sh[] = {
      {32760, 32760, 128}, {75600, 75600, 128}, {32760, 512, 128}, {75600, 512, 128},
      {KERN_ATTN_FA3_MIN_KEYS - 1, KERN_ATTN_FA3_MIN_KEYS - 1, 128}, {1, 1, 64},
      {4099, 4099, 64}, {32760, 512, 64}};
  for (size_t i = 0; i < sizeof sh / sizeof *sh; i++) {
    const kern_attn_backend i8 = rule(sh[i].Lq, sh[i].Lk, 40, sh[i].hd, INT8);
    const kern_attn_backend f8 = rule(sh[i].Lq, sh[i].Lk, 40, sh[i].hd, FP8);
    CHECK(i8 == KERN_ATTN_FA3_INT8 ? f8 == KERN_ATTN_FA3_FP8 : f8 == i8,
          "%lld x %lld hd %lld: fa3-fp8 runs %s where fa3-int8 runs %s", (long long)sh[i].Lq,
          (long long)sh[i].Lk, (long long)sh[i].hd, kern_attn_backend_name(f8),
          kern_attn_backend_name(i8));
  }
  CHECK(rule(32760, 32760, 40, 128, FP8) == KERN_ATTN_FA3_FP8, "fa3-fp8, self: not fp8");
  CHECK(rule(32760, 512, 40, 128, FP8) == KERN_ATTN_CUDNN, "fa3-fp8, cross: not cudnn");
}

/* Every call of one attention in every layout gets whole's backend. */
static void test_layouts(void) {
  /* Wan's token counts: 1.3B/14B 480p 81 frames, 720p 81 frames, a short
   * 480p clip, the tiny test model's; heads: 12 (1.3B), 40 (14B) */
  static const int64_t tokens[] = {32760, 75600, 14040, 90};
  static const int64_t heads[] = {12, 40};
  static const int64_t chunks[] = {4096, 8190, 1000, 7, 1};
  static const int64_t text = 512; /* context rows of the cross-attention */
  int calls = 0;
  for (int fa3 = 0; fa3 <= FP8; fa3++) /* auto without, with fa3; fa3-int8, fa3-fp8 */
    for (size_t ti = 0; ti < sizeof tokens / sizeof *tokens; ti++)
      for (size_t hi = 0; hi < sizeof heads / sizeof *heads; hi++)
        for (int cross = 0; cross < 2; cross++) {
          const int64_t L = tokens[ti], H = heads[hi], Lk = cross ? text : L;
          const kern_attn_backend whole = rule(L, Lk, H, 128, fa3);
          /* chunks of queries: every chunk, the last one shorter */
          for (size_t ci = 0; ci < sizeof chunks / sizeof *chunks; ci++)
            for (int64_t r0 = 0; r0 < L; r0 += chunks[ci]) {
              const int64_t n = L - r0 < chunks[ci] ? L - r0 : chunks[ci];
              CHECK(rule(n, Lk, H, 128, fa3) == whole,
                    "L %lld heads %lld %s: the chunk of %lld rows at %lld runs %s, the whole "
                    "sequence %s",
                    (long long)L, (long long)H, cross ? "cross" : "self", (long long)n,
                    (long long)r0, kern_attn_backend_name(rule(n, Lk, H, 128, fa3)),
                    kern_attn_backend_name(whole));
              calls++;
              if (chunks[ci] == 1 && r0 >= 3) break; /* a few one-row chunks are enough */
            }
          /* Ulysses: all tokens, a share of the heads, on every rank; its
           * cross-attention still runs per chunk of the rank's own rows */
          for (int64_t U = 2; U <= 8; U++) {
            if (H % U) continue;
            const int64_t Lq = cross ? (L + U - 1) / U : L;
            CHECK(rule(Lq, Lk, cross ? H : H / U, 128, fa3) == whole,
                  "L %lld heads %lld %s: Ulysses over %lld ranks runs %s, one rank %s",
                  (long long)L, (long long)H, cross ? "cross" : "self", (long long)U,
                  kern_attn_backend_name(rule(Lq, Lk, cross ? H : H / U, 128, fa3)),
                  kern_attn_backend_name(whole));
            calls++;
          }
        }
  printf("auto's and the 8-bit rules: the same backend for every chunk and rank of %d calls\n",
         calls);
}

int main(void) {
  sp_test_begin("kernels/attn_backend");
  test_names();
  test_measured();
  test_int8();
  test_fp8();
  test_layouts();
  return sp_test_end();
}
