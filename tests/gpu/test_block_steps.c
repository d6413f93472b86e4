/* The CUDA block runs the steps of ranks/nets/wan_dit/wan_steps.h, as the CPU block
 * does (tests/nets/test_block_steps.c): set_prompt the context steps,
 * blocks the block steps in the description's order with exactly the
 * weights it gives each step (tests/common/step_check.h). Run resident and
 * unchunked (the very sequence of the CPU block), in chunks of 5 rows (16
 * tokens: chunks of 5, 5, 5, 1; each block step once per chunk), and
 * streamed through a slot. Exit 77 with one line when there is no CUDA
 * device. */
#include <stdio.h>

#include "step_check.h"

int main(void) {
  if (!rank_cuda_available()) {
    printf("gpu_test_block_steps: no CUDA device, skipped\n");
    return 77;
  }
  sp_test_begin("gpu_test_block_steps");
  step_check_description();
  step_check_stage("cuda resident", RANK_DEVICE_CUDA, 0, 0);
  step_check_stage("cuda chunked", RANK_DEVICE_CUDA, 5, 0);
  step_check_stage("cuda streamed", RANK_DEVICE_CUDA, 0, 1);
  return sp_test_end();
}
