/* The engine sweep's configurations (vae_engine_bench.cu; code in
 * vae_engine_cfgs.cu): a shape's convolution as a backend operation graph,
 * the engine configurations its heuristics offer and the knob variants of
 * their engines, one row per distinct configuration (vae_engine_key.h).
 * The backend descriptors of a shape live in a pool freed at its end. C++
 * (the graph builder of kernels/cuda/cudnn_graph.cuh). */
#ifndef DEV_VAE_ENGINE_CFGS_CUH
#define DEV_VAE_ENGINE_CFGS_CUH

#include <cudnn.h>
#include <stdint.h>

#include "cuda_vae_graph.cuh"
#include "cudnn_graph.cuh"
#include "vae_bench_util.h"
#include "vae_engine_key.h"

#define VENG_MAX_ROWS 64          /* configurations of a shape, the pick included */
#define VENG_SHAPE_BUDGET_S 3.0   /* wall seconds of a shape after which only firsts run */
#define VENG_POOL_DESCS 4096      /* backend descriptors a shape keeps alive */

/* The tensors' unique ids in the graph and the variant packs: the decoder's. */
enum { VENG_UID_X = CUDA_VAE_UID_X, VENG_UID_W = CUDA_VAE_UID_W, VENG_UID_Y = CUDA_VAE_UID_Y };

/* One configuration of a shape. */
typedef struct veng_row {
  vae_engine_key key;
  const char *src; /* "legacy", "A", "B", "fallback", "knob" */
  cudnnBackendDescriptor_t cfg;
  unsigned notes, behavior; /* bit n: numerical / behaviour note n */
  int notes_known, det, allowed, planned, fits, ran, bitrep, legacy;
  cudnnStatus_t status;
  const char *note; /* why it did not run, besides a status */
  int64_t ws;
  double plan_ms, first_ms, ms, rel_l2;
  int64_t ndiff;
} veng_row;

/* The backend descriptors of a shape: destroyed together at its end. */
typedef struct veng_pool {
  cudnnBackendDescriptor_t d[VENG_POOL_DESCS];
  int n;
} veng_pool;

cudnnBackendDescriptor_t veng_pool_new(veng_pool *p, cudnnBackendDescriptorType_t type);
void veng_pool_free(veng_pool *p);

/* Monotonic wall seconds. */
double veng_now_s(void);

/* The rows of a shape, the configurations they own in the pool. */
typedef struct veng_rows {
  veng_row r[VENG_MAX_ROWS];
  int n;
  int offered[3]; /* configurations each heuristic mode gave */
  int variants;   /* knob variants added */
  int dropped;    /* distinct configurations past VENG_MAX_ROWS */
  int skipped;    /* rows not run: past the shape's VENG_SHAPE_BUDGET_S */
} veng_rows;

/* The convolution of sh's shape as an operation graph (the decoder's,
 * cuda_vae_conv_graph), its descriptors recorded in g: the graph, or NULL
 * with *st and *what saying which descriptor cuDNN refused. */
cudnnBackendDescriptor_t veng_graph(cudnnHandle_t dnn, const vae_bench_shape *sh, att_graph *g,
                                    cudnnStatus_t *st, const char **what);
/* The configurations heuristic `mode` gives for graph gr, each new one a
 * row of rs (src names the mode): how many it gave, -1 when it failed. */
int veng_heur_rows(veng_rows *rs, veng_pool *p, const vae_algo_shapes *s,
                   cudnnBackendDescriptor_t gr, cudnnBackendHeurMode_t mode, const char *src);
/* Knob variants of the engines of rs's rows so far (vae_engine_bench.cu's
 * head), added to rs until it is full. */
void veng_knob_rows(veng_rows *rs, veng_pool *p, const vae_algo_shapes *s,
                    cudnnBackendDescriptor_t gr);

#endif
