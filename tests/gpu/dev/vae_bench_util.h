/* What the two VAE convolution benchmarks share (code in vae_bench_util.c):
 * the legacy-API one (vae_algo_bench.h, test_vae_gpu --algos) and the
 * backend-API engine sweep (vae_engine_bench.h, test_vae_gpu --engines).
 * The driver walks the shapes a decode ran: per shape random operands, the
 * decoder's descriptors and its pick's output (the reference every row is
 * compared with), then the benchmark's own rows; at the end the decode
 * totals per kernel class and one JSON line. The rows share the timing
 * (first run alone, BENCH_WARM untimed runs, the median of BENCH_REPS runs
 * between CUDA events), the rerun and reference comparisons, the
 * workspace and the bounded JSON text. */
#ifndef DEV_VAE_BENCH_UTIL_H
#define DEV_VAE_BENCH_UTIL_H

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_vae_conv.h"
#include "vae_algo_bench.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VAE_BENCH_WARM 2
#define VAE_BENCH_REPS 5
#define VAE_BENCH_SLOW_MS 300.0 /* first run slower than this: one timed rerun only */

/* The shapes a decode ran (vae_algo_shapes_take): their picks, the
 * decoder's storage type, tf32 flag and workspace bytes. */
struct vae_algo_shapes {
  int n;
  cuda_vae_conv_pick *p;
  kern_dtype dt;
  int tf32;
  size_t ws_limit;
};

/* A bounded JSON text: appends while it fits, remembers that it did not. */
typedef struct vae_jbuf {
  char *b;
  size_t len, cap;
  int full;
} vae_jbuf;
__attribute__((format(printf, 2, 3))) void vae_jadd(vae_jbuf *j, const char *fmt, ...);
/* "key":v, or "key":null when v is not finite. */
void vae_jnum(vae_jbuf *j, const char *key, double v);

/* "default", "tensor_op", "tensor_op_conv", "fma"; "?" outside the enum. */
const char *vae_math_name(cudnnMathType_t m);

/* One shape being measured: the device side every row uses. */
typedef struct vae_bench_shape {
  cudnnHandle_t dnn;
  cudaStream_t stream;
  const vae_algo_shapes *s;
  int i; /* index into s */
  cuda_vae_conv_descs d; /* the decoder's, math type as the decoder asks the heuristic */
  /* x (T, H, W, ci), w (co, kt, kh, kw, ci), three outputs (To, Ho, Wo,
   * co): yref the pick's output, ya a row's first run, yb its last */
  void *x, *w, *yref, *ya, *yb;
  int64_t ny;
  int bf16;
  size_t y_bytes;
  void *ws;        /* workspace, grown on demand */
  size_t ws_bytes; /* allocated */
} vae_bench_shape;

/* Grows sh's workspace to at least need bytes: 0, or -1 when the device
 * has no memory for it (the CUDA error cleared, the old workspace kept). */
int vae_bench_ws_reserve(vae_bench_shape *sh, size_t need);

/* The legacy convolution of sh's descriptors (their math type as set) with
 * algorithm a and ws workspace bytes into y. */
cudnnStatus_t vae_bench_legacy(vae_bench_shape *sh, cudnnConvolutionFwdAlgo_t a, size_t ws,
                               void *y);

/* One run of a row's convolution into y (sh->ya or sh->yb). */
typedef cudnnStatus_t (*vae_bench_conv_fn)(void *ctx, void *y);

/* A row's times: the first run alone into ya, then the warm-up and timed
 * runs into yb; ran when every run succeeded (status the first failure). */
typedef struct vae_bench_timing {
  cudnnStatus_t status;
  int ran;
  double first_ms, ms; /* NAN when not measured */
} vae_bench_timing;
vae_bench_timing vae_bench_time(vae_bench_shape *sh, vae_bench_conv_fn f, void *ctx);

/* After a row ran: ya against yb (bits) and ya against yref (relative L2,
 * NAN when yref is all zero). */
typedef struct vae_bench_check {
  int64_t ndiff;
  int bitrep;
  double rel_l2;
} vae_bench_check;
vae_bench_check vae_bench_compare(vae_bench_shape *sh);

/* The shape's heading line ("# shape i: x (...) -> co, kernel, ...; runs;
 * pick ...") on stdout, and its JSON object's opening keys (x, co, kernel,
 * stride, valid, runs, pick, pick_math), the comma before it when i > 0. */
void vae_bench_shape_head(const vae_bench_shape *sh);
void vae_bench_shape_json_head(vae_jbuf *j, const vae_bench_shape *sh);

/* What a benchmark's rows give the decode totals: the pick's median and
 * the best eligible row's (the pick's when none is). */
typedef struct vae_bench_result {
  int measured;
  double pick_ms, best_ms;
} vae_bench_result;

/* A benchmark: the "bench" name of its JSON, the legend printed under the
 * heading, and its rows of one shape (the pick's output already in
 * sh->yref; prints the shape's block and appends its JSON object). */
typedef struct vae_bench_kind {
  const char *bench;
  const char *legend;
  vae_bench_result (*rows)(vae_bench_shape *sh, vae_jbuf *j, void *user);
  void *user;
} vae_bench_kind;

/* Runs kind over every shape of s on the current device (see the head):
 * 0, or 1 when a shape could not be measured (no device memory for its
 * operands) or the JSON could not be printed or written. */
int vae_bench_drive(const vae_algo_shapes *s, const vae_algo_opts *o, const vae_bench_kind *k);

#ifdef __cplusplus
}
#endif

#endif
