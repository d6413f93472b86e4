/* The CPU block runs the steps of ranks/nets/wan_dit/wan_steps.h: set_prompt the
 * context steps, blocks the block steps, each in the description's order
 * and each passing exactly the block weights the description gives it
 * (tests/common/step_check.h). Also checks the description itself: every
 * block tensor is read by exactly one step. tests/gpu/test_block_steps.c
 * checks the CUDA block against the same description. */
#include "step_check.h"

int main(void) {
  sp_test_begin("nets_test_block_steps");
  step_check_description();
  step_check_stage("cpu", RANK_DEVICE_CPU, 0, 0);
  return sp_test_end();
}
