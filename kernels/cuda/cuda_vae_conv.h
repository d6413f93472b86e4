/* The Wan 2.1 VAE convolutions' cuDNN setup (kernels/cuda/cuda_vae.cu), in
 * C for the code that studies it besides the coders: the shape key, the
 * descriptors of a shape, the math-type rule of each precision, and the
 * shapes a context has run with the algorithm it picked for each. The
 * algorithm benchmark (tests/gpu/dev/vae_algo_bench.h) builds its
 * descriptors here, so it measures the convolutions the decoder runs. */
#ifndef CUDA_VAE_CONV_H
#define CUDA_VAE_CONV_H

#include <cudnn.h>
#include <stddef.h>
#include <stdint.h>

#include "kern_cuda_vae.h"
#include "kern_dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A convolution's shape: input (T, H, W, ci), kernel (kt, kh, kw), strides
 * st in time and ss in space; the spatial zero padding kh/2, kw/2 ("same",
 * the causal convs) or none (valid: the encoder's stride-2 convs, whose
 * one-sided pad is in their input). No time padding. Compared with
 * memcmp: zero it before filling it. */
typedef struct cuda_vae_conv_key {
  int64_t T, H, W, ci, co;
  int kt, kh, kw;
  int st, ss, valid;
} cuda_vae_conv_key;

/* The output size of k: (To, Ho, Wo), co channels. */
void cuda_vae_conv_out_dims(const cuda_vae_conv_key *k, int *To, int *Ho, int *Wo);

/* The cuDNN descriptors of a shape: x (NDHWC), y (NDHWC), w (KTRSC), the
 * convolution. */
typedef struct cuda_vae_conv_descs {
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
} cuda_vae_conv_descs;

/* Makes d for shape k in storage type dt (bf16 or fp32; fp32
 * accumulation), the convolution's math type set to math; checks the
 * output size cuDNN derives. Fatal on a cuDNN failure. */
void cuda_vae_conv_descs_make(kern_dtype dt, cudnnMathType_t math, const cuda_vae_conv_key *k,
                              cuda_vae_conv_descs *d);
void cuda_vae_conv_descs_free(cuda_vae_conv_descs *d);

/* The math type a context of dt (tf32: fp32 with TF32 allowed) asks the
 * heuristic with: tensor-op for bf16, default (TF32 allowed) for tf32,
 * FMA for fp32. */
cudnnMathType_t cuda_vae_conv_ask_math(kern_dtype dt, int tf32);
/* The math type the context runs an algorithm with that the heuristic
 * paired with `paired`, into *run: 1, or 0 when the precision refuses the
 * pair (fp32 and tf32 refuse conversions to 16-bit types; fp32 refuses
 * tensor-op math and runs everything else with FMA math). */
int cuda_vae_conv_run_math(kern_dtype dt, int tf32, cudnnMathType_t paired, cudnnMathType_t *run);

/* "implicit_gemm", "winograd", ...; "?" for a value outside the enum. */
const char *cuda_vae_conv_algo_name(cudnnConvolutionFwdAlgo_t a);

/* A shape a context has run, the algorithm and math type it picked, the
 * workspace bytes that algorithm takes and the calls since the context
 * was made. */
typedef struct cuda_vae_conv_pick {
  cuda_vae_conv_key key;
  cudnnConvolutionFwdAlgo_t algo;
  cudnnMathType_t math;
  size_t ws;
  int64_t runs;
  int64_t engine; /* the backend engine that runs instead of algo (cuda_vae_graph.cuh's
                     rule), -1: algo runs */
} cuda_vae_conv_pick;

/* The shapes v has run, in the order they first ran, into out (at most
 * max); returns how many v has (which may exceed max). *dt, *tf32 and
 * *ws_limit get v's storage type, tf32 flag and workspace bytes. */
int cuda_vae_conv_picks(const kern_cuda_vae *v, cuda_vae_conv_pick *out, int max, kern_dtype *dt,
                        int *tf32, size_t *ws_limit);

#ifdef __cplusplus
}
#endif

#endif
