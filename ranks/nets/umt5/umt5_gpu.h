/* The CUDA text encoder's device memory, in both builds: one allocation
 * laid out by the planner (planner/t5_layout.h), every layer's weights in
 * bf16 (umt5_layer_floats elements each), the final norm, the activations
 * for the longest sequence and the GEMM workspace. The planner's count of
 * an encoding on a GPU is this layout's total (umt5_gpu_bytes), and the
 * CUDA encoder (cuda/umt5_gpu.c) carves its arena from it. */
#ifndef UMT5_GPU_H
#define UMT5_GPU_H

#include <stdint.h>

#include "t5_layout.h"
#include "umt5.h"

/* The widest head the CUDA attention takes (KERN_CUDA_T5_MAX_HD,
 * kern_cuda_t5.h; cuda/umt5_gpu.c checks they agree). */
#define UMT5_GPU_MAX_HEAD 128

/* The planner's shape of an encoder of c for sequences of up to max_len
 * tokens. */
void umt5_gpu_shape(const umt5_config *c, int64_t max_len, plan_t5_shape *out);
/* Lays that encoder out. SP_OK, or SP_ERR_INPUT with the reason logged
 * (a config the CUDA encoder refuses: more than PLAN_T5_MAX_LEN tokens,
 * heads wider than UMT5_GPU_MAX_HEAD). */
int umt5_gpu_layout(const umt5_config *c, int64_t max_len, plan_t5_layout *out);
/* The layout's total bytes, 0 (logged) when it is refused. */
uint64_t umt5_gpu_bytes(const umt5_config *c, int64_t max_len);

#endif
