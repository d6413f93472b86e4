/* Building cuDNN backend (graph API) operation graphs, for the fused
 * attention (cuda_cudnn_attn.cu) and the VAE convolutions' engine sweep
 * (tests/gpu/dev/vae_engine_bench.cu): a builder
 * that records every descriptor it creates in an att_graph and keeps the
 * first failure, so a graph is written as straight-line code and checked
 * once at the end. The builders log nothing: the caller reports a refusal
 * with its cause. Only attributes cuDNN 9.0 already has are used. */
#ifndef SP_CUDNN_GRAPH_CUH
#define SP_CUDNN_GRAPH_CUH

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <stdint.h>

#include "lib_check.cuh"

/* Workspace above this is refused: an engine that wants it is not the fused
 * one (it would be materialising scores). */
#define ATT_MAX_WORKSPACE ((int64_t)1 << 30)
#define ATT_MAX_DESCS 96 /* form 3: 14 tensors, 10 ops of 2, graph, heuristics, 8 configs */

/* One built graph: its plan and every descriptor it was built from (kept
 * alive with it, freed by att_graph_release). */
typedef struct att_graph {
  cudnnBackendDescriptor_t plan;
  cudnnBackendDescriptor_t descs[ATT_MAX_DESCS];
  int ndescs;
  int64_t workspace; /* bytes the plan needs */
  int64_t engine;    /* cuDNN's global index of the plan's engine */
  int nondet_used;   /* 1: cuDNN marks that engine nondeterministic (no other finalised) */
} att_graph;

typedef struct att_builder {
  att_graph *g;
  cudnnStatus_t st; /* first failure */
  const char *what; /* what failed first */
} att_builder;

/* Each does nothing once b->st holds a failure. */
cudnnBackendDescriptor_t att_new(att_builder *b, cudnnBackendDescriptorType_t type,
                                 const char *what);
void att_set(att_builder *b, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
             cudnnBackendAttributeType_t type, int64_t n, const void *val, const char *what);
void att_fin(att_builder *b, cudnnBackendDescriptor_t d, const char *what);
/* A 4-d tensor: dims, strides, type; virtual or by-value as asked. */
cudnnBackendDescriptor_t att_tensor(att_builder *b, int64_t uid, const int64_t dims[4],
                                    const int64_t strides[4], cudnnDataType_t type,
                                    int is_virtual, int by_value);
/* The same with nd dims (the VAE convolutions' 5-d tensors,
 * tests/gpu/dev/vae_engine_bench.cu). */
cudnnBackendDescriptor_t att_tensor_nd(att_builder *b, int64_t uid, int nd, const int64_t *dims,
                                       const int64_t *strides, cudnnDataType_t type,
                                       int is_virtual, int by_value);
/* C = A B, fp32 compute. */
cudnnBackendDescriptor_t att_matmul(att_builder *b, cudnnBackendDescriptor_t A,
                                    cudnnBackendDescriptor_t B, cudnnBackendDescriptor_t C);
/* y = mode(x[, bb]), fp32 math; bb NULL for unary modes. */
cudnnBackendDescriptor_t att_pw(att_builder *b, cudnnPointwiseMode_t mode,
                                cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t bb,
                                cudnnBackendDescriptor_t y);
/* y = reduce(x) over the dims where y is 1, fp32. */
cudnnBackendDescriptor_t att_reduce(att_builder *b, cudnnReduceTensorOp_t mode,
                                    cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y);

cudnnStatus_t att_graph_finalize(cudnnHandle_t handle, att_builder *b,
                                 cudnnBackendDescriptor_t *ops, int nops, const char **what);
/* A plan of one named engine configuration of operation graph `graph`
 * (instead of the heuristics' list): engine global index `engine` with the
 * knob choices types[i] = vals[i], its descriptors recorded in b's graph.
 * SUCCESS with b->g's plan, workspace and engine set; else cuDNN's status
 * (or NOT_SUPPORTED when cuDNN marks the engine nondeterministic) with
 * *what naming the step. */
cudnnStatus_t att_engine_plan(cudnnHandle_t handle, att_builder *b, cudnnBackendDescriptor_t graph,
                              int64_t engine, int nknobs, const int64_t *types,
                              const int64_t *vals, const char **what);
void att_graph_release(att_graph *g);

/* Runs a finalised plan on `stream` with the tensors uids[i] at ptrs[i]
 * (by-value tensors: a host pointer to the value). Failures are fatal. */
void att_graph_execute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan, int64_t n,
                       const int64_t *uids, void *const *ptrs, void *workspace,
                       cudaStream_t stream);

#endif
