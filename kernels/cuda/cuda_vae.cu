/* CUDA ops of the Wan 2.1 VAE decoder (kern_cuda_vae.h).
 *
 * Convolutions: cuDNN's legacy convolution API (cudnnConvolutionForward),
 * NDHWC tensors and KTRSC (channels-last) filters, bf16 with tensor-op math,
 * fp32 with FMA math, or fp32 in the tf32 mode with CUDNN_DEFAULT_MATH,
 * which lets cuDNN run fp32 convs on the TF32 tensor cores (each product's
 * inputs rounded to a 10-bit mantissa, as PyTorch runs fp32 convs by
 * default; algorithms that down-convert to 16-bit types are refused). It
 * is what PyTorch's
 * decoder runs on, it takes every shape the decoder has (3x3x3, 3x1x1,
 * 1x3x3, 1x1x1) in one call with the spatial zero padding built in, and
 * the 1x1x1 convs are GEMMs inside it, so one path serves both precisions.
 * The encoder's stride-2 convolutions (kern_cuda_vae_enc.h) go the same way,
 * with strides and no padding.
 * The algorithm for a shape is cuDNN's heuristic's first deterministic one
 * that fits the workspace (cudnnGetConvolutionForwardAlgorithm_v7), chosen
 * the first time the shape runs and kept; where cuda_vae_engine_rule names
 * a backend engine configuration for the shape (the full-resolution bf16
 * 3x3x3 convolutions, measured faster with the same bits) and cuDNN makes
 * its plan within the workspace, that plan runs instead.
 *
 * The middle attention (one head of width dims[0], 384 published, which
 * cuDNN's fused attention does not take): scores and P v through cuBLASLt
 * (bf16 or fp32 operands, fp32 compute without TF32 but in the tf32 mode),
 * a row softmax kernel
 * in between, query rows in chunks that fit the caller's scratch.
 *
 * The element kernels are in cuda_vae_elem.cu; what both files share in
 * cuda_vae_impl.cuh. */

#include "cuda_vae_impl.cuh"
#include "kern_cuda_vae_enc.h"

/* ---- the context ----------------------------------------------------------- */

extern "C" int kern_cuda_vae_create(kern_dtype dt, int tf32, cudaStream_t stream,
                                    void *conv_ws, size_t conv_ws_bytes, void *gemm_ws,
                                    size_t gemm_ws_bytes, kern_cuda_vae **out) {
  *out = NULL;
  if (tf32 && dt != KERN_DTYPE_F32) {
    sp_log_error("vae gpu: tf32 math asked for %s activations; it is an fp32 mode",
                 kern_dtype_name(dt));
    return SP_ERR_INPUT;
  }
  size_t ver = cudnnGetVersion();
  if (ver < 90000) {
    sp_log_error("vae gpu: cudnn %zu at run time; the decoder needs cudnn 9.0 or later", ver);
    return SP_ERR_RUNTIME;
  }
  kern_cuda_vae *v = (kern_cuda_vae *)calloc(1, sizeof *v);
  if (!v) {
    sp_log_error("vae gpu: out of host memory for the kernel context");
    return SP_ERR_RUNTIME;
  }
  v->dt = dt;
  v->tf32 = tf32;
  v->stream = stream;
  v->conv_ws = conv_ws;
  v->conv_ws_bytes = conv_ws_bytes;
  v->gemm_ws = gemm_ws;
  v->gemm_ws_bytes = gemm_ws_bytes;
  cudnnStatus_t s = cudnnCreate(&v->dnn);
  if (s != CUDNN_STATUS_SUCCESS) {
    sp_log_error("vae gpu: cudnnCreate failed: %s (cudnn %zu)", cudnnGetErrorString(s), ver);
    free(v);
    return SP_ERR_RUNTIME;
  }
  CUDNN_CHECK(cudnnSetStream(v->dnn, stream));
  cublasStatus_t b = cublasLtCreate(&v->lt);
  if (b != CUBLAS_STATUS_SUCCESS) {
    sp_log_error("vae gpu: cublasLtCreate failed: %s", cublasLtGetStatusString(b));
    CUDNN_CHECK(cudnnDestroy(v->dnn));
    free(v);
    return SP_ERR_RUNTIME;
  }
  sp_log_debug("vae gpu: cudnn %zu, %s%s", ver, kern_dtype_name(dt), tf32 ? " with tf32 math" : "");
  *out = v;
  return SP_OK;
}

extern "C" void kern_cuda_vae_destroy(kern_cuda_vae *v) {
  if (!v) return;
  for (int i = 0; i < v->nconv; i++) {
    cuda_vae_conv_descs_free(&v->conv[i].d);
    att_graph_release(&v->conv[i].g);
  }
  for (int i = 0; i < v->ngemm; i++) {
    gemm_entry *e = &v->gemm[i];
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(e->ld));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(e->lb));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(e->la));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(e->op));
  }
  CUBLAS_CHECK(cublasLtDestroy(v->lt));
  CUDNN_CHECK(cudnnDestroy(v->dnn));
  free(v);
}

/* ---- convolution ------------------------------------------------------------ */

extern "C" const char *cuda_vae_conv_algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "implicit_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "implicit_precomp_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "direct";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "fft";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "fft_tiling";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "winograd";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "winograd_nonfused";
    default: return "?";
  }
}

extern "C" cudnnMathType_t cuda_vae_conv_ask_math(kern_dtype dt, int tf32) {
  return dt != KERN_DTYPE_F32 ? CUDNN_TENSOR_OP_MATH : tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

/* fp32 stays fp32: no tensor-op (TF32) kernels, and the descriptor keeps
 * FMA math whatever the heuristic paired (DEFAULT_MATH would allow TF32).
 * tf32 takes TF32 and FMA algorithms but none that converts the fp32
 * inputs to a 16-bit type (ALLOW_CONVERSION). Both tf32 and bf16 run with
 * the math type the heuristic paired with the algorithm. */
extern "C" int cuda_vae_conv_run_math(kern_dtype dt, int tf32, cudnnMathType_t paired,
                                      cudnnMathType_t *run) {
  if (dt == KERN_DTYPE_F32 && paired == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return 0;
  if (dt == KERN_DTYPE_F32 && !tf32 && paired == CUDNN_TENSOR_OP_MATH) return 0;
  *run = dt != KERN_DTYPE_F32 || tf32 ? paired : CUDNN_FMA_MATH;
  return 1;
}

extern "C" void cuda_vae_conv_out_dims(const cuda_vae_conv_key *k, int *To, int *Ho, int *Wo) {
  const int ph = k->valid ? 0 : k->kh / 2, pw = k->valid ? 0 : k->kw / 2;
  *To = ((int)k->T - k->kt) / k->st + 1;
  *Ho = ((int)k->H + 2 * ph - k->kh) / k->ss + 1;
  *Wo = ((int)k->W + 2 * pw - k->kw) / k->ss + 1;
}

extern "C" void cuda_vae_conv_descs_make(kern_dtype dt, cudnnMathType_t math,
                                         const cuda_vae_conv_key *k, cuda_vae_conv_descs *d) {
  const cudnnDataType_t t = dt == KERN_DTYPE_F32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_BFLOAT16;
  const int T = (int)k->T, H = (int)k->H, W = (int)k->W, ci = (int)k->ci, co = (int)k->co;
  const int ph = k->valid ? 0 : k->kh / 2, pw = k->valid ? 0 : k->kw / 2;
  int To, Ho, Wo;
  cuda_vae_conv_out_dims(k, &To, &Ho, &Wo);
  /* NDHWC, fully packed: dims in cuDNN's (N, C, D, H, W) order, strides of
   * a channels-last buffer. */
  int xdim[5] = {1, ci, T, H, W}, xstr[5] = {T * H * W * ci, 1, H * W * ci, W * ci, ci};
  int ydim[5] = {1, co, To, Ho, Wo}, ystr[5] = {To * Ho * Wo * co, 1, Ho * Wo * co, Wo * co, co};
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->xd));
  CUDNN_CHECK(cudnnSetTensorNdDescriptor(d->xd, t, 5, xdim, xstr));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->yd));
  CUDNN_CHECK(cudnnSetTensorNdDescriptor(d->yd, t, 5, ydim, ystr));
  /* Filter dims (K, C, T, R, S); NHWC format means the memory order
   * (K, T, R, S, C). */
  int wdim[5] = {co, ci, k->kt, k->kh, k->kw};
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&d->wd));
  CUDNN_CHECK(cudnnSetFilterNdDescriptor(d->wd, t, CUDNN_TENSOR_NHWC, 5, wdim));
  int pad[3] = {0, ph, pw}, stride[3] = {k->st, k->ss, k->ss}, one[3] = {1, 1, 1};
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d->cd));
  CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(d->cd, 3, pad, stride, one,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CUDNN_CHECK(cudnnSetConvolutionMathType(d->cd, math));
  int od[5];
  CUDNN_CHECK(cudnnGetConvolutionNdForwardOutputDim(d->cd, d->xd, d->wd, 5, od));
  if (od[0] != 1 || od[1] != co || od[2] != To || od[3] != Ho || od[4] != Wo)
    sp_fatal("vae conv: cudnn gives output (%d, %d, %d, %d, %d) for (1, %d, %d, %d, %d)", od[0],
             od[1], od[2], od[3], od[4], co, To, Ho, Wo);
}

extern "C" void cuda_vae_conv_descs_free(cuda_vae_conv_descs *d) {
  cuda_vae_conv_descs_destroy(d->xd, d->yd, d->wd, d->cd);
  memset(d, 0, sizeof *d);
}

extern "C" int cuda_vae_conv_picks(const kern_cuda_vae *v, cuda_vae_conv_pick *out, int max,
                                   kern_dtype *dt, int *tf32, size_t *ws_limit) {
  for (int i = 0; i < v->nconv && i < max; i++) {
    const conv_entry *e = &v->conv[i];
    out[i].key = e->key;
    out[i].algo = e->algo;
    out[i].math = e->math;
    out[i].ws = e->ws;
    out[i].runs = e->runs;
    out[i].engine = e->g.plan ? e->g.engine : -1;
  }
  *dt = v->dt;
  *tf32 = v->tf32;
  *ws_limit = v->conv_ws_bytes;
  return v->nconv;
}

/* The backend engine rule's plan for e's shape into e->g, where the rule
 * names one and cuDNN makes it within the workspace; else e->g stays empty
 * and the legacy algorithm runs (logged at debug level). */
static void engine_plan(kern_cuda_vae *v, conv_entry *e) {
  const cuda_vae_engine_cfg *r = cuda_vae_engine_rule(v->dt, v->tf32, &e->key);
  e->g.engine = -1;
  if (!r) return;
  att_builder b = {&e->g, CUDNN_STATUS_SUCCESS, NULL};
  const char *what = NULL;
  cudnnBackendDescriptor_t gr = cuda_vae_conv_graph(v->dnn, v->dt, &e->key, &b);
  cudnnStatus_t s = gr ? att_engine_plan(v->dnn, &b, gr, r->engine, r->nknobs, r->type, r->val,
                                         &what)
                       : b.st;
  if (!gr) what = b.what;
  if (s == CUDNN_STATUS_SUCCESS && (size_t)e->g.workspace > v->conv_ws_bytes) {
    s = CUDNN_STATUS_NOT_SUPPORTED;
    what = "its workspace";
  }
  if (s != CUDNN_STATUS_SUCCESS) {
    sp_log_debug("vae conv: engine %lld's plan refused at %s (%s); the legacy algorithm runs",
                 (long long)r->engine, what ? what : "?", cudnnGetErrorString(s));
    att_graph_release(&e->g);
  }
}

/* Descriptors and the algorithm of a shape: from the cache, else made. */
static conv_entry *conv_get(kern_cuda_vae *v, const conv_key *k) {
  for (int i = 0; i < v->nconv; i++)
    if (memcmp(&v->conv[i].key, k, sizeof *k) == 0) return &v->conv[i];
  if (v->nconv == CONV_CACHE)
    sp_fatal("vae conv: more than %d convolution shapes", CONV_CACHE);
  conv_entry *e = &v->conv[v->nconv];
  memset(e, 0, sizeof *e);
  e->key = *k;
  const cudnnMathType_t math = cuda_vae_conv_ask_math(v->dt, v->tf32);
  cuda_vae_conv_descs_make(v->dt, math, k, &e->d);
  cudnnConvolutionFwdAlgoPerf_t perf[MAX_ALGOS];
  int got = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(v->dnn, e->d.xd, e->d.wd, e->d.cd, e->d.yd,
                                                     MAX_ALGOS, &got, perf));
  int chosen = -1;
  for (int i = 0; i < got && chosen < 0; i++) {
    const cudnnConvolutionFwdAlgoPerf_t *p = &perf[i];
    cudnnMathType_t run;
    if (p->status != CUDNN_STATUS_SUCCESS || p->determinism != CUDNN_DETERMINISTIC ||
        p->memory > v->conv_ws_bytes || !cuda_vae_conv_run_math(v->dt, v->tf32, p->mathType, &run))
      continue;
    CUDNN_CHECK(cudnnSetConvolutionMathType(e->d.cd, run));
    size_t need = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(v->dnn, e->d.xd, e->d.wd, e->d.cd, e->d.yd,
                                                p->algo, &need) != CUDNN_STATUS_SUCCESS ||
        need > v->conv_ws_bytes) {
      CUDNN_CHECK(cudnnSetConvolutionMathType(e->d.cd, math));
      continue;
    }
    e->algo = p->algo;
    e->math = run;
    e->ws = need;
    chosen = i;
  }
  if (chosen < 0) {
    char list[512] = "";
    size_t n = 0;
    for (int i = 0; i < got && n + 80 < sizeof list; i++)
      n += (size_t)snprintf(list + n, sizeof list - n, " %s(status %d, det %d, math %d, %zu B)",
                            cuda_vae_conv_algo_name(perf[i].algo), (int)perf[i].status,
                            (int)perf[i].determinism, (int)perf[i].mathType, perf[i].memory);
    sp_fatal("vae conv: cudnn %zu has no deterministic %s%s algorithm within %zu workspace "
             "bytes for x (%lld, %lld, %lld, %lld) w (%lld, %d, %d, %d, %lld):%s",
             cudnnGetVersion(), kern_dtype_name(v->dt), v->tf32 ? " (tf32)" : "",
             v->conv_ws_bytes, (long long)k->T, (long long)k->H, (long long)k->W,
             (long long)k->ci, (long long)k->co, k->kt, k->kh, k->kw, (long long)k->ci, list);
  }
  sp_log_debug("vae conv: x (%lld, %lld, %lld, %lld) -> %lld, kernel %dx%dx%d, stride %d/%d%s, "
               "%s: %s (%zu B workspace, math %d)",
               (long long)k->T, (long long)k->H, (long long)k->W, (long long)k->ci,
               (long long)k->co, k->kt, k->kh, k->kw, k->st, k->ss,
               k->valid ? ", no padding" : "", kern_dtype_name(v->dt),
               cuda_vae_conv_algo_name(e->algo), e->ws, (int)perf[chosen].mathType);
  engine_plan(v, e);
  v->nconv++;
  return e;
}

static void conv_run(kern_cuda_vae *v, const conv_key *k, const void *x, const void *w, void *y);

extern "C" void kern_cuda_vae_conv(kern_cuda_vae *v, const void *x, int64_t T, int64_t H,
                                   int64_t W, int64_t ci, const void *w, int64_t co, int kt,
                                   int kh, int kw, void *y) {
  if (T < kt || H < 1 || W < 1 || ci < 1 || co < 1 || kt < 1 || kh < 1 || kw < 1 ||
      kh % 2 == 0 || kw % 2 == 0 || T * H * W * (ci > co ? ci : co) > INT32_MAX ||
      (int64_t)kt * kh * kw * ci * co > INT32_MAX)
    sp_fatal("vae conv: x (%lld, %lld, %lld, %lld) -> %lld channels, kernel %dx%dx%d: need T >= "
             "kt, odd kh and kw, every tensor under 2^31 elements",
             (long long)T, (long long)H, (long long)W, (long long)ci, (long long)co, kt, kh, kw);
  conv_key k;
  memset(&k, 0, sizeof k);
  k.T = T, k.H = H, k.W = W, k.ci = ci, k.co = co, k.kt = kt, k.kh = kh, k.kw = kw;
  k.st = k.ss = 1;
  conv_run(v, &k, x, w, y);
}

/* The convolution of shape k: its plan from the cache, then cuDNN. */
static void conv_run(kern_cuda_vae *v, const conv_key *k, const void *x, const void *w, void *y) {
  conv_entry *e = conv_get(v, k);
  const float alpha = 1.0f, beta = 0.0f;
  e->runs++;
  if (e->g.plan) {
    const int64_t uids[3] = {CUDA_VAE_UID_X, CUDA_VAE_UID_W, CUDA_VAE_UID_Y};
    void *const ptrs[3] = {(void *)x, (void *)w, y};
    att_graph_execute(v->dnn, e->g.plan, 3, uids, ptrs, v->conv_ws, v->stream);
    return;
  }
  CUDNN_CHECK(cudnnConvolutionForward(v->dnn, &alpha, e->d.xd, x, e->d.wd, w, e->d.cd, e->algo,
                                      v->conv_ws, e->ws, &beta, e->d.yd, y));
}

extern "C" void kern_cuda_vae_conv_valid(kern_cuda_vae *v, const kern_cuda_vae_conv_desc *d,
                                         const void *x, const void *w, void *y) {
  const int64_t big = d->ci > d->co ? d->ci : d->co;
  if (d->T < d->kt || d->H < d->kh || d->W < d->kw || d->ci < 1 || d->co < 1 || d->kt < 1 ||
      d->kh < 1 || d->kw < 1 || d->st < 1 || d->ss < 1 || d->T * d->H * d->W * big > INT32_MAX ||
      (int64_t)d->kt * d->kh * d->kw * d->ci * d->co > INT32_MAX)
    sp_fatal("vae conv: x (%lld, %lld, %lld, %lld) -> %lld channels, kernel %dx%dx%d, stride "
             "%d/%d, no padding: need the kernel inside the input, every tensor under 2^31 "
             "elements",
             (long long)d->T, (long long)d->H, (long long)d->W, (long long)d->ci,
             (long long)d->co, d->kt, d->kh, d->kw, d->st, d->ss);
  conv_key k;
  memset(&k, 0, sizeof k);
  k.T = d->T, k.H = d->H, k.W = d->W, k.ci = d->ci, k.co = d->co;
  k.kt = d->kt, k.kh = d->kh, k.kw = d->kw, k.st = d->st, k.ss = d->ss, k.valid = 1;
  conv_run(v, &k, x, w, y);
}

/* ---- GEMM (attention) --------------------------------------------------------- */

static cublasLtMatrixLayout_t make_layout(cudaDataType_t t, int64_t rows, int64_t cols,
                                          int64_t ld) {
  cublasLtMatrixLayout_t l;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, t, (uint64_t)rows, (uint64_t)cols, ld));
  return l;
}

/* Row-major D (M, N) = alpha A (M, K) B^T, B stored (N, K), or A B with B
 * stored (K, N) when b_kn; A, B in the context's type, D fp32 or that type.
 * cuBLASLt is column-major: D^T = op(B) A^T (as kernels/cuda/cuda_gemm.cu
 * explains), so its first operand is our B. */
static void gemm(kern_cuda_vae *v, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                 const void *B, int64_t ldb, int b_kn, void *D, int64_t ldd, int d_f32,
                 float alpha) {
  gemm_key k;
  memset(&k, 0, sizeof k);
  k.M = M, k.N = N, k.K = K, k.lda = lda, k.ldb = ldb, k.ldd = ldd, k.b_kn = b_kn,
  k.d_f32 = d_f32;
  const cudaDataType_t ab = v->dt == KERN_DTYPE_F32 ? CUDA_R_32F : CUDA_R_16BF;
  const cudaDataType_t dt = d_f32 ? CUDA_R_32F : ab;
  gemm_entry *e = NULL;
  for (int i = 0; i < v->ngemm && !e; i++)
    if (memcmp(&v->gemm[i].key, &k, sizeof k) == 0) e = &v->gemm[i];
  if (!e) {
    if (v->ngemm == GEMM_CACHE) sp_fatal("vae attention: more than %d GEMM shapes", GEMM_CACHE);
    e = &v->gemm[v->ngemm];
    memset(e, 0, sizeof *e);
    e->key = k;
    /* fp32 operands: full fp32 products, or TF32 ones in the tf32 mode */
    const cublasComputeType_t ct =
        v->dt == KERN_DTYPE_F32 && v->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&e->op, ct, CUDA_R_32F));
    cublasOperation_t ta = b_kn ? CUBLAS_OP_N : CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    e->la = b_kn ? make_layout(ab, N, K, ldb) : make_layout(ab, K, N, ldb);
    e->lb = make_layout(ab, K, M, lda);
    e->ld = make_layout(dt, N, M, ldd);
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = v->gemm_ws_bytes;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    /* In-place split-K reductions are not deterministic: excluded. */
    uint32_t schemes =
        CUBLASLT_REDUCTION_SCHEME_MASK & ~(uint32_t)CUBLASLT_REDUCTION_SCHEME_INPLACE;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(v->lt, e->op, e->la, e->lb, e->ld, e->ld,
                                                       pref, 1, &res, &found);
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    if (st != CUBLAS_STATUS_SUCCESS || found < 1 || res.state != CUBLAS_STATUS_SUCCESS)
      sp_fatal("vae attention: cuBLASLt has no %s algorithm for M %lld N %lld K %lld (lda %lld "
               "ldb %lld ldd %lld): %s",
               kern_dtype_name(v->dt), (long long)M, (long long)N, (long long)K,
               (long long)lda, (long long)ldb, (long long)ldd, cublasLtGetStatusName(st));
    e->algo = res.algo;
    v->ngemm++;
  }
  const float beta = 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(v->lt, e->op, &alpha, B, e->la, A, e->lb, &beta, D, e->ld, D,
                                  e->ld, &e->algo, v->gemm_ws, v->gemm_ws_bytes, v->stream));
}

/* ---- attention ---------------------------------------------------------------------- */

/* p = softmax(s) per row; s fp32 (rows, ld), p (rows, ld) in T, n used. */
template <typename T>
__global__ void softmax_kernel(const float *s, T *p, int64_t n, int64_t ld) {
  __shared__ float sh[33];
  const float *r = s + blockIdx.x * ld;
  T *o = p + blockIdx.x * ld;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, r[j]);
  m = block_reduce<1>(m, sh);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += expf(r[j] - m);
  sum = block_reduce<0>(sum, sh);
  const float inv = 1.0f / sum;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) from_f(&o[j], expf(r[j] - m) * inv);
}

extern "C" void kern_cuda_vae_attention(kern_cuda_vae *v, const void *qkv, void *out, int64_t T,
                                        int64_t HW, int64_t C, void *scratch,
                                        size_t scratch_bytes) {
  check_ch("attention", C, qkv, out);
  const int e = (int)kern_dtype_size(v->dt);
  const int64_t ld = plan_vae_scores_ld(HW);
  int64_t rows = (int64_t)(scratch_bytes / ((uint64_t)ld * (uint64_t)(4 + e)));
  if (rows > HW) rows = HW;
  while (rows > 0 && plan_vae_scores_bytes(rows, HW, e) > scratch_bytes) rows--;
  if (rows < 1 || ((uintptr_t)scratch & 255u))
    sp_fatal("vae attention: scratch of %zu bytes at %p holds no row of %lld keys (needs %llu, "
             "256-byte aligned)",
             scratch_bytes, scratch, (long long)HW,
             (unsigned long long)plan_vae_scores_bytes(1, HW, e));
  float *S = (float *)scratch;
  char *P = (char *)scratch + plan_vae_scores_p_offset(rows, HW);
  const float scale = 1.0f / sqrtf((float)C);
  for (int64_t f = 0; f < T; f++) {
    const char *q = (const char *)qkv + f * HW * 3 * C * e;
    const char *k = q + C * e, *vv = q + 2 * C * e;
    char *o = (char *)out + f * HW * C * e;
    for (int64_t r0 = 0; r0 < HW; r0 += rows) {
      const int64_t m = HW - r0 < rows ? HW - r0 : rows;
      gemm(v, m, HW, C, q + r0 * 3 * C * e, 3 * C, k, 3 * C, 0, S, ld, 1, scale);
      if (v->dt == KERN_DTYPE_F32)
        softmax_kernel<float><<<(unsigned)m, THREADS, 0, v->stream>>>(S, (float *)P, HW, ld);
      else
        softmax_kernel<__nv_bfloat16><<<(unsigned)m, THREADS, 0, v->stream>>>(
            S, (__nv_bfloat16 *)P, HW, ld);
      CUDA_LAUNCH_CHECK();
      gemm(v, m, C, HW, P, ld, vv, 3 * C, 1, o + r0 * C * e, C, 0, 1.0f);
    }
  }
}
