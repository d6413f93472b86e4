/* The Wan VAE convolutions through cuDNN's backend (graph) API: a shape's
 * convolution as an operation graph (the descriptors cuda_vae_conv.h's
 * legacy ones describe), and the fixed engine rule the decoder runs where
 * it measured faster than the legacy API's algorithm
 * (kernels/cuda/cuda_vae.cu; tests/gpu/test_vae_gpu --engines measures
 * every engine on the same graph). C++: cudnn_graph.cuh's builder. */
#ifndef CUDA_VAE_GRAPH_CUH
#define CUDA_VAE_GRAPH_CUH

#include <cudnn.h>
#include <stdint.h>

#include "cuda_vae_conv.h"
#include "cudnn_graph.cuh"
#include "kern_dtype.h"

/* The tensors' unique ids in the graph and the variant packs. */
enum { CUDA_VAE_UID_X = 1, CUDA_VAE_UID_W = 2, CUDA_VAE_UID_Y = 3 };

/* The convolution of shape k in storage type dt (bf16 or fp32; fp32
 * compute, cross-correlation, dilation 1, the key's strides and padding),
 * x and y channels-last, the filter stored (co, kt, kh, kw, ci), its
 * descriptors recorded in b's graph: the operation graph, or NULL with
 * b->st and b->what saying which descriptor cuDNN refused. */
cudnnBackendDescriptor_t cuda_vae_conv_graph(cudnnHandle_t dnn, kern_dtype dt,
                                             const cuda_vae_conv_key *k, att_builder *b);

/* An engine configuration: cuDNN's global engine index and knob choices
 * (cudnnBackendKnobType_t, value). */
#define CUDA_VAE_RULE_KNOBS 8
typedef struct cuda_vae_engine_cfg {
  int64_t engine;
  int nknobs;
  int64_t type[CUDA_VAE_RULE_KNOBS], val[CUDA_VAE_RULE_KNOBS];
} cuda_vae_engine_cfg;

/* The engine configuration the decoder runs shape k in dt with instead of
 * the legacy algorithm, or NULL (cuda_vae_graph.cu says where it comes
 * from). */
const cuda_vae_engine_cfg *cuda_vae_engine_rule(kern_dtype dt, int tf32,
                                                const cuda_vae_conv_key *k);

#endif
