/* --trace FILE.json across the ranks: every rank starts recording at once
 * and rank 0 writes every rank's record into one file. The recording
 * itself (rank_trace_span, rank_trace_counter, ...) and the file's form
 * are io/trace_rec.h's. */
#ifndef RANK_TRACE_H
#define RANK_TRACE_H

#include "comm.h"
#include "trace_rec.h"

/* Collective. Starts recording on every rank (path: the final trace), the
 * clock's origin taken right after a barrier all ranks pass together, so
 * spans of different ranks on one host line up. */
void rank_trace_start(const comm_world *w, const char *path);
/* Collective. Gathers every rank's spans and rank 0 writes the file
 * atomically. Returns SP_OK or the write's status (logged). */
int rank_trace_finish(const comm_world *w);

#endif
