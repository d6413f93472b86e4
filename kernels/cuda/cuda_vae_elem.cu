/* Element kernels of the Wan 2.1 VAE decoder's CUDA ops (kern_cuda_vae.h):
 * the latent in (un-normalise and conv2), RMS norm with bias and SiLU, the
 * bias and residual add, the upsamplings and the output frames.
 *
 * Channels-last rows, 16-byte vectors (8 bf16 or 4 fp32;
 * the channel counts are multiples of 8), fp32 arithmetic. Every output
 * element is computed by one thread in a fixed order (the norm's sum by a
 * fixed shuffle reduction), so reruns give the same bits. */

#include "cuda_vae_impl.cuh"

/* ---- latent in ------------------------------------------------------------------ */

typedef struct latent_stats {
  float mean[KERN_CUDA_VAE_MAX_Z], inv_std[KERN_CUDA_VAE_MAX_Z];
} latent_stats;

template <typename T>
__global__ void latent_in_kernel(const float *z, const float *wt, const float *b,
                                 latent_stats st, T *y, int nz, int64_t hw) {
  for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < hw;
       p += (int64_t)gridDim.x * blockDim.x) {
    float u[KERN_CUDA_VAE_MAX_Z];
    for (int i = 0; i < nz; i++) u[i] = z[i * hw + p] / st.inv_std[i] + st.mean[i];
    for (int o = 0; o < nz; o++) {
      float acc = b[o];
      for (int i = 0; i < nz; i++) acc += wt[o * nz + i] * u[i];
      from_f(&y[p * nz + o], acc);
    }
  }
}

extern "C" void kern_cuda_vae_latent_in(kern_cuda_vae *v, const float *z, const float *wt,
                                        const float *b, const float *mean, const float *inv_std,
                                        void *y, int64_t nz, int64_t hw) {
  if (nz < 1 || nz > KERN_CUDA_VAE_MAX_Z || hw < 1)
    sp_fatal("vae latent_in: %lld channels (1..%d), %lld positions", (long long)nz,
             KERN_CUDA_VAE_MAX_Z, (long long)hw);
  latent_stats st;
  memset(&st, 0, sizeof st);
  for (int i = 0; i < nz; i++) st.mean[i] = mean[i], st.inv_std[i] = inv_std[i];
  if (v->dt == KERN_DTYPE_F32)
    latent_in_kernel<float><<<grid_for(hw), THREADS, 0, v->stream>>>(z, wt, b, st, (float *)y,
                                                                     (int)nz, hw);
  else
    latent_in_kernel<__nv_bfloat16><<<grid_for(hw), THREADS, 0, v->stream>>>(
        z, wt, b, st, (__nv_bfloat16 *)y, (int)nz, hw);
  CUDA_LAUNCH_CHECK();
}

/* ---- RMS norm (+ bias before, SiLU after) ------------------------------------------ */

/* The V values of row xr from channel c as fp32, plus bias (NULL: none). */
template <typename TX, int V>
static __device__ __forceinline__ void norm_load_biased(const TX *xr, const float *bias, int c,
                                                        float *u) {
  load_v<TX, V>(xr + c, u);
#pragma unroll
  for (int i = 0; i < V; i++) u[i] = bias ? u[i] + bias[c + i] : u[i];
}

/* A group of L lanes (a power of two up to 32, about the position's
 * 16-byte vectors: 8 for 96 bf16 channels) per position, so narrow rows do
 * not leave most of a warp idle; the group's sum by xor shuffles inside
 * the group (fixed order). Every lane of the warp takes part in the
 * shuffles, also past the last position. */
template <typename TX, typename T>
__global__ void norm_kernel(const TX *x, const float *bias, const float *gamma, T *y, int64_t N,
                            int C, int L, float sqrt_c, int silu) {
  constexpr int V = vec<T>::n;
  const int sub = threadIdx.x % L;
  const int64_t row = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / L;
  const bool active = row < N;
  const TX *xr = x + (active ? row : 0) * C;
  T *yr = y + (active ? row : 0) * C;
  float ss = 0.0f;
  for (int c = sub * V; active && c < C; c += L * V) {
    float u[V];
    norm_load_biased<TX, V>(xr, bias, c, u);
#pragma unroll
    for (int i = 0; i < V; i++) ss += u[i] * u[i];
  }
  for (int o = L / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv = 1.0f / fmaxf(sqrtf(ss), 1e-12f);
  for (int c = sub * V; active && c < C; c += L * V) {
    float f[V];
    norm_load_biased<TX, V>(xr, bias, c, f);
#pragma unroll
    for (int i = 0; i < V; i++) {
      float o = f[i] * inv * sqrt_c * gamma[c + i];
      if (silu) o = o / (1.0f + expf(-o));
      f[i] = o;
    }
    vec<T>::store(yr + c, f);
  }
}

extern "C" void kern_cuda_vae_norm(kern_cuda_vae *v, const void *x, int x_f32,
                                   const float *bias, const float *gamma, void *y, int64_t N,
                                   int64_t C, int silu) {
  check_ch("norm", C, x, y);
  if (N < 1) sp_fatal("vae norm: %lld positions", (long long)N);
  const int64_t nvec = C / (int64_t)(16 / kern_dtype_size(v->dt));
  int L = 1;
  while (L < 32 && 2 * L <= nvec) L *= 2;
  const int64_t blocks = (N * L + THREADS - 1) / THREADS;
  if (blocks > INT32_MAX) sp_fatal("vae norm: %lld positions is too many", (long long)N);
  const float sc = sqrtf((float)C);
  if (v->dt == KERN_DTYPE_F32)
    norm_kernel<float, float><<<(unsigned)blocks, THREADS, 0, v->stream>>>(
        (const float *)x, bias, gamma, (float *)y, N, (int)C, L, sc, silu);
  else if (x_f32)
    norm_kernel<float, __nv_bfloat16><<<(unsigned)blocks, THREADS, 0, v->stream>>>(
        (const float *)x, bias, gamma, (__nv_bfloat16 *)y, N, (int)C, L, sc, silu);
  else
    norm_kernel<__nv_bfloat16, __nv_bfloat16><<<(unsigned)blocks, THREADS, 0, v->stream>>>(
        (const __nv_bfloat16 *)x, bias, gamma, (__nv_bfloat16 *)y, N, (int)C, L, sc, silu);
  CUDA_LAUNCH_CHECK();
}

/* ---- bias and residual add ------------------------------------------------------ */

template <typename T, typename TR, typename TO>
__global__ void add_kernel(const T *y, const float *by, const TR *r, const float *br, TO *out,
                           int64_t nvec, int C) {
  constexpr int V = vec<T>::n;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nvec;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t e = i * V;
    const int c = (int)(e % C);
    float a[V], b[V];
    vec<T>::load(y + e, a);
    if (by) {
#pragma unroll
      for (int k = 0; k < V; k++) a[k] += by[c + k];
    }
    if (r) {
      load_v<TR, V>(r + e, b);
#pragma unroll
      for (int k = 0; k < V; k++) a[k] += br ? b[k] + br[c + k] : b[k];
    }
    store_v<TO, V>(out + e, a);
  }
}

extern "C" void kern_cuda_vae_add(kern_cuda_vae *v, const void *y, const float *by, const void *r,
                                  int r_f32, const float *br, void *out, int out_f32, int64_t N,
                                  int64_t C) {
  check_ch("add", C, y, out);
  if (r && misaligned(r)) sp_fatal("vae add: residual %p is not 16-byte aligned", r);
  if (r_f32 && !out_f32 && v->dt != KERN_DTYPE_F32)
    sp_fatal("vae add: an fp32 residual into a bf16 output");
  const int64_t nvec = N * C / (int64_t)(16 / kern_dtype_size(v->dt));
  typedef __nv_bfloat16 bf;
  const unsigned g = grid_for(nvec);
  if (v->dt == KERN_DTYPE_F32)
    add_kernel<float, float, float><<<g, THREADS, 0, v->stream>>>(
        (const float *)y, by, (const float *)r, br, (float *)out, nvec, (int)C);
  else if (!out_f32)
    add_kernel<bf, bf, bf><<<g, THREADS, 0, v->stream>>>((const bf *)y, by, (const bf *)r, br,
                                                         (bf *)out, nvec, (int)C);
  else if (r_f32)
    add_kernel<bf, float, float><<<g, THREADS, 0, v->stream>>>(
        (const bf *)y, by, (const float *)r, br, (float *)out, nvec, (int)C);
  else
    add_kernel<bf, bf, float><<<g, THREADS, 0, v->stream>>>((const bf *)y, by, (const bf *)r, br,
                                                            (float *)out, nvec, (int)C);
  CUDA_LAUNCH_CHECK();
}

/* ---- fp32 to the storage type ------------------------------------------------------ */

__global__ void from_f32_kernel(const float *x, __nv_bfloat16 *y, int64_t nvec) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nvec;
       i += (int64_t)gridDim.x * blockDim.x) {
    float f[8];
    load_v<float, 8>(x + i * 8, f);
    vec<__nv_bfloat16>::store(y + i * 8, f);
  }
}

extern "C" void kern_cuda_vae_from_f32(kern_cuda_vae *v, const float *x, void *y, int64_t n) {
  if (n < 1 || n % 8 != 0 || misaligned(x) || misaligned(y))
    sp_fatal("vae from_f32: %lld elements (a multiple of 8), pointers %p %p", (long long)n,
             (const void *)x, y);
  if (v->dt == KERN_DTYPE_F32) {
    CUDA_CHECK(cudaMemcpyAsync(y, x, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice,
                               v->stream));
    return;
  }
  from_f32_kernel<<<grid_for(n / 8), THREADS, 0, v->stream>>>(x, (__nv_bfloat16 *)y, n / 8);
  CUDA_LAUNCH_CHECK();
}

/* ---- upsampling ----------------------------------------------------------------- */

/* Nearest 2x of 16-byte vectors: cv vectors per position. */
__global__ void upsample2x_kernel(const uint4 *x, uint4 *y, int64_t H, int64_t W, int64_t cv,
                                  int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t c = i % cv, pos = i / cv;
    const int64_t ox = pos % (2 * W), r = pos / (2 * W);
    const int64_t oy = r % (2 * H), f = r / (2 * H);
    y[i] = x[((f * H + oy / 2) * W + ox / 2) * cv + c];
  }
}

/* Nearest 2x of an fp32 x into bf16 y, 8 channels per thread. */
__global__ void upsample2x_f32_kernel(const float *x, __nv_bfloat16 *y, int64_t H, int64_t W,
                                      int64_t cv, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t c = i % cv, pos = i / cv;
    const int64_t ox = pos % (2 * W), r = pos / (2 * W);
    const int64_t oy = r % (2 * H), f = r / (2 * H);
    float a[8];
    load_v<float, 8>(x + (((f * H + oy / 2) * W + ox / 2) * cv + c) * 8, a);
    vec<__nv_bfloat16>::store(y + i * 8, a);
  }
}

extern "C" void kern_cuda_vae_upsample2x(kern_cuda_vae *v, const void *x, int x_f32, void *y,
                                         int64_t T, int64_t H, int64_t W, int64_t C) {
  check_ch("upsample2x", C, x, y);
  if (x_f32 && v->dt != KERN_DTYPE_F32) {
    const int64_t cv = C / 8, n = T * 4 * H * W * cv;
    upsample2x_f32_kernel<<<grid_for(n), THREADS, 0, v->stream>>>(
        (const float *)x, (__nv_bfloat16 *)y, H, W, cv, n);
    CUDA_LAUNCH_CHECK();
    return;
  }
  const int64_t cv = C * (int64_t)kern_dtype_size(v->dt) / 16, n = T * 4 * H * W * cv;
  upsample2x_kernel<<<grid_for(n), THREADS, 0, v->stream>>>((const uint4 *)x, (uint4 *)y, H, W,
                                                            cv, n);
  CUDA_LAUNCH_CHECK();
}

template <typename T>
__global__ void unfold_upsample_kernel(const T *x, const float *b, T *y, int64_t H, int64_t W,
                                       int C, int64_t nvec) {
  constexpr int V = vec<T>::n;
  const int cv = C / V;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nvec;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int c = (int)(i % cv) * V;
    const int64_t pos = i / cv;
    const int64_t ox = pos % (2 * W), r = pos / (2 * W);
    const int64_t oy = r % (2 * H), f2 = r / (2 * H);
    const int64_t f = f2 / 2;
    const int k = (int)(f2 % 2);
    const int ch = k * C + c; /* channel of the time conv's output */
    float a[V];
    vec<T>::load(x + ((f * H + oy / 2) * W + ox / 2) * 2 * C + ch, a);
#pragma unroll
    for (int j = 0; j < V; j++) a[j] += b[ch + j];
    vec<T>::store(y + i * V, a);
  }
}

extern "C" void kern_cuda_vae_unfold_upsample(kern_cuda_vae *v, const void *x, const float *b,
                                              void *y, int64_t T, int64_t H, int64_t W,
                                              int64_t C) {
  check_ch("unfold_upsample", C, x, y);
  const int64_t nvec = 2 * T * 4 * H * W * C / (int64_t)(16 / kern_dtype_size(v->dt));
  if (v->dt == KERN_DTYPE_F32)
    unfold_upsample_kernel<float><<<grid_for(nvec), THREADS, 0, v->stream>>>(
        (const float *)x, b, (float *)y, H, W, (int)C, nvec);
  else
    unfold_upsample_kernel<__nv_bfloat16><<<grid_for(nvec), THREADS, 0, v->stream>>>(
        (const __nv_bfloat16 *)x, b, (__nv_bfloat16 *)y, H, W, (int)C, nvec);
  CUDA_LAUNCH_CHECK();
}

/* ---- output frames ---------------------------------------------------------------- */

template <typename T>
__global__ void frames_kernel(const T *x, const float *b, float *frames, int64_t T_, int64_t HW,
                              int64_t ldc) {
  const int64_t n = 3 * T_ * HW;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t p = i % HW, r = i / HW;
    const int64_t f = r % T_, ch = r / T_;
    const float val = to_f(x[(f * HW + p) * ldc + ch]) + b[ch];
    frames[i] = fminf(fmaxf(val, -1.0f), 1.0f);
  }
}

extern "C" void kern_cuda_vae_frames_out(kern_cuda_vae *v, const void *x, const float *b,
                                         float *frames, int64_t T, int64_t HW, int64_t ldc) {
  if (T < 1 || HW < 1 || ldc < 3)
    sp_fatal("vae frames_out: %lld frames of %lld positions, %lld channels (>= 3)", (long long)T,
             (long long)HW, (long long)ldc);
  const int64_t n = 3 * T * HW;
  if (v->dt == KERN_DTYPE_F32)
    frames_kernel<float><<<grid_for(n), THREADS, 0, v->stream>>>((const float *)x, b, frames, T,
                                                                 HW, ldc);
  else
    frames_kernel<__nv_bfloat16><<<grid_for(n), THREADS, 0, v->stream>>>(
        (const __nv_bfloat16 *)x, b, frames, T, HW, ldc);
  CUDA_LAUNCH_CHECK();
}
