/* CUDA ops of the Wan 2.2 VAE (kern_cuda_vae22.h).
 *
 * The strided convolutions: cuDNN's legacy convolution API on NDHWC
 * tensors and KTRSC filters, as the Wan 2.1 decoder's convolutions
 * (cuda_vae.cu): bf16 with tensor-op math or fp32 with FMA math (no TF32),
 * the first deterministic algorithm of cuDNN's heuristic that fits the
 * workspace, chosen once per shape.
 *
 * The element kernels: one thread per output element in a grid-stride
 * loop, fp32 arithmetic, each output computed in a fixed order, so reruns
 * give the same bits. */
#include <cuda_bf16.h>
#include <cudnn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "cuda_vae_common.cuh"
#include "kern_cuda_vae22.h"
#include "lib_check.cuh"

#define V22_CONV_CACHE 32 /* strided conv shapes of a run: 6 of the published encoder */
#define V22_MAX_ALGOS 16

typedef struct v22_conv_key {
  int64_t T, H, W, ci, co;
  int k[3], s[3];
} v22_conv_key;

typedef struct v22_conv {
  v22_conv_key key;
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  cudnnConvolutionFwdAlgo_t algo;
  size_t ws;
} v22_conv;

struct kern_cuda_vae22 {
  kern_dtype dt;
  cudaStream_t stream;
  cudnnHandle_t dnn;
  void *conv_ws;
  size_t conv_ws_bytes;
  int nconv;
  v22_conv conv[V22_CONV_CACHE];
};

/* Launches kernel<float> or kernel<bf16> by the context's dtype over n
 * outputs; the pointers of dt type are passed as void and cast inside. */
#define V22_LAUNCH(v, n, kernel, ...)                                                      \
  do {                                                                                     \
    if ((v)->dt == KERN_DTYPE_F32)                                                         \
      kernel<float><<<grid_for(n), THREADS, 0, (v)->stream>>>(__VA_ARGS__);                \
    else                                                                                   \
      kernel<__nv_bfloat16><<<grid_for(n), THREADS, 0, (v)->stream>>>(__VA_ARGS__);        \
    CUDA_LAUNCH_CHECK();                                                                   \
  } while (0)

/* ---- the context ----------------------------------------------------------- */

extern "C" int kern_cuda_vae22_create(kern_dtype dt, cudaStream_t stream, void *conv_ws,
                                      size_t conv_ws_bytes, kern_cuda_vae22 **out) {
  *out = NULL;
  kern_cuda_vae22 *v = (kern_cuda_vae22 *)calloc(1, sizeof *v);
  if (!v) {
    sp_log_error("vae gpu: out of host memory for the kernel context");
    return SP_ERR_RUNTIME;
  }
  v->dt = dt;
  v->stream = stream;
  v->conv_ws = conv_ws;
  v->conv_ws_bytes = conv_ws_bytes;
  const cudnnStatus_t s = cudnnCreate(&v->dnn);
  if (s != CUDNN_STATUS_SUCCESS) {
    sp_log_error("vae gpu: cudnnCreate failed: %s", cudnnGetErrorString(s));
    free(v);
    return SP_ERR_RUNTIME;
  }
  CUDNN_CHECK(cudnnSetStream(v->dnn, stream));
  *out = v;
  return SP_OK;
}

extern "C" void kern_cuda_vae22_destroy(kern_cuda_vae22 *v) {
  if (!v) return;
  for (int i = 0; i < v->nconv; i++) {
    v22_conv *e = &v->conv[i];
    cuda_vae_conv_descs_destroy(e->xd, e->yd, e->wd, e->cd);
  }
  CUDNN_CHECK(cudnnDestroy(v->dnn));
  free(v);
}

/* ---- strided convolution ------------------------------------------------------ */

/* The first deterministic algorithm of cuDNN's heuristic that fits the
 * workspace (fp32: none with tensor-op math); fatal when there is none. */
static void pick_algo(kern_cuda_vae22 *v, v22_conv *e) {
  const cudnnMathType_t math = v->dt == KERN_DTYPE_F32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
  cudnnConvolutionFwdAlgoPerf_t perf[V22_MAX_ALGOS];
  int got = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(v->dnn, e->xd, e->wd, e->cd, e->yd,
                                                     V22_MAX_ALGOS, &got, perf));
  for (int i = 0; i < got; i++) {
    const cudnnConvolutionFwdAlgoPerf_t *p = &perf[i];
    if (p->status != CUDNN_STATUS_SUCCESS || p->determinism != CUDNN_DETERMINISTIC ||
        p->memory > v->conv_ws_bytes)
      continue;
    if (v->dt == KERN_DTYPE_F32 && (p->mathType == CUDNN_TENSOR_OP_MATH ||
                                    p->mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
      continue;
    if (v->dt != KERN_DTYPE_F32) CUDNN_CHECK(cudnnSetConvolutionMathType(e->cd, p->mathType));
    size_t need = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(v->dnn, e->xd, e->wd, e->cd, e->yd, p->algo,
                                                &need) != CUDNN_STATUS_SUCCESS ||
        need > v->conv_ws_bytes) {
      CUDNN_CHECK(cudnnSetConvolutionMathType(e->cd, math));
      continue;
    }
    e->algo = p->algo;
    e->ws = need;
    return;
  }
  const v22_conv_key *k = &e->key;
  sp_fatal("vae conv: cudnn %zu has no deterministic %s algorithm within %zu workspace bytes "
           "for x (%lld, %lld, %lld, %lld) -> %lld, kernel %dx%dx%d, stride %dx%dx%d (%d tried)",
           cudnnGetVersion(), kern_dtype_name(v->dt), v->conv_ws_bytes, (long long)k->T,
           (long long)k->H, (long long)k->W, (long long)k->ci, (long long)k->co, k->k[0],
           k->k[1], k->k[2], k->s[0], k->s[1], k->s[2], got);
}

static v22_conv *conv_get(kern_cuda_vae22 *v, const v22_conv_key *k) {
  for (int i = 0; i < v->nconv; i++)
    if (memcmp(&v->conv[i].key, k, sizeof *k) == 0) return &v->conv[i];
  if (v->nconv == V22_CONV_CACHE) sp_fatal("vae conv: more than %d strided shapes", V22_CONV_CACHE);
  v22_conv *e = &v->conv[v->nconv];
  memset(e, 0, sizeof *e);
  e->key = *k;
  const cudnnDataType_t t = v->dt == KERN_DTYPE_F32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_BFLOAT16;
  const int T = (int)k->T, H = (int)k->H, W = (int)k->W, ci = (int)k->ci, co = (int)k->co;
  const int To = (T - k->k[0]) / k->s[0] + 1, Ho = (H - k->k[1]) / k->s[1] + 1;
  const int Wo = (W - k->k[2]) / k->s[2] + 1;
  /* NDHWC, fully packed: dims in cuDNN's (N, C, D, H, W) order, strides of
   * a channels-last buffer; filters (K, C, T, R, S) stored (K, T, R, S, C). */
  int xdim[5] = {1, ci, T, H, W}, xstr[5] = {T * H * W * ci, 1, H * W * ci, W * ci, ci};
  int ydim[5] = {1, co, To, Ho, Wo}, ystr[5] = {To * Ho * Wo * co, 1, Ho * Wo * co, Wo * co, co};
  int wdim[5] = {co, ci, k->k[0], k->k[1], k->k[2]};
  int pad[3] = {0, 0, 0}, dil[3] = {1, 1, 1}, str[3] = {k->s[0], k->s[1], k->s[2]};
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->xd));
  CUDNN_CHECK(cudnnSetTensorNdDescriptor(e->xd, t, 5, xdim, xstr));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->yd));
  CUDNN_CHECK(cudnnSetTensorNdDescriptor(e->yd, t, 5, ydim, ystr));
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&e->wd));
  CUDNN_CHECK(cudnnSetFilterNdDescriptor(e->wd, t, CUDNN_TENSOR_NHWC, 5, wdim));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&e->cd));
  CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(e->cd, 3, pad, str, dil, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT));
  CUDNN_CHECK(cudnnSetConvolutionMathType(
      e->cd, v->dt == KERN_DTYPE_F32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
  int od[5];
  CUDNN_CHECK(cudnnGetConvolutionNdForwardOutputDim(e->cd, e->xd, e->wd, 5, od));
  if (od[1] != co || od[2] != To || od[3] != Ho || od[4] != Wo)
    sp_fatal("vae conv: cudnn gives output (%d, %d, %d, %d) for (%d, %d, %d, %d)", od[1], od[2],
             od[3], od[4], co, To, Ho, Wo);
  pick_algo(v, e);
  v->nconv++;
  return e;
}

extern "C" void kern_cuda_vae22_conv_strided(kern_cuda_vae22 *v, const void *x, int64_t T,
                                             int64_t H, int64_t W, int64_t ci, const void *w,
                                             int64_t co, const int k[3], const int stride[3],
                                             void *y) {
  if (T < k[0] || H < k[1] || W < k[2] || ci < 1 || co < 1 || stride[0] < 1 || stride[1] < 1 ||
      stride[2] < 1 || T * H * W * (ci > co ? ci : co) > INT32_MAX)
    sp_fatal("vae conv: x (%lld, %lld, %lld, %lld) -> %lld, kernel %dx%dx%d, stride %dx%dx%d: "
             "needs the kernel inside x and every tensor under 2^31 elements",
             (long long)T, (long long)H, (long long)W, (long long)ci, (long long)co, k[0], k[1],
             k[2], stride[0], stride[1], stride[2]);
  v22_conv_key key;
  memset(&key, 0, sizeof key);
  key.T = T, key.H = H, key.W = W, key.ci = ci, key.co = co;
  for (int i = 0; i < 3; i++) key.k[i] = k[i], key.s[i] = stride[i];
  v22_conv *e = conv_get(v, &key);
  const float alpha = 1.0f, beta = 0.0f;
  CUDNN_CHECK(cudnnConvolutionForward(v->dnn, &alpha, e->xd, x, e->wd, w, e->cd, e->algo,
                                      v->conv_ws, e->ws, &beta, e->yd, y));
}

/* ---- latents in and out ------------------------------------------------------------ */

typedef struct v22_stats {
  float mean[KERN_CUDA_VAE22_MAX_Z], inv_std[KERN_CUDA_VAE22_MAX_Z];
} v22_stats;

static v22_stats stats_of(const kern_vae22_stats *s) {
  v22_stats st;
  memset(&st, 0, sizeof st);
  for (int64_t i = 0; i < s->nz; i++) st.mean[i] = s->mean[i], st.inv_std[i] = s->inv_std[i];
  return st;
}

template <typename T>
__global__ void latent_in_kernel(const float *z, const float *wt, const float *b, v22_stats st,
                                 void *y_, int nz, int64_t hw) {
  T *y = (T *)y_;
  VAE_LOOP(p, hw) {
    float u[KERN_CUDA_VAE22_MAX_Z];
    for (int i = 0; i < nz; i++) u[i] = z[i * hw + p] / st.inv_std[i] + st.mean[i];
    for (int o = 0; o < nz; o++) {
      float acc = b[o];
      for (int i = 0; i < nz; i++) acc += wt[o * nz + i] * u[i];
      from_f(&y[p * nz + o], acc);
    }
  }
}

extern "C" void kern_cuda_vae22_latent_in(kern_cuda_vae22 *v, const float *z, const float *wt,
                                          const float *b, const kern_vae22_stats *st, void *y,
                                          int64_t hw) {
  if (st->nz < 1 || st->nz > KERN_CUDA_VAE22_MAX_Z || hw < 1)
    sp_fatal("vae latent_in: %lld channels (1..%d), %lld positions", (long long)st->nz,
             KERN_CUDA_VAE22_MAX_Z, (long long)hw);
  V22_LAUNCH(v, hw, latent_in_kernel, z, wt, b, stats_of(st), y, (int)st->nz, hw);
}

template <typename T>
__global__ void latent_out_kernel(const void *x_, kern_vae22_head h, v22_stats st, float *z,
                                  int nz, int64_t t, int64_t hw) {
  const T *x = (const T *)x_;
  const int z2 = (int)h.z2;
  VAE_LOOP(i, nz * t * hw) {
    const int64_t p = i % hw, f = (i / hw) % t;
    const int o = (int)(i / (hw * t));
    const T *xr = x + (f * hw + p) * z2;
    float acc = h.b1[o];
    for (int c = 0; c < z2; c++) acc += h.w1[o * z2 + c] * (to_f(xr[c]) + h.hb[c]);
    z[i] = (acc - st.mean[o]) * st.inv_std[o];
  }
}

extern "C" void kern_cuda_vae22_latent_out(kern_cuda_vae22 *v, const void *x,
                                           const kern_vae22_head *h, const kern_vae22_stats *st,
                                           float *z, int64_t t, int64_t hw) {
  const int64_t nz = st->nz;
  if (nz < 1 || nz > KERN_CUDA_VAE22_MAX_Z || h->z2 < nz || t < 1 || hw < 1)
    sp_fatal("vae latent_out: %lld of %lld channels (1..%d), %lld frames of %lld positions",
             (long long)nz, (long long)h->z2, KERN_CUDA_VAE22_MAX_Z, (long long)t, (long long)hw);
  V22_LAUNCH(v, nz * t * hw, latent_out_kernel, x, *h, stats_of(st), z, (int)nz, t, hw);
}

/* ---- patchify, unpatchify, padding ---------------------------------------------------- */

template <typename T>
__global__ void patchify_kernel(const float *frames, void *y_, int64_t t, int64_t H, int64_t W,
                                int64_t ldc) {
  T *y = (T *)y_;
  const int64_t h = H / 2, w = W / 2;
  VAE_LOOP(i, t * h * w * ldc) {
    const int64_t ch = i % ldc, pos = i / ldc;
    const int64_t j = pos % w, r0 = pos / w, ii = r0 % h, f = r0 / h;
    float val = 0.0f;
    if (ch < 12) {
      const int64_t c = ch / 4, r = (ch / 2) % 2, q = ch % 2;
      val = frames[((c * t + f) * H + 2 * ii + q) * W + 2 * j + r];
    }
    from_f(&y[i], val);
  }
}

extern "C" void kern_cuda_vae22_patchify_in(kern_cuda_vae22 *v, const float *frames, void *y,
                                            int64_t t, int64_t H, int64_t W, int64_t ldc) {
  if (t < 1 || H < 2 || W < 2 || H % 2 || W % 2 || ldc < 12)
    sp_fatal("vae patchify: %lld frames of %lldx%lld (even), %lld channels (>= 12)",
             (long long)t, (long long)H, (long long)W, (long long)ldc);
  V22_LAUNCH(v, t * (H / 2) * (W / 2) * ldc, patchify_kernel, frames, y, t, H, W, ldc);
}

template <typename T>
__global__ void frames_kernel(const void *x_, const float *b, float *frames, int64_t t,
                              int64_t h, int64_t w, int64_t ldc) {
  const T *x = (const T *)x_;
  const int64_t H = 2 * h, W = 2 * w;
  VAE_LOOP(i, 3 * t * H * W) {
    const int64_t ox = i % W, oy = (i / W) % H, f = (i / (W * H)) % t, c = i / (W * H * t);
    const int64_t ch = c * 4 + (ox % 2) * 2 + oy % 2;
    const float val = to_f(x[((f * h + oy / 2) * w + ox / 2) * ldc + ch]) + b[ch];
    frames[i] = fminf(fmaxf(val, -1.0f), 1.0f);
  }
}

extern "C" void kern_cuda_vae22_frames_out(kern_cuda_vae22 *v, const void *x, const float *b,
                                           float *frames, int64_t t, int64_t h, int64_t w,
                                           int64_t ldc) {
  if (t < 1 || h < 1 || w < 1 || ldc < 12)
    sp_fatal("vae frames_out: %lld frames of %lldx%lld, %lld channels (>= 12)", (long long)t,
             (long long)h, (long long)w, (long long)ldc);
  V22_LAUNCH(v, 3 * t * 4 * h * w, frames_kernel, x, b, frames, t, h, w, ldc);
}

template <typename T>
__global__ void pad_kernel(const float *x, void *y_, int64_t Tn, int64_t H, int64_t W,
                           int64_t C) {
  T *y = (T *)y_;
  VAE_LOOP(i, Tn * (H + 1) * (W + 1) * C) {
    const int64_t c = i % C, pos = i / C;
    const int64_t j = pos % (W + 1), r = pos / (W + 1), ii = r % (H + 1), f = r / (H + 1);
    from_f(&y[i], ii < H && j < W ? x[((f * H + ii) * W + j) * C + c] : 0.0f);
  }
}

extern "C" void kern_cuda_vae22_pad_from_f32(kern_cuda_vae22 *v, const float *x, void *y,
                                             int64_t T, int64_t H, int64_t W, int64_t C) {
  if (T < 1 || H < 1 || W < 1 || C < 1)
    sp_fatal("vae pad: (%lld, %lld, %lld, %lld)", (long long)T, (long long)H, (long long)W,
             (long long)C);
  V22_LAUNCH(v, T * (H + 1) * (W + 1) * C, pad_kernel, x, y, T, H, W, C);
}

/* ---- the shortcuts ------------------------------------------------------------------ */

/* AvgDown3D of keep at output (o, j, i, k): the g values of output channel
 * o summed in order, times 1/g (kern_cpu_vae22_avg_down_add's order). */
static __device__ float avg_down_at(const float *keep, kern_vae22_shortcut s, int64_t o,
                                    int64_t j, int64_t i, int64_t k) {
  const int64_t pad = (s.ft - s.T % s.ft) % s.ft, g = s.ci * s.ft * s.fs * s.fs / s.co;
  float sum = 0.0f;
  for (int64_t m = o * g; m < (o + 1) * g; m++) {
    const int64_t r = m % s.fs, q = (m / s.fs) % s.fs, a = (m / (s.fs * s.fs)) % s.ft;
    const int64_t c = m / (s.fs * s.fs * s.ft), f = j * s.ft + a - pad;
    if (f < 0) continue;
    sum += keep[((f * s.H + i * s.fs + q) * s.W + k * s.fs + r) * s.ci + c];
  }
  return sum * (1.0f / (float)g);
}

template <typename T>
__global__ void down_out_kernel(const void *y_, const float *b, const float *keep, float *out,
                                kern_vae22_shortcut s, int64_t To, int64_t Ho, int64_t Wo) {
  const T *y = (const T *)y_;
  VAE_LOOP(i, To * Ho * Wo * s.co) {
    const int64_t o = i % s.co, pos = i / s.co;
    const int64_t k = pos % Wo, r = pos / Wo, ii = r % Ho, j = r / Ho;
    const float base = y ? to_f(y[i]) + (b ? b[o] : 0.0f) : out[i];
    out[i] = base + avg_down_at(keep, s, o, j, ii, k);
  }
}

extern "C" void kern_cuda_vae22_down_out(kern_cuda_vae22 *v, const void *y, const float *b,
                                         const float *keep, float *out,
                                         const kern_vae22_shortcut *s) {
  if (s->ft < 1 || s->fs < 1 || s->H % s->fs || s->W % s->fs ||
      (s->ci * s->ft * s->fs * s->fs) % s->co)
    sp_fatal("vae down_out: %lld -> %lld channels, factors %d, %d, size %lldx%lld",
             (long long)s->ci, (long long)s->co, s->ft, s->fs, (long long)s->H, (long long)s->W);
  const int64_t To = (s->T + s->ft - 1) / s->ft, Ho = s->H / s->fs, Wo = s->W / s->fs;
  V22_LAUNCH(v, To * Ho * Wo * s->co, down_out_kernel, y, b, keep, out, *s, To, Ho, Wo);
}

template <typename T>
__global__ void up_out_kernel(const void *y_, const float *b, const float *keep, float *out,
                              kern_vae22_shortcut s, int64_t To, int64_t Ho, int64_t Wo) {
  const T *y = (const T *)y_;
  const int64_t R = s.co * s.ft * s.fs * s.fs / s.ci;
  VAE_LOOP(i, To * Ho * Wo * s.co) {
    const int64_t o = i % s.co, pos = i / s.co;
    const int64_t ox = pos % Wo, r0 = pos / Wo, oy = r0 % Ho, f = r0 / Ho + s.drop;
    const int64_t t = f / s.ft, a = f % s.ft, ii = oy / s.fs, q = oy % s.fs;
    const int64_t j = ox / s.fs, r = ox % s.fs;
    const int64_t k = ((o * s.ft + a) * s.fs + q) * s.fs + r;
    out[i] = to_f(y[i]) + b[o] + keep[((t * s.H + ii) * s.W + j) * s.ci + k / R];
  }
}

extern "C" void kern_cuda_vae22_up_out(kern_cuda_vae22 *v, const void *y, const float *b,
                                       const float *keep, float *out,
                                       const kern_vae22_shortcut *s) {
  if (s->ft < 1 || s->fs < 1 || (s->co * s->ft * s->fs * s->fs) % s->ci || s->drop < 0 ||
      s->drop >= s->ft * s->T)
    sp_fatal("vae up_out: %lld -> %lld channels, factors %d, %d, drop %d", (long long)s->ci,
             (long long)s->co, s->ft, s->fs, s->drop);
  const int64_t To = s->T * s->ft - s->drop, Ho = s->H * s->fs, Wo = s->W * s->fs;
  V22_LAUNCH(v, To * Ho * Wo * s->co, up_out_kernel, y, b, keep, out, *s, To, Ho, Wo);
}
