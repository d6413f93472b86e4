/* Assertions shared by the C tests: CHECK records a failure with its
 * file:line and message and goes on (the test exits non-zero at the end
 * when g_fail is set); CK ends the test at once when a CUDA call fails. */
#ifndef SP_TEST_CHECK_H
#define SP_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int g_fail __attribute__((unused)) = 0;
#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "\n");                               \
      g_fail = 1;                                          \
    }                                                      \
  } while (0)

#ifdef SP_TEST_CUDA
#include <cuda_runtime_api.h>
#define CK(call)                                                                \
  do {                                                                          \
    cudaError_t e_ = (call);                                                    \
    if (e_ != cudaSuccess) {                                                    \
      fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call,        \
              cudaGetErrorString(e_));                                          \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)
#endif

#endif
