/* Element kernels of the Wan 2.1 VAE encoder's CUDA ops
 * (kern_cuda_vae_enc.h): the frames in, the downsamples' one-sided zero pad
 * and the latents out (the head's bias, conv1, the normalisation). Every
 * output element is computed by one thread in a fixed order, so reruns
 * give the same bits. */

#include "cuda_vae_impl.cuh"
#include "kern_cuda_vae_enc.h"

/* ---- frames in ------------------------------------------------------------------- */

template <typename T>
__global__ void video_in_kernel(const float *f, T *y, int64_t n, int64_t HW) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    /* i = t HW + p: position p of frame t; channel plane c at (c T + t) HW */
    float u[8] = {f[i], f[n + i], f[2 * n + i], 0, 0, 0, 0, 0};
    store_v<T, 8>(y + i * 8, u);
  }
}

extern "C" void kern_cuda_vae_video_in(kern_cuda_vae *v, const float *frames, void *y, int64_t T,
                                       int64_t HW) {
  if (T < 1 || HW < 1 || misaligned(y))
    sp_fatal("vae video_in: %lld frames of %lld positions, output %p (16-byte aligned)",
             (long long)T, (long long)HW, y);
  const int64_t n = T * HW;
  if (v->dt == KERN_DTYPE_F32)
    video_in_kernel<float><<<grid_for(n), THREADS, 0, v->stream>>>(frames, (float *)y, n, HW);
  else
    video_in_kernel<__nv_bfloat16><<<grid_for(n), THREADS, 0, v->stream>>>(
        frames, (__nv_bfloat16 *)y, n, HW);
  CUDA_LAUNCH_CHECK();
}

/* ---- the one-sided pad -------------------------------------------------------------- */

/* One 8-channel vector of the padded output per thread. */
template <typename T>
__global__ void pad_kernel(const float *x, T *y, int64_t H, int64_t W, int64_t cv, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t c = i % cv, q = (i / cv) % (W + 1), r = (i / cv / (W + 1)) % (H + 1);
    const int64_t t = i / cv / (W + 1) / (H + 1);
    float u[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (r < H && q < W) load_v<float, 8>(x + (((t * H + r) * W + q) * cv + c) * 8, u);
    store_v<T, 8>(y + i * 8, u);
  }
}

extern "C" void kern_cuda_vae_pad_from_f32(kern_cuda_vae *v, const float *x, void *y, int64_t T,
                                           int64_t H, int64_t W, int64_t C) {
  check_ch("pad", C, x, y);
  if (T < 1 || H < 1 || W < 1)
    sp_fatal("vae pad: %lld frames of %lldx%lld", (long long)T, (long long)H, (long long)W);
  const int64_t cv = C / 8, n = T * (H + 1) * (W + 1) * cv;
  if (v->dt == KERN_DTYPE_F32)
    pad_kernel<float><<<grid_for(n), THREADS, 0, v->stream>>>(x, (float *)y, H, W, cv, n);
  else
    pad_kernel<__nv_bfloat16><<<grid_for(n), THREADS, 0, v->stream>>>(x, (__nv_bfloat16 *)y, H,
                                                                      W, cv, n);
  CUDA_LAUNCH_CHECK();
}

/* ---- latents out -------------------------------------------------------------------- */

typedef struct latent_scale {
  float mean[KERN_CUDA_VAE_MAX_Z], inv_std[KERN_CUDA_VAE_MAX_Z];
} latent_scale;

template <typename T>
__global__ void latent_out_kernel(const T *x, const float *hb, const float *qw, const float *qb,
                                  latent_scale st, float *out, int64_t n, int nz) {
  for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < n;
       p += (int64_t)gridDim.x * blockDim.x) {
    float u[2 * KERN_CUDA_VAE_MAX_Z];
    for (int i = 0; i < 2 * nz; i++) u[i] = to_f(x[p * 2 * nz + i]) + hb[i];
    for (int c = 0; c < nz; c++) {
      float acc = qb[c];
      for (int i = 0; i < 2 * nz; i++) acc += qw[c * 2 * nz + i] * u[i];
      out[c * n + p] = (acc - st.mean[c]) * st.inv_std[c];
    }
  }
}

extern "C" void kern_cuda_vae_latent_out(kern_cuda_vae *v, const kern_cuda_vae_latent_out_args *a) {
  if (a->nz < 1 || a->nz > KERN_CUDA_VAE_MAX_Z || a->n < 1)
    sp_fatal("vae latent_out: %lld channels (1..%d), %lld positions", (long long)a->nz,
             KERN_CUDA_VAE_MAX_Z, (long long)a->n);
  latent_scale st;
  memset(&st, 0, sizeof st);
  for (int i = 0; i < a->nz; i++) st.mean[i] = a->mean[i], st.inv_std[i] = a->inv_std[i];
  const unsigned g = grid_for(a->n);
  if (v->dt == KERN_DTYPE_F32)
    latent_out_kernel<float><<<g, THREADS, 0, v->stream>>>(
        (const float *)a->x, a->hb, a->qw, a->qb, st, a->out, a->n, (int)a->nz);
  else
    latent_out_kernel<__nv_bfloat16><<<g, THREADS, 0, v->stream>>>(
        (const __nv_bfloat16 *)a->x, a->hb, a->qw, a->qb, st, a->out, a->n, (int)a->nz);
  CUDA_LAUNCH_CHECK();
}
