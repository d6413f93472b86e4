/* The planner's view of a model: sizes only, no weights. */
#ifndef RANK_MODEL_PLAN_H
#define RANK_MODEL_PLAN_H

#include "model_file.h"
#include "plan.h"

/* Fills pm from the model's metadata. block_bytes must hold the model's
 * number of blocks; pm->block_bytes points into it. compute_dtype_bytes is
 * the width weights have once loaded (2 on the GPU, 4 on the CPU backend,
 * which widens bf16 to fp32). A two-expert model counts both experts: a
 * stage holds both experts' copies of its groups, so each group's bytes are
 * the two copies together, and a streamed block is both copies in host
 * memory, copied in whole (streaming only the active expert's copy, or
 * swapping the experts at the switch, is not built). */
/* p: the precision the blocks run in (MODEL.md "fp8 weights", "int8
 * weights", "Quantized weights on the GPU"). At width 2 (the GPU) every
 * block counts as the largest block in the formats a CUDA stage keeps it
 * in (rank_model_device_block_bytes: an fp8 block 1 byte per linear weight
 * plus its fp32 scales, a GGUF one its blocks' bytes), and pm gets the
 * weight-only path's dequant scratch and the W8A8 buffers (plan_model's
 * dequant_bytes, w8a8, w8a8_epilogue: set for any W8A8; see
 * rank_model_plan_epilogue); at width 4 (the CPU, which holds every weight
 * in fp32) nothing changes. */
void rank_model_plan_sizes(const rank_model *m, int compute_dtype_bytes, wan_precision p,
                           uint64_t *block_bytes, plan_model *pm);
/* W8A8's epilogue scratch on the devs the plan is for: int8 always, fp8
 * unless every device is sm_90 (cuBLASLt applies both scales there;
 * kern_cuda_quant.h); a device of unknown compute capability (plan
 * --gpu-mem) counts as not sm_90. */
void rank_model_plan_epilogue(plan_model *pm, const plan_device *devs, int n);

#endif
