/* test_ops --bench: the row-op benchmark (layernorm_mod, gated_add,
 * gated_add_ln, add then layernorm, rmsnorm_rope at the Wan shapes, every
 * kernel variant, each checked against the CPU before it is timed).
 *
 * A header, not a .c file, because tests/CMakeLists.txt builds one
 * executable per tests/<area>/test_*.c from that one source: test_ops.c
 * includes this once, after its includes (kt.h, kern_cpu.h, kern_cuda.h,
 * sp_check.h) and its helpers, which the code here uses (CK, hf, hb,
 * rand_f, rand_bf16_valued, to_bf16, up, dev_f32, dev_bf16, dev_release,
 * rel_l2, TOL_F32, TOL_BF16). Everything here is static; bench_main is the
 * entry point. */
#ifndef SP_TEST_OPS_BENCH_H
#define SP_TEST_OPS_BENCH_H

/* Each op of a Wan block's memory-bound share at L = 32,760 tokens (81
 * frames at 480x832), D = 5120 (14B) and 1536 (1.3B), bf16 projection
 * outputs, for the default kernels, the scalar ones and each forced chunk
 * count. Each variant is first checked against the CPU on BENCH_ROWS rows
 * (relative L2 within the op table's tolerances), then timed: 2 warm-up
 * calls, BENCH_REPS calls between CUDA events. Bytes are what the op must
 * move (each input read once, each output written once); % is of
 * BENCH_PEAK, about what a plain copy reaches on an H200. */
#define BENCH_L 32760
#define BENCH_ROWS 16
#define BENCH_REPS 20
#define BENCH_PEAK 4.0e12

typedef enum { BK_LN, BK_ADD, BK_ADD_LN, BK_ADD_THEN_LN, BK_ROPE, BK_COUNT } bench_kind;
static const char *bench_name[BK_COUNT] = {"layernorm_mod", "gated_add", "gated_add_ln",
                                           "add,layernorm", "rmsnorm_rope"};

typedef struct bench_bufs {
  int64_t L, D, heads;
  float *x, *x0;             // (L, D) the residual stream, and its first value
  uint16_t *y, *h;           // (L, D) bf16: a projection's output, a norm's output
  float *gate, *shift, *scale; // (D)
  uint16_t *wn;              // (D) bf16 RMSNorm weight
  float *cos_t, *sin_t;      // (L, 64) RoPE tables, grid 21 x 30 x 52
} bench_bufs;

/* The same operands as block_forward gives each op (gated add 3 + norm1). */
static void bench_call(bench_kind k, const bench_bufs *b) {
  const int64_t L = b->L, D = b->D;
  const float eps = 1e-6f;
  if (k == BK_LN)
    kern_cuda_layernorm_modulate(b->x, NULL, NULL, b->shift, b->scale, b->h, L, D, eps, 0);
  else if (k == BK_ADD)
    kern_cuda_gated_add(b->x, b->y, KERN_DTYPE_BF16, b->gate, L, D, 0);
  else if (k == BK_ADD_LN)
    kern_cuda_gated_add_layernorm(b->x, b->y, KERN_DTYPE_BF16, b->gate, NULL, NULL, b->shift,
                                  b->scale, b->h, L, D, eps, 0);
  else if (k == BK_ADD_THEN_LN) {
    kern_cuda_gated_add(b->x, b->y, KERN_DTYPE_BF16, b->gate, L, D, 0);
    kern_cuda_layernorm_modulate(b->x, NULL, NULL, b->shift, b->scale, b->h, L, D, eps, 0);
  } else
    kern_cuda_rmsnorm_rope(b->y, KERN_DTYPE_BF16, b->wn, b->cos_t, b->sin_t, b->h, L, b->heads,
                           128, eps, 0);
}

static double bench_bytes(bench_kind k, int64_t L, int64_t D) {
  const double LD = (double)L * (double)D;
  static const double per_elem[BK_COUNT] = {4 + 2, 4 + 2 + 4, 4 + 2 + 4 + 2,
                                            (4 + 2 + 4) + (4 + 2), 2 + 2};
  return LD * per_elem[k] + (k == BK_ROPE ? (double)L * 64 * 4 * 2 : 0.0);
}

static void down_row(void *h, const void *d, int64_t row, int64_t D, size_t esize) {
  CK(cudaMemcpy(h, (const char *)d + (size_t)(row * D) * esize, (size_t)D * esize,
                cudaMemcpyDeviceToHost));
}

/* Runs op k once on the first x and compares BENCH_ROWS rows of its outputs
 * with the CPU on the same rows; returns the worst relative L2 over the
 * outputs, each divided by its tolerance (pass: <= 1). */
static double bench_check(bench_kind k, const bench_bufs *b, const float *gate,
                          const float *shift, const float *scale, const float *wn,
                          const double *ct, const double *st) {
  const int64_t D = b->D;
  CK(cudaMemcpy(b->x, b->x0, (size_t)(b->L * D) * 4, cudaMemcpyDeviceToDevice));
  CK(cudaMemset(b->h, 0xFF, (size_t)(b->L * D) * 2));
  bench_call(k, b);
  CK(cudaDeviceSynchronize());
  const int adds = k == BK_ADD || k == BK_ADD_LN || k == BK_ADD_THEN_LN;
  const int norms = k != BK_ADD;
  float *x = hf(D), *y = hf(D), *gx = hf(D), *gh = hf(D), *ref = hf(D);
  uint16_t *yb = hb(D), *hbuf = hb(D);
  double worst = 0.0;
  for (int i = 0; i < BENCH_ROWS; i++) {
    const int64_t row = i == 0 ? 0 : i == 1 ? b->L - 1 : (int64_t)kt_uniform(0, (double)b->L);
    down_row(x, b->x0, row, D, 4);
    down_row(yb, b->y, row, D, 2);
    kern_bf16_to_f32_n(yb, y, (size_t)D);
    if (adds) {
      kern_cpu_gated_add(x, y, gate, 1, D);
      down_row(gx, b->x, row, D, 4);
      worst = fmax(worst, rel_l2(gx, x, D) / TOL_F32);
    }
    if (!norms) continue;
    if (k == BK_ROPE) {
      kern_cpu_rmsnorm(y, wn, ref, 1, D, 1e-6f);
      kern_cpu_rope_apply(ref, ct + row * 64, st + row * 64, 1, b->heads, 128);
    } else {
      kern_cpu_layernorm(x, NULL, NULL, ref, 1, D, 1e-6f);
      kern_cpu_modulate(ref, shift, scale, ref, 1, D);
    }
    down_row(hbuf, b->h, row, D, 2);
    kern_bf16_to_f32_n(hbuf, gh, (size_t)D);
    worst = fmax(worst, rel_l2(gh, ref, D) / TOL_BF16);
  }
  free(x); free(y); free(gx); free(gh); free(ref); free(yb); free(hbuf);
  return worst;
}

static double bench_time(bench_kind k, const bench_bufs *b) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 2; i++) bench_call(k, b);
  CK(cudaEventRecord(e0, 0));
  for (int i = 0; i < BENCH_REPS; i++) bench_call(k, b);
  CK(cudaEventRecord(e1, 0));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return ms / BENCH_REPS;
}

/* Fills n device values with a 1 Mi block of host random numbers in
 * [lo, hi), copied over and over (a block is not a whole number of rows,
 * so rows differ). */
static void bench_fill(void *d, int64_t n, int bf16, double lo, double hi) {
  enum { BLK = 1 << 20 };
  float *blk = rand_f(BLK, lo, hi);
  uint16_t *blk16 = to_bf16(blk, BLK);
  const size_t esize = bf16 ? 2 : 4;
  for (int64_t off = 0; off < n; off += BLK) {
    const int64_t m = n - off < BLK ? n - off : BLK;
    up((char *)d + (size_t)off * esize, bf16 ? (void *)blk16 : (void *)blk, (size_t)m * esize);
  }
  free(blk);
  free(blk16);
}

static int bench_main(void) {
  /* NULL: the default split; then what STATICPIPE_NORM_KERNELS can force. */
  static const char *variants[] = {NULL, "scalar", "vec:1", "vec:2", "vec:3",
                                   "vec:4", "vec:5", "vec:8"};
  static const int64_t dims[] = {5120, 1536};
  const int64_t L = BENCH_L, F = 21, H = 30, W = 52; /* L = F * H * W */
  struct cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("# row-op benchmark, %s, L %d, %d reps after 2 warm-up calls, %% of %.1f TB/s\n",
         prop.name, BENCH_L, BENCH_REPS, BENCH_PEAK / 1e12);
  printf("# bytes per element: layernorm_mod 6, gated_add 10, gated_add_ln 12, add,layernorm 16\n"
         "# (the two unfused calls: compare its ms with gated_add_ln), rmsnorm_rope 4 + tables;\n"
         "# check: worst relative L2 / tolerance on %d rows against the CPU (<= 1 passes)\n",
         BENCH_ROWS);
  printf("# %-14s %5s %-8s %9s %9s %7s %7s %s\n", "op", "D", "kernels", "ms", "GB/s", "%peak",
         "check", "result");
  double *ct = kt_dalloc(L * 64), *st = kt_dalloc(L * 64);
  kern_cpu_rope_table(F, H, W, 128, ct, st);
  float *ctf = hf(L * 64), *stf = hf(L * 64);
  for (int64_t i = 0; i < L * 64; i++) ctf[i] = (float)ct[i], stf[i] = (float)st[i];
  int failed = 0;
  for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
    const int64_t D = dims[di], n = L * D;
    bench_bufs b = {L, D, D / 128, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    float *gate = rand_f(D, -1, 1), *shift = rand_f(D, -0.5, 0.5), *scale = rand_f(D, -0.5, 0.5);
    float *wn = rand_bf16_valued(D, 0.5, 1.5);
    CK(cudaMalloc((void **)&b.x, (size_t)n * 4));
    CK(cudaMalloc((void **)&b.x0, (size_t)n * 4));
    CK(cudaMalloc((void **)&b.y, (size_t)n * 2));
    CK(cudaMalloc((void **)&b.h, (size_t)n * 2));
    bench_fill(b.x0, n, 0, -2, 4);
    bench_fill(b.y, n, 1, -3, 3);
    b.gate = dev_f32(gate, D);
    b.shift = dev_f32(shift, D);
    b.scale = dev_f32(scale, D);
    b.wn = dev_bf16(wn, D);
    b.cos_t = dev_f32(ctf, L * 64);
    b.sin_t = dev_f32(stf, L * 64);
    for (int k = 0; k < BK_COUNT; k++) {
      for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        const char *var = variants[v];
        /* A forced count the row cannot take (more than 512 threads) runs
         * the scalar kernels: not a row of its own. */
        if (var && var[0] == 'v' && (D / 8 + (var[4] - '0') - 1) / (var[4] - '0') > 512) continue;
        if (var) setenv("STATICPIPE_NORM_KERNELS", var, 1);
        const double check = bench_check((bench_kind)k, &b, gate, shift, scale, wn, ct, st);
        const double ms = bench_time((bench_kind)k, &b);
        unsetenv("STATICPIPE_NORM_KERNELS");
        const double gbs = bench_bytes((bench_kind)k, L, D) / (ms * 1e-3) / 1e9;
        const int ok = check <= 1.0;
        printf("  %-14s %5lld %-8s %9.4f %9.1f %6.1f%% %7.3f %s\n", bench_name[k], (long long)D,
               var ? var : "default", ms, gbs, 100.0 * gbs * 1e9 / BENCH_PEAK, check,
               ok ? "pass" : "FAIL");
        fflush(stdout);
        failed += !ok;
      }
    }
    CK(cudaFree(b.x)); CK(cudaFree(b.x0)); CK(cudaFree(b.y)); CK(cudaFree(b.h));
    if (!dev_release()) { /* the per-column operands and the tables */
      printf("  FAIL: D %lld: a guard after a per-column operand or table was overwritten\n",
             (long long)D);
      failed++;
    }
    free(gate); free(shift); free(scale); free(wn);
  }
  free(ct); free(st); free(ctf); free(stf);
  printf("# %d failed\n", failed);
  return failed ? 1 : 0;
}

#endif
