/* The trace across the ranks (see trace.h). */
#include "trace.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

void rank_trace_start(const comm_world *w, const char *path) {
  comm_barrier(w);
  io_trace_begin(path);
}

int rank_trace_finish(const comm_world *w) {
  if (!rank_trace_on()) return SP_OK;
  size_t n_mine = 0;
  io_trace_event *mine = io_trace_end(&n_mine);
  uint64_t n = n_mine, *counts = sp_xcalloc((size_t)w->size, sizeof *counts);
  comm_gather(w, &n, sizeof n, counts, 0);
  int rc = SP_OK;
  /* Rank by rank over point-to-point messages (the counts differ). */
  if (w->rank == 0) {
    size_t total = 0;
    for (int r = 0; r < w->size; r++) total += counts[r];
    io_trace_event *all = sp_xcalloc(total ? total : 1, sizeof *all);
    memcpy(all, mine, n_mine * sizeof *all);
    size_t off = n_mine;
    for (int r = 1; r < w->size; r++) {
      comm_req q = {0};
      if (counts[r]) {
        comm_irecv(w, all + off, counts[r] * sizeof *all, r, 77, &q);
        comm_wait(w, &q, 0, "receiving a trace", NULL);
      }
      off += counts[r];
    }
    rc = io_trace_write(io_trace_path(), w->size, (const char (*)[64])w->hosts, all, counts);
    free(all);
  } else if (n_mine) {
    comm_req q = {0};
    comm_isend(w, mine, n_mine * sizeof *mine, 0, 77, &q);
    comm_wait(w, &q, 0, "sending the trace", NULL);
  }
  free(mine);
  free(counts);
  return rc;
}
