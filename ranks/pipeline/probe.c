/* The link probe (see pipeline.h): the activation message between each
 * pair of neighbouring stages, timed on its own before sampling. */
#include "pipeline.h"

/* Round trips timed after the first, which sets up the connection (NCCL
 * connects a pair of ranks on its first transfer). */
enum { PROBE_TRIPS = 3, TAG_PROBE = 5 };

void rank_pipeline_probe(const comm_world *w, comm_transport *tp, rank_stage *s,
                         double timeout_s, double *gbs) {
  *gbs = 0;
  if (w->size < 2) return;
  const int me = w->rank;
  void *buf = rank_stage_act(s, 0), *stream = rank_stage_stream(s);
  const size_t bytes = rank_stage_act_bytes(s);
  comm_xfer x;
  /* Hop me - 1 first (this rank answers), then hop me (this rank asks):
   * the hops run one after the other down the chain, none overlapping. */
  if (me > 0)
    for (int t = 0; t <= PROBE_TRIPS; t++) {
      comm_tp_irecv(tp, buf, bytes, me - 1, TAG_PROBE, &x, stream);
      comm_tp_wait(tp, &x, timeout_s, "probing the link from the previous stage", NULL);
      comm_tp_isend(tp, buf, bytes, me - 1, TAG_PROBE, &x, stream);
      comm_tp_wait(tp, &x, timeout_s, "probing the link to the previous stage", NULL);
    }
  if (me < w->size - 1) {
    double t0 = 0;
    for (int t = 0; t <= PROBE_TRIPS; t++) {
      if (t == 1) t0 = comm_now();
      comm_tp_isend(tp, buf, bytes, me + 1, TAG_PROBE, &x, stream);
      comm_tp_wait(tp, &x, timeout_s, "probing the link to the next stage", NULL);
      comm_tp_irecv(tp, buf, bytes, me + 1, TAG_PROBE, &x, stream);
      comm_tp_wait(tp, &x, timeout_s, "probing the link from the next stage", NULL);
    }
    const double one_way_s = (comm_now() - t0) / (2.0 * PROBE_TRIPS);
    if (one_way_s > 0) *gbs = (double)bytes / one_way_s / 1e9;
  }
}
