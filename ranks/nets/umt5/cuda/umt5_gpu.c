/* The UMT5 encoder on a CUDA device (umt5_gpu.h): umt5_layer_forward's
 * steps, op for op, on device buffers, one stream. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "kern_cuda.h"
#include "kern_cuda_t5.h"
#include "kern_dtype.h"
#include "log.h"
#include "umt5_gpu.h"

struct umt5_gpu {
  umt5_config c;
  int64_t max_len, layer_floats;
  int64_t off[UMT5_LAYER_TENSORS]; /* each tensor's offset in a layer buffer */
  uint16_t *w;      /* (layers, layer_floats) bf16 */
  uint16_t *norm;   /* (dim) bf16 */
  float *x;         /* (max_len, dim) the residual stream */
  uint16_t *xn;     /* (max_len, dim) a sublayer's normalised input */
  uint16_t *q, *k, *v, *att; /* (max_len, dim_attn) */
  float *g, *h;     /* (max_len, ffn) gate and fc1 outputs */
  uint16_t *hb;     /* (max_len, ffn) gelu(g) * h */
  int32_t *bucket;  /* (2 max_len - 1) */
  uint16_t *stage;  /* host: one layer in bf16 */
  int32_t *bucket_host;
  kern_cuda_gemm_ctx *gemm;
  cudaStream_t s;
};

int umt5_gpu_available(void) { return 1; }

/* Activation bytes for max_len tokens (the fields above, in order). */
static uint64_t act_bytes(const umt5_config *c, int64_t max_len) {
  const uint64_t L = (uint64_t)max_len, D = (uint64_t)c->dim, A = (uint64_t)c->dim_attn,
                 F = (uint64_t)c->ffn;
  return L * D * 4 + L * D * 2 + 4 * L * A * 2 + 2 * L * F * 4 + L * F * 2 + 2 * L * 4;
}

uint64_t umt5_gpu_bytes(const umt5_config *c, int64_t max_len) {
  return (uint64_t)c->layers * (uint64_t)umt5_layer_floats(c) * 2 + (uint64_t)c->dim * 2 +
         act_bytes(c, max_len) + (32u << 20); /* the GEMM workspace (kern_cuda.h default) */
}

static int dev_alloc(void **p, size_t bytes, const char *what) {
  if (cudaMalloc(p, bytes) == cudaSuccess) return 0;
  (void)cudaGetLastError();
  sp_log_error("text encoder: cannot allocate %.2f GiB of device memory for %s",
               (double)bytes / (1 << 30), what);
  *p = NULL;
  return -1;
}

int umt5_gpu_create(const umt5_config *c, int cuda_device, int64_t max_len, umt5_gpu **out) {
  *out = NULL;
  if (max_len < 1 || max_len > KERN_CUDA_T5_MAX_LEN || c->dim_attn / c->heads > 256) {
    sp_log_error("text encoder: %lld tokens or head width %lld is beyond the CUDA encoder's "
                 "1..%d tokens and 256",
                 (long long)max_len, (long long)(c->dim_attn / c->heads), KERN_CUDA_T5_MAX_LEN);
    return SP_ERR_INPUT;
  }
  CUDA_CHECK(cudaSetDevice(cuda_device));
  umt5_gpu *g = sp_xcalloc(1, sizeof *g);
  g->c = *c;
  g->max_len = max_len;
  g->layer_floats = umt5_layer_floats(c);
  for (int s = 0; s < UMT5_LAYER_TENSORS; s++) {
    umt5_tensor t;
    umt5_table_entry(c, 1 + s, &t); /* layer 0's: the same offsets in every layer */
    g->off[s] = t.offset;
  }
  const size_t L = (size_t)max_len, D = (size_t)c->dim, A = (size_t)c->dim_attn,
               F = (size_t)c->ffn;
  int bad = dev_alloc((void **)&g->w, (size_t)c->layers * (size_t)g->layer_floats * 2,
                      "the layers' weights");
  bad = bad || dev_alloc((void **)&g->norm, D * 2, "the final norm");
  bad = bad || dev_alloc((void **)&g->x, L * D * 4, "activations");
  bad = bad || dev_alloc((void **)&g->xn, L * D * 2, "activations");
  bad = bad || dev_alloc((void **)&g->q, L * A * 2, "activations");
  bad = bad || dev_alloc((void **)&g->k, L * A * 2, "activations");
  bad = bad || dev_alloc((void **)&g->v, L * A * 2, "activations");
  bad = bad || dev_alloc((void **)&g->att, L * A * 2, "activations");
  bad = bad || dev_alloc((void **)&g->g, L * F * 4, "activations");
  bad = bad || dev_alloc((void **)&g->h, L * F * 4, "activations");
  bad = bad || dev_alloc((void **)&g->hb, L * F * 2, "activations");
  bad = bad || dev_alloc((void **)&g->bucket, 2 * L * 4, "the position buckets");
  if (bad) {
    umt5_gpu_free(g);
    return SP_ERR_INPUT;
  }
  g->stage = sp_xmalloc((size_t)g->layer_floats * 2);
  g->bucket_host = sp_xmalloc(2 * L * 4);
  CUDA_CHECK(cudaStreamCreateWithFlags(&g->s, cudaStreamNonBlocking));
  g->gemm = kern_cuda_gemm_ctx_create(0);
  *out = g;
  return SP_OK;
}

void umt5_gpu_set_layer(umt5_gpu *g, int layer, const float *buf) {
  if (layer < 0 || layer >= g->c.layers) sp_fatal("umt5 gpu: layer %d of %lld", layer,
                                                  (long long)g->c.layers);
  kern_f32_to_bf16_n(buf, g->stage, (size_t)g->layer_floats);
  /* On the encoder's (non-blocking) stream, and waited for: the staging
   * buffer is reused by the next call. */
  CUDA_CHECK(cudaMemcpyAsync(g->w + (size_t)layer * (size_t)g->layer_floats, g->stage,
                             (size_t)g->layer_floats * 2, cudaMemcpyHostToDevice, g->s));
  CUDA_CHECK(cudaStreamSynchronize(g->s));
}

void umt5_gpu_set_norm(umt5_gpu *g, const float *w) {
  kern_f32_to_bf16_n(w, g->stage, (size_t)g->c.dim);
  CUDA_CHECK(cudaMemcpyAsync(g->norm, g->stage, (size_t)g->c.dim * 2, cudaMemcpyHostToDevice,
                             g->s));
  CUDA_CHECK(cudaStreamSynchronize(g->s));
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
  const uint16_t *w = g->w + (size_t)l * (size_t)g->layer_floats;
  const uint16_t *norm1 = w + g->off[0], *wq = w + g->off[1], *wk = w + g->off[2],
                 *wv = w + g->off[3], *wo = w + g->off[4], *norm2 = w + g->off[5],
                 *gate = w + g->off[6], *fc1 = w + g->off[7], *fc2 = w + g->off[8],
                 *pos = w + g->off[9];
  kern_cuda_t5_rmsnorm(g->x, norm1, g->xn, KERN_DTYPE_BF16, L, D, UMT5_EPS, g->s);
  kern_cuda_linear(g->gemm, g->xn, wq, NULL, g->q, KERN_DTYPE_BF16, L, D, A, KERN_CUDA_ACT_NONE,
                   g->s);
  kern_cuda_linear(g->gemm, g->xn, wk, NULL, g->k, KERN_DTYPE_BF16, L, D, A, KERN_CUDA_ACT_NONE,
                   g->s);
  kern_cuda_linear(g->gemm, g->xn, wv, NULL, g->v, KERN_DTYPE_BF16, L, D, A, KERN_CUDA_ACT_NONE,
                   g->s);
  kern_cuda_t5_attention(g->q, g->k, g->v, pos, g->bucket, g->att, L, H, A / H, g->s);
  residual_gemm(g, g->att, wo, L, A);
  kern_cuda_t5_rmsnorm(g->x, norm2, g->xn, KERN_DTYPE_BF16, L, D, UMT5_EPS, g->s);
  kern_cuda_linear(g->gemm, g->xn, gate, NULL, g->g, KERN_DTYPE_F32, L, D, F,
                   KERN_CUDA_ACT_NONE, g->s);
  kern_cuda_linear(g->gemm, g->xn, fc1, NULL, g->h, KERN_DTYPE_F32, L, D, F, KERN_CUDA_ACT_NONE,
                   g->s);
  kern_cuda_t5_gated_gelu(g->g, g->h, g->hb, L * F, g->s);
  residual_gemm(g, g->hb, fc2, L, F);
}

void umt5_gpu_forward(umt5_gpu *g, float *x, int64_t L) {
  const umt5_config *c = &g->c;
  if (L < 1 || L > g->max_len)
    sp_fatal("umt5 gpu: %lld tokens, built for 1..%lld", (long long)L, (long long)g->max_len);
  for (int64_t r = -(L - 1); r <= L - 1; r++)
    g->bucket_host[r + L - 1] = umt5_rel_bucket(r, c->buckets, c->max_dist);
  const size_t xb = (size_t)(L * c->dim) * sizeof(float);
  CUDA_CHECK(cudaMemcpyAsync(g->bucket, g->bucket_host, (size_t)(2 * L - 1) * 4,
                             cudaMemcpyHostToDevice, g->s));
  CUDA_CHECK(cudaMemcpyAsync(g->x, x, xb, cudaMemcpyHostToDevice, g->s));
  for (int l = 0; l < c->layers; l++) layer_forward(g, l, L);
  kern_cuda_t5_rmsnorm(g->x, g->norm, g->x, KERN_DTYPE_F32, L, c->dim, UMT5_EPS, g->s);
  CUDA_CHECK(cudaMemcpyAsync(x, g->x, xb, cudaMemcpyDeviceToHost, g->s));
  CUDA_CHECK(cudaStreamSynchronize(g->s));
}

void umt5_gpu_free(umt5_gpu *g) {
  if (!g) return;
  if (g->s) CUDA_CHECK(cudaStreamSynchronize(g->s));
  void *d[] = {g->w, g->norm, g->x, g->xn, g->q, g->k, g->v, g->att, g->g, g->h, g->hb,
               g->bucket};
  for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
    if (d[i]) CUDA_CHECK(cudaFree(d[i]));
  if (g->gemm) kern_cuda_gemm_ctx_destroy(g->gemm);
  if (g->s) CUDA_CHECK(cudaStreamDestroy(g->s));
  free(g->stage);
  free(g->bucket_host);
  free(g);
}
