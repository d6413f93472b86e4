/* The CUDA text encoder's device memory is the planner's layout
 * (planner/t5_layout.h): for synth:umt5-tiny and synth:umt5-xxl at 1, 77
 * and 512 tokens, the encoder the CUDA backend table creates (as
 * umt5_encode creates it) holds one arena whose bytes equal
 *   - the layout total of the shape written out here from the config
 *     (every layer's bf16 weights, umt5_layer_floats elements each);
 *   - the device bytes the planner counts for that encoding
 *     (job_prompt_cost, what `plan --t5` and a run's prompts report);
 * and the device's free memory drops by at least that much while it
 * lives. Exit 77 with one line when there is no CUDA device. */
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "job_prompt.h"
#include "log.h"
#include "sp_test.h"
#include "t5_file.h"
#include "t5_layout.h"
#include "umt5.h"
#include "umt5_backend.h"
#include "umt5_cuda.h"

static void check(const char *spec, int64_t L) {
  t5_model *m = NULL;
  if (t5_model_open(spec, 0, &m) != SP_OK) {
    CHECK(0, "%s: not opened", spec);
    return;
  }
  const umt5_config *c = &t5_model_get_info(m)->config;
  const plan_t5_shape s = {.dim = c->dim, .dim_attn = c->dim_attn, .ffn = c->ffn,
                           .layers = c->layers, .max_len = L,
                           .layer_bytes = (uint64_t)umt5_layer_floats(c) * 2};
  plan_t5_layout lay;
  char err[256];
  CHECK(plan_t5_layout_make(&s, &lay, err, sizeof err) == PLAN_OK, "%s: layout: %s", spec, err);
  job_t5_cost cost;
  CHECK(job_prompt_cost(spec, L, L, 1, &cost) == SP_OK, "%s: the planner's cost", spec);
  const umt5_backend *b = net_backend_ops(umt5_net(), RANK_DEVICE_CUDA);
  CHECK(b != NULL, "no CUDA text encoder in a CUDA build");
  size_t free0 = 0, free1 = 0, total = 0;
  void *e = NULL;
  CHECK(cudaMemGetInfo(&free0, &total) == cudaSuccess, "cudaMemGetInfo");
  if (b && b->create(c, 0, L, &e) == SP_OK) {
    CHECK(cudaMemGetInfo(&free1, &total) == cudaSuccess, "cudaMemGetInfo");
    const uint64_t arena = umt5_gpu_arena_bytes(e);
    printf("%s, %lld tokens: arena %llu bytes (%.3f GiB), layout %llu, plan %llu, device "
           "memory taken %zu\n",
           spec, (long long)L, (unsigned long long)arena, (double)arena / (1 << 30),
           (unsigned long long)lay.total, (unsigned long long)cost.device_bytes,
           free0 - free1);
    CHECK(arena == lay.total, "%s, %lld tokens: arena %llu, layout %llu", spec, (long long)L,
          (unsigned long long)arena, (unsigned long long)lay.total);
    CHECK(arena == cost.device_bytes, "%s, %lld tokens: arena %llu, the plan counts %llu", spec,
          (long long)L, (unsigned long long)arena, (unsigned long long)cost.device_bytes);
    CHECK(free0 >= free1 && free0 - free1 >= arena,
          "%s, %lld tokens: the device's free memory fell by %zu, the arena is %llu", spec,
          (long long)L, free0 - free1, (unsigned long long)arena);
    b->destroy(e);
  } else {
    CHECK(0, "%s, %lld tokens: the CUDA encoder was not created", spec, (long long)L);
  }
  t5_model_close(m);
}

int main(void) {
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    printf("test_t5_arena: skipped: no CUDA device (cudaGetDeviceCount: %s, %d devices)\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "ok", ndev);
    return 77;
  }
  sp_test_begin("test_t5_arena");
  const char *specs[] = {"synth:umt5-tiny:3", "synth:umt5-xxl"};
  const int64_t lens[] = {1, 77, 512};
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) check(specs[i], lens[j]);
  return sp_test_end();
}
