/* Prompts' tokens through the whole UMT5 encoder: the text encoder's
 * driver, written once over its backend table (umt5_backend.h) and the
 * text encoder's model file (t5_file.h). The embedding rows of every
 * sequence are read at once, then each layer is read once into one host
 * buffer and handed to the backend: the CPU runs it on every sequence in
 * turn (memory: one layer's weights and one sequence's scratch, whatever
 * the number of prompts), the GPU keeps it (bf16) and runs each sequence
 * through all of them after the last; then the final norm. */
#ifndef UMT5_ENCODE_H
#define UMT5_ENCODE_H

#include <stdint.h>

#include "net.h"
#include "t5_file.h"

/* What an encoding took. */
typedef struct umt5_encode_times {
  double load_s;   /* embedding rows read, every layer read and placed (on CUDA rounded to
                      bf16 and copied up) */
  double encode_s; /* the sequences' runs (copies in and out included) */
  double first_s;  /* of which the first sequence's last run (on CUDA its whole forward,
                      with the one-time GEMM heuristics) */
} umt5_encode_times;

/* count token sequences on one backend. */
typedef struct umt5_encode_job {
  rank_device device;  /* the backend: the CPU (fp32), or CUDA (bf16 weights, fp32
                          accumulation; umt5_gpu_bytes at the longest sequence) */
  int cuda_device;     /* CUDA: the device index */
  int count;
  int32_t *const *ids; /* ids[i] (n[i]) */
  const int64_t *n;    /* 1 <= n[i] <= TOK_CONTEXT, every one a real token: the output rows
                          of padding are never needed (UMT5.md "Padding") */
  float *const *out;   /* out[i] (n[i], dim), caller-allocated */
} umt5_encode_job;

/* Encodes j's sequences with the encoder of m, reading each layer once for
 * all of them; the device memory (CUDA) is freed at the end. times (or
 * NULL) gets what the reading and the runs took. SP_OK, or a logged
 * SP_ERR_INPUT / SP_ERR_RUNTIME (a device this build has no backend for:
 * SP_ERR_INPUT). */
int umt5_encode(t5_model *m, const umt5_encode_job *j, umt5_encode_times *times);

/* Host bytes umt5_encode holds at its peak on the CPU for sequences of
 * total tokens, the longest of longest, on the encoder of in, outputs
 * included: the outputs plus the larger of the embedding phase (rows read
 * at once, the verified read's 64 MiB chunk) and the layer phase (one
 * layer's fp32 weights, one sequence's scratch), plus the bf16 file's
 * staging of a layer. What the planner counts for an encoding on the
 * CPU. */
uint64_t umt5_encode_host_bytes(const t5_model_info *in, int64_t total, int64_t longest);

#endif
