/* What the CUDA text encoder (umt5_gpu.c) shows besides its backend table
 * (umt5_backend.h): CUDA builds only. */
#ifndef UMT5_CUDA_H
#define UMT5_CUDA_H

#include <stdint.h>

/* The bytes of the one device allocation of an encoder the CUDA table
 * created: its layout's total (umt5_gpu_bytes of its config and longest
 * sequence). */
uint64_t umt5_gpu_arena_bytes(const void *encoder);

#endif
