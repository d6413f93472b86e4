/* --trace FILE.json: a Chrome/Perfetto trace of what each rank did, one
 * process (pid) per rank, one complete event ("ph":"X") per span: the
 * embedding, a stage's blocks, the head, the sampler step, each wait for a
 * message and for a send, each sampling step. Times are microseconds since
 * a barrier all ranks passed together, so spans of different ranks on one
 * host line up. With the CUDA backend the same spans are NVTX ranges for
 * Nsight Systems. Off unless rank_trace_start was called: a span then costs
 * two clock reads. */
#ifndef RANK_TRACE_H
#define RANK_TRACE_H

#include "comm.h"

/* Collective. Starts recording on every rank (path: the final trace). */
void rank_trace_start(const comm_world *w, const char *path);
int rank_trace_on(void);
/* Seconds on the trace clock (comm_now). */
double rank_trace_now(void);
/* A span from t0 to now; name and cat must outlive the trace (literals).
 * mb, step: the micro-batch and step it belongs to (-1: none). */
void rank_trace_span(const char *name, const char *cat, double t0, int step, int mb);
/* A counter sample now ("ph":"C", e.g. device memory in use). */
void rank_trace_counter(const char *name, double value);
/* NVTX range around the same span where the CUDA backend is built. */
void rank_trace_push(const char *name);
void rank_trace_pop(void);
/* Collective. Gathers every rank's spans and rank 0 writes the file
 * atomically. Returns SP_OK or the write's status (logged). */
int rank_trace_finish(const comm_world *w);

#endif
