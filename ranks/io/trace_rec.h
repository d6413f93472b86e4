/* The trace recorder and the trace file (--trace FILE.json, a
 * Chrome/Perfetto trace): what one rank did, as spans (one complete event,
 * "ph":"X", each: the embedding, a stage's blocks, the head, the sampler
 * step, each wait for a message and for a send, each sampling step) and
 * counter samples ("ph":"C", e.g. device memory in use), and the file
 * that holds every rank's, one process (pid) per rank. Times are seconds
 * on the monotonic clock since the recording began. With the CUDA backend
 * the same spans are NVTX ranges for Nsight Systems. Off until
 * io_trace_begin: a span then costs two clock reads.
 *
 * Starting every rank together and gathering the ranks' records to the
 * one that writes the file is pipeline/trace.h's (collective); anything
 * below the pipeline (a CUDA stage) records through this header alone. */
#ifndef IO_TRACE_REC_H
#define IO_TRACE_REC_H

#include <stddef.h>
#include <stdint.h>

/* One recorded span or counter sample, in the form it travels between
 * ranks: names as fixed strings. */
typedef struct io_trace_event {
  char name[24], cat[16]; /* cat "counter": a counter sample */
  double t0, t1, value;   /* seconds since the recording began; a counter's value */
  int32_t step, mb;
} io_trace_event;

/* Starts recording now (the clock's origin); path: the final trace, for
 * whoever writes it (io_trace_path). */
void io_trace_begin(const char *path);
int rank_trace_on(void);
/* Seconds on the trace clock (monotonic, the clock comm_now reads). */
double rank_trace_now(void);
/* A span from t0 to now; name and cat must outlive the recording
 * (literals). mb, step: the micro-batch and step it belongs to (-1:
 * none). */
void rank_trace_span(const char *name, const char *cat, double t0, int step, int mb);
/* A counter sample now. */
void rank_trace_counter(const char *name, double value);
/* NVTX range around the same span where the CUDA backend is built. */
void rank_trace_push(const char *name);
void rank_trace_pop(void);

/* Stops recording and hands over what was recorded: *n events (free()),
 * never NULL. */
io_trace_event *io_trace_end(size_t *n);
/* The path io_trace_begin was given. */
const char *io_trace_path(void);

/* Writes the trace file at path atomically: nranks processes named "rank R
 * (HOST)" (hosts[r], 64 bytes each), then counts[r] events of each rank
 * r in order from all. SP_OK or the write's status (logged). */
int io_trace_write(const char *path, int nranks, const char (*hosts)[64],
                   const io_trace_event *all, const uint64_t *counts);

#endif
