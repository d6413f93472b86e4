/* Fixtures of the planner tests: the two Wan 2.1 models built from the
 * published sizes (MODEL.md "Configs"), not from the planner, and a device of a
 * given size. Checks and random numbers come from sp_test.h. */
#ifndef PLAN_TEST_H
#define PLAN_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan.h"
#include "sp_test.h"

#define TEST_GIB (1024.0 * 1024.0 * 1024.0)

/* Wan 2.1 T2V, bf16: 14B block 702,788,608 bytes x 40, 1.3B 92,881,408 x 30. */
typedef struct test_wan {
  plan_model m;
  uint64_t blocks[64];
} test_wan;

static inline void test_wan_make(test_wan *t, int big) {
  memset(t, 0, sizeof *t);
  int n = big ? 40 : 30;
  for (int i = 0; i < n; i++) t->blocks[i] = big ? 702788608ull : 92881408ull;
  t->m.num_blocks = n;
  t->m.block_bytes = t->blocks;
  t->m.dim = big ? 5120 : 1536;
  t->m.ffn_dim = big ? 13824 : 8960;
  t->m.heads = big ? 40 : 12;
  t->m.head_dim = 128;
  t->m.text_len = 512;
  t->m.text_dim = 4096;
  t->m.freq_dim = 256;
  t->m.in_dim = 16;
  t->m.out_dim = 16;
  t->m.weight_dtype_bytes = 2;
  /* embeddings: patch [D,64]+[D], text 4096->D->D, time 256->D->D, proj D->6D (bf16) */
  int64_t D = t->m.dim;
  int64_t pe = D * 64 + D, te = 4096 * D + D + D * D + D, tm = 256 * D + D + D * D + D,
          pr = D * 6 * D + 6 * D;
  t->m.embed_bytes = (uint64_t)(pe + te + tm + pr) * 2;
  t->m.head_bytes = (uint64_t)(2 * D + 64 * D + 64) * 2;
}

static inline void test_device(plan_device *d, const char *name, double gib, double speed) {
  memset(d, 0, sizeof *d);
  snprintf(d->name, sizeof d->name, "%s", name);
  d->total_bytes = d->free_bytes = (uint64_t)(gib * TEST_GIB);
  d->speed = speed;
}

#endif
