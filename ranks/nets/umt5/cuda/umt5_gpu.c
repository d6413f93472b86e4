/* The UMT5 encoder on a CUDA device (UMT5.md), the CUDA backend of the
 * text encoder (umt5_backend.h): the CPU forward's computation (umt5_cpu.c)
 * with bf16 weights and activations between ops, fp32 accumulation, an
 * fp32 residual stream and fp32 norms and softmax: cuBLASLt GEMMs
 * (kern_cuda.h), T5's norm, biased attention and gated GELU
 * (kern_cuda_t5.h), umt5_layer_forward's steps op for op on one stream.
 *
 * Every layer's weights stay on the device (bf16); the driver gives each
 * layer once, then runs any number of sequences. All device memory is one
 * allocation carved at the offsets of the planner's layout
 * (planner/t5_layout.h, umt5_gpu_layout): the bytes the planner counts
 * are the bytes taken. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "kern_cuda.h"
#include "kern_cuda_t5.h"
#include "kern_dtype.h"
#include "log.h"
#include "umt5_backend.h"
#include "umt5_cuda.h"
#include "umt5_gpu.h"

_Static_assert(PLAN_T5_MAX_LEN == KERN_CUDA_T5_MAX_LEN,
               "the layout's longest sequence is the attention kernel's");
_Static_assert(UMT5_GPU_MAX_HEAD == KERN_CUDA_T5_MAX_HD,
               "the layout's widest head is the attention kernel's");

typedef struct umt5_gpu {
  umt5_config c;
  int64_t max_len, layer_floats;
  plan_t5_layout lay;
  char *arena;               /* lay.total bytes */
  umt5_layer_bf16 w[UMT5_MAX_LAYERS]; /* every layer's weights, in the arena */
  uint16_t *layer_w[UMT5_MAX_LAYERS]; /* (layer_floats) bf16 each */
  uint16_t *norm;            /* (dim) bf16 */
  float *x;                  /* (max_len, dim) the residual stream */
  uint16_t *xn;              /* (max_len, dim) a sublayer's normalised input */
  uint16_t *q, *k, *v, *att; /* (max_len, dim_attn) */
  float *g, *h;              /* (max_len, ffn) gate and fc1 outputs */
  uint16_t *hb;              /* (max_len, ffn) gelu(g) * h */
  int32_t *bucket;           /* (2 max_len - 1) */
  uint16_t *stage;           /* host: one layer in bf16 */
  int32_t *bucket_host;
  kern_cuda_gemm_ctx *gemm;
  cudaStream_t s;
} umt5_gpu;

/* The arena's buffer of kind k and index i. */
static void *at(const umt5_gpu *g, plan_t5_buf kind, int index) {
  const plan_t5_buffer *b = plan_t5_layout_find(&g->lay, kind, index);
  if (!b) sp_fatal("umt5 gpu: the layout has no %s %d", plan_t5_buf_name(kind), index);
  return g->arena + b->offset;
}

static void carve(umt5_gpu *g) {
  for (int l = 0; l < g->c.layers; l++) {
    g->layer_w[l] = at(g, PLAN_T5_LAYER, l);
    umt5_layer_bf16_bind(&g->c, g->layer_w[l], &g->w[l]);
  }
  g->norm = at(g, PLAN_T5_NORM, 0);
  g->x = at(g, PLAN_T5_X, 0);
  g->xn = at(g, PLAN_T5_XN, 0);
  g->q = at(g, PLAN_T5_Q, 0);
  g->k = at(g, PLAN_T5_K, 0);
  g->v = at(g, PLAN_T5_V, 0);
  g->att = at(g, PLAN_T5_ATT, 0);
  g->g = at(g, PLAN_T5_GATE, 0);
  g->h = at(g, PLAN_T5_FC1, 0);
  g->hb = at(g, PLAN_T5_HIDDEN, 0);
  g->bucket = at(g, PLAN_T5_BUCKET, 0);
}

static int gpu_create(const umt5_config *c, int cuda_device, int64_t max_len, void **out) {
  *out = NULL;
  umt5_gpu *g = sp_xcalloc(1, sizeof *g);
  if (umt5_gpu_layout(c, max_len, &g->lay) != SP_OK) {
    free(g);
    return SP_ERR_INPUT;
  }
  CUDA_CHECK(cudaSetDevice(cuda_device));
  g->c = *c;
  g->max_len = max_len;
  g->layer_floats = umt5_layer_floats(c);
  const cudaError_t e = cudaMalloc((void **)&g->arena, g->lay.total);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    sp_log_error("text encoder: cannot allocate %.2f GiB of device memory (every layer's "
                 "weights in bf16 and the activations of %lld tokens): %s",
                 (double)g->lay.total / (1 << 30), (long long)max_len, cudaGetErrorString(e));
    free(g);
    return SP_ERR_INPUT;
  }
  carve(g);
  g->stage = sp_xmalloc((size_t)g->layer_floats * 2);
  g->bucket_host = sp_xmalloc((size_t)(2 * max_len) * 4);
  CUDA_CHECK(cudaStreamCreateWithFlags(&g->s, cudaStreamNonBlocking));
  const plan_t5_buffer *ws = plan_t5_layout_find(&g->lay, PLAN_T5_GEMM_WS, 0);
  g->gemm = kern_cuda_gemm_ctx_create_in(g->arena + ws->offset, ws->bytes);
  *out = g;
  return SP_OK;
}

uint64_t umt5_gpu_arena_bytes(const void *e) { return ((const umt5_gpu *)e)->lay.total; }

/* n bf16 values of host fp32 src rounded (nearest even) into dst on the
 * device, on the encoder's (non-blocking) stream, and waited for: the
 * staging buffer is reused by the next call. */
static void upload(umt5_gpu *g, uint16_t *dst, const float *src, size_t n) {
  kern_f32_to_bf16_n(src, g->stage, n);
  CUDA_CHECK(cudaMemcpyAsync(dst, g->stage, n * 2, cudaMemcpyHostToDevice, g->s));
  CUDA_CHECK(cudaStreamSynchronize(g->s));
}

static void gpu_set_layer(void *e, int layer, const float *buf) {
  umt5_gpu *g = e;
  if (layer < 0 || layer >= g->c.layers)
    sp_fatal("umt5 gpu: layer %d of %lld", layer, (long long)g->c.layers);
  upload(g, g->layer_w[layer], buf, (size_t)g->layer_floats);
}

static void gpu_set_norm(void *e, const float *buf) {
  umt5_gpu *g = e;
  upload(g, g->norm, buf, (size_t)g->c.dim);
}

/* x += a (L, K) @ w^T, w (N = dim, K) bf16: the residual add in the GEMM. */
static void residual_gemm(umt5_gpu *g, const uint16_t *a, const uint16_t *w, int64_t L,
                          int64_t K) {
  const int64_t D = g->c.dim;
  kern_cuda_matmul_params p = {.a = a, .b = w, .bias = NULL, .d = g->x,
                               .d_dtype = KERN_DTYPE_F32, .M = L, .N = D, .K = K,
                               .lda = K, .ldb = K, .ldd = D, .b_kn = 0, .batch = 1,
                               .alpha = 1.0f, .beta = 1.0f, .act = KERN_CUDA_ACT_NONE};
  kern_cuda_matmul(g->gemm, &p, g->s);
}

/* One layer (umt5_layer_forward's steps). */
static void layer_forward(umt5_gpu *g, int l, int64_t L) {
  const umt5_config *c = &g->c;
  const int64_t D = c->dim, A = c->dim_attn, F = c->ffn, H = c->heads;
  const umt5_layer_bf16 *w = &g->w[l];
  kern_cuda_t5_rmsnorm(g->x, w->norm1, g->xn, KERN_DTYPE_BF16, L, D, UMT5_EPS, g->s);
  kern_cuda_linear(g->gemm, g->xn, w->q, NULL, g->q, KERN_DTYPE_BF16, L, D, A,
                   KERN_CUDA_ACT_NONE, g->s);
  kern_cuda_linear(g->gemm, g->xn, w->k, NULL, g->k, KERN_DTYPE_BF16, L, D, A,
                   KERN_CUDA_ACT_NONE, g->s);
  kern_cuda_linear(g->gemm, g->xn, w->v, NULL, g->v, KERN_DTYPE_BF16, L, D, A,
                   KERN_CUDA_ACT_NONE, g->s);
  kern_cuda_t5_attention(g->q, g->k, g->v, w->pos, g->bucket, g->att, L, H, A / H, g->s);
  residual_gemm(g, g->att, w->o, L, A);
  kern_cuda_t5_rmsnorm(g->x, w->norm2, g->xn, KERN_DTYPE_BF16, L, D, UMT5_EPS, g->s);
  kern_cuda_linear(g->gemm, g->xn, w->gate, NULL, g->g, KERN_DTYPE_F32, L, D, F,
                   KERN_CUDA_ACT_NONE, g->s);
  kern_cuda_linear(g->gemm, g->xn, w->fc1, NULL, g->h, KERN_DTYPE_F32, L, D, F,
                   KERN_CUDA_ACT_NONE, g->s);
  kern_cuda_t5_gated_gelu(g->g, g->h, g->hb, L * F, g->s);
  residual_gemm(g, g->hb, w->fc2, L, F);
}

static void gpu_run(void *e, int l0, int l1, int norm, float *x, int64_t L) {
  umt5_gpu *g = e;
  const umt5_config *c = &g->c;
  if (L < 1 || L > g->max_len || l0 < 0 || l1 > c->layers)
    sp_fatal("umt5 gpu: layers %d..%d on %lld tokens, built for %lld layers and 1..%lld tokens",
             l0, l1 - 1, (long long)L, (long long)c->layers, (long long)g->max_len);
  for (int64_t r = -(L - 1); r <= L - 1; r++)
    g->bucket_host[r + L - 1] = umt5_rel_bucket(r, c->buckets, c->max_dist);
  const size_t xb = (size_t)(L * c->dim) * sizeof(float);
  CUDA_CHECK(cudaMemcpyAsync(g->bucket, g->bucket_host, (size_t)(2 * L - 1) * 4,
                             cudaMemcpyHostToDevice, g->s));
  CUDA_CHECK(cudaMemcpyAsync(g->x, x, xb, cudaMemcpyHostToDevice, g->s));
  for (int l = l0; l < l1; l++) layer_forward(g, l, L);
  if (norm) kern_cuda_t5_rmsnorm(g->x, g->norm, g->x, KERN_DTYPE_F32, L, c->dim, UMT5_EPS, g->s);
  CUDA_CHECK(cudaMemcpyAsync(x, g->x, xb, cudaMemcpyDeviceToHost, g->s));
  CUDA_CHECK(cudaStreamSynchronize(g->s));
}

static void gpu_free(void *e) {
  umt5_gpu *g = e;
  if (!g) return;
  if (g->s) CUDA_CHECK(cudaStreamSynchronize(g->s));
  if (g->gemm) kern_cuda_gemm_ctx_destroy(g->gemm);
  if (g->arena) CUDA_CHECK(cudaFree(g->arena));
  if (g->s) CUDA_CHECK(cudaStreamDestroy(g->s));
  free(g->stage);
  free(g->bucket_host);
  free(g);
}

static const umt5_backend cuda_ops = {.all_layers = 1,
                                      .create = gpu_create,
                                      .destroy = gpu_free,
                                      .set_layer = gpu_set_layer,
                                      .set_norm = gpu_set_norm,
                                      .run = gpu_run};

const net_backend umt5_cuda = {umt5_net, RANK_DEVICE_CUDA, &cuda_ops};
