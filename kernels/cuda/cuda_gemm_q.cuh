/* The GEMM context's quantized operand kinds, for the CUDA files of kernels/
 * (cuda_gemm.cu owns the context; cuda_quant.cu's W8A8 linears call these).
 * Not part of the C interface (kern_cuda.h, kern_cuda_quant.h). */
#ifndef SP_CUDA_GEMM_Q_CUH
#define SP_CUDA_GEMM_Q_CUH

#include "kern_cuda.h"

/* What a and b of kern_cuda_matmul_params hold. */
typedef enum kern_gemm_in {
  GEMM_IN_BF16 = 0,        /* bf16 (kern_cuda_matmul) */
  GEMM_IN_E4M3_TENSOR = 1, /* e4m3, sa and sb (1) fp32: per-tensor scales */
  GEMM_IN_E4M3_OUTER = 2,  /* e4m3, sa (M) and sb (N) fp32: a scale per row of a and of b,
                              cuBLASLt's outer-vector mode (sm_90, cuBLASLt 12.9+) */
  GEMM_IN_E4M3 = 3,        /* e4m3, no scales */
  GEMM_IN_I8 = 4,          /* int8, d int32 (d_dtype fp32 stands for the 4-byte type):
                              d = a b^T exactly, no bias, activation, alpha or beta */
  GEMM_IN_E4M3_OUTER_FAST = 5, /* GEMM_IN_E4M3_OUTER with cuBLASLt's fast accumulation
                                  (Hopper's fp8 MMA sums without the periodic promotion
                                  to full fp32: faster, less exact) */
} kern_gemm_in;

/* kern_cuda_matmul with operands of kind in (one batch or several, as the
 * params say), through the same algorithm cache. When cuBLASLt has no
 * algorithm: with may_refuse, returns 0 and enqueues nothing (the refusal is
 * cached, so asking again costs nothing); else fatal, naming the shape, the
 * kind and the device. Returns 1 when the GEMM was enqueued. */
int kern_cuda_gemm_q(kern_cuda_gemm_ctx *ctx, const kern_cuda_matmul_params *p, kern_gemm_in in,
                     const float *sa, const float *sb, int may_refuse, cudaStream_t stream);

#endif
