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
/* fp8: the blocks run in fp8 (MODEL.md "fp8 weights"): at width 2 (the
 * GPU) a block is wan_block_fp8_bytes, 1 byte per linear weight plus its
 * fp32 scales; at width 4 (the CPU, which holds the dequantised weights in
 * fp32) nothing changes. */
void rank_model_plan_sizes(const rank_model *m, int compute_dtype_bytes, int fp8,
                           uint64_t *block_bytes, plan_model *pm);

#endif
