/* Timing a GPU call for the benchmarks (tests/gpu/dev/ops_bench.c,
 * tests/gpu/test_attention_bench.c): untimed warm-up calls, then calls
 * between two CUDA events on the stream. */
#ifndef DEV_TIME_H
#define DEV_TIME_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Mean ms per call of call(arg) over iters >= 1 calls, after warm untimed
 * ones; the events are recorded on stream, where call must queue its work.
 * A failed CUDA call is fatal (CUDA_CHECK). */
double dev_time_ms(void (*call)(void *arg), void *arg, int warm, int iters, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
