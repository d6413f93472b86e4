/* The text encoder's backend table (net.h): what umt5_encode (the driver,
 * umt5_encode.c) asks of a backend. The CPU's is umt5_cpu.c (umt5_cpu),
 * the CUDA one's cuda/umt5_gpu.c (umt5_cuda).
 *
 * The driver reads each layer's weights into one host buffer of
 * umt5_layer_floats fp32 values and hands it over (set_layer), then the
 * final norm's (set_norm). A backend that holds every layer (all_layers:
 * the CUDA one, bf16 on the device) takes its copy at set_layer and runs
 * each sequence through all of them after the last; one that holds one
 * layer at a time (the CPU, fp32) runs it from the driver's buffer, which
 * stays as given until the next set call, on every sequence before the
 * next layer is read. Either way each sequence sees the same ops in the
 * same order. */
#ifndef UMT5_BACKEND_H
#define UMT5_BACKEND_H

#include <stdint.h>

#include "umt5.h"

typedef struct umt5_backend {
  int all_layers; /* 1: every layer held; 0: one at a time */
  /* An encoder of c for sequences of 1..max_len tokens, on CUDA device
   * cuda_device where that applies. SP_OK, or SP_ERR_INPUT /
   * SP_ERR_RUNTIME (logged: the sizes refused, no memory for it). */
  int (*create)(const umt5_config *c, int cuda_device, int64_t max_len, void **out);
  void (*destroy)(void *e);
  /* Layer l's weights (buf: umt5_layer_floats fp32 values). */
  void (*set_layer)(void *e, int layer, const float *buf);
  /* The final norm's weight (buf: dim fp32 values). */
  void (*set_norm)(void *e, const float *buf);
  /* Layers l0 .. l1 - 1 (each set; one at a time: l1 <= l0 + 1 and the
   * layer set last), then with norm the final norm (set), in place on x
   * (L, dim) host fp32, 1 <= L <= max_len. Waits for the device. */
  void (*run)(void *e, int l0, int l1, int norm, float *x, int64_t L);
} umt5_backend;

#endif
