/* The UMT5 encoder on a CUDA device (ranks/nets/UMT5.md), the CPU
 * forward's computation (umt5_cpu.c) with bf16 weights and activations
 * between ops, fp32 accumulation, an fp32 residual stream and fp32 norms
 * and softmax: cuBLASLt GEMMs (kern_cuda.h), T5's norm, biased attention
 * and gated GELU (kern_cuda_t5.h).
 *
 * Every layer's weights stay on the device (bf16, as umt5_layer_floats
 * buffers); the caller gives each layer once (umt5_gpu_set_layer), then
 * runs any number of sequences. In a build without CUDA, create says so
 * (SP_ERR_INPUT) and umt5_gpu_available is 0. */
#ifndef UMT5_GPU_H
#define UMT5_GPU_H

#include <stdint.h>

#include "umt5.h"

typedef struct umt5_gpu umt5_gpu;

int umt5_gpu_available(void);
/* Device bytes of an encoder for sequences of up to max_len tokens: every
 * layer's weights and the final norm in bf16, and the activations. */
uint64_t umt5_gpu_bytes(const umt5_config *c, int64_t max_len);
/* On device cuda_device (cudaSetDevice); max_len 1..512. SP_OK, or
 * SP_ERR_INPUT (no CUDA build, no memory for it: logged). */
int umt5_gpu_create(const umt5_config *c, int cuda_device, int64_t max_len, umt5_gpu **out);
/* Layer l's weights from a host buffer of umt5_layer_floats fp32 values
 * (t5_model_read_layer), rounded to bf16 (nearest even) and copied up. */
void umt5_gpu_set_layer(umt5_gpu *g, int layer, const float *buf);
/* The final norm's weight (dim). */
void umt5_gpu_set_norm(umt5_gpu *g, const float *w);
/* The whole encoder on one sequence: x (L, dim) host fp32, the embedding
 * rows in, the encoded rows out; 1 <= L <= max_len. Waits for the device. */
void umt5_gpu_forward(umt5_gpu *g, float *x, int64_t L);
void umt5_gpu_free(umt5_gpu *g);

#endif
