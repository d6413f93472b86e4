/* The activations in fp32 on the device, shared by the kernels that apply
 * them (cuda_elementwise.cu, the W8A8 epilogue of cuda_quant.cu). */
#ifndef SP_ACT_CUH
#define SP_ACT_CUH

/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as the CPU reference. */
__device__ __forceinline__ float gelu_tanh_f(float x) {
  const float k = 0.7978845608028654f; /* sqrt(2/pi) */
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }

#endif
