/* The Chrome trace (see trace.h). */
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_out.h"
#include "log.h"

#ifdef STATICPIPE_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

typedef struct span {
  const char *name, *cat;
  double t0, t1; /* seconds since the start barrier */
  int step, mb;
  double value; /* a counter's value (cat "counter") */
} span;

/* A span as it travels to rank 0: names as fixed strings. */
typedef struct wire_span {
  char name[24], cat[16];
  double t0, t1, value;
  int32_t step, mb;
} wire_span;

static int g_on = 0;
static double g_origin = 0;
static char g_path[4096];
static span *g_spans = NULL;
static size_t g_n = 0, g_cap = 0;

void rank_trace_start(const comm_world *w, const char *path) {
  snprintf(g_path, sizeof g_path, "%s", path);
  comm_barrier(w);
  g_origin = comm_now();
  g_on = 1;
}

int rank_trace_on(void) { return g_on; }
double rank_trace_now(void) { return comm_now(); }

static void add(const char *name, const char *cat, double t0, int step, int mb, double value) {
  if (g_n == g_cap) {
    g_cap = g_cap ? 2 * g_cap : 1024;
    span *p = realloc(g_spans, g_cap * sizeof *p);
    if (!p) sp_fatal("out of host memory for the trace (%zu spans)", g_cap);
    g_spans = p;
  }
  g_spans[g_n++] = (span){name, cat, t0 - g_origin, comm_now() - g_origin, step, mb, value};
}

void rank_trace_span(const char *name, const char *cat, double t0, int step, int mb) {
  if (g_on) add(name, cat, t0, step, mb, 0);
}

void rank_trace_counter(const char *name, double value) {
  if (g_on) add(name, "counter", comm_now(), -1, -1, value);
}

void rank_trace_push(const char *name) {
#ifdef STATICPIPE_HAVE_CUDA
  if (g_on) nvtxRangePushA(name);
#else
  (void)name;
#endif
}

void rank_trace_pop(void) {
#ifdef STATICPIPE_HAVE_CUDA
  if (g_on) nvtxRangePop();
#endif
}

/* One trace event: a complete span ("ph":"X") or a counter sample ("C"). */
static json_object *event_of(const wire_span *s, int rank) {
  json_object *e = json_object_new_object(), *args = json_object_new_object();
  json_object_object_add(e, "name", io_json_string(s->name));
  json_object_object_add(e, "pid", json_object_new_int(rank));
  json_object_object_add(e, "ts", json_object_new_double(s->t0 * 1e6));
  if (strcmp(s->cat, "counter") == 0) {
    json_object_object_add(e, "ph", json_object_new_string("C"));
    json_object_object_add(args, "value", json_object_new_double(s->value));
  } else {
    json_object_object_add(e, "cat", io_json_string(s->cat));
    json_object_object_add(e, "ph", json_object_new_string("X"));
    json_object_object_add(e, "tid", json_object_new_int(0));
    json_object_object_add(e, "dur", json_object_new_double((s->t1 - s->t0) * 1e6));
    json_object_object_add(args, "step", json_object_new_int(s->step));
    json_object_object_add(args, "micro_batch", json_object_new_int(s->mb));
  }
  json_object_object_add(e, "args", args);
  return e;
}

static int write_trace(const comm_world *w, const wire_span *all, const uint64_t *counts) {
  json_object *doc = json_object_new_object(), *events = json_object_new_array();
  json_object_object_add(doc, "displayTimeUnit", json_object_new_string("ms"));
  for (int r = 0; r < w->size; r++) {
    char name[600];
    snprintf(name, sizeof name, "rank %d (%s)", r, w->hosts[r]);
    json_object *e = json_object_new_object(), *args = json_object_new_object();
    json_object_object_add(e, "name", json_object_new_string("process_name"));
    json_object_object_add(e, "ph", json_object_new_string("M"));
    json_object_object_add(e, "pid", json_object_new_int(r));
    json_object_object_add(args, "name", io_json_string(name));
    json_object_object_add(e, "args", args);
    json_object_array_add(events, e);
  }
  size_t off = 0;
  for (int r = 0; r < w->size; r++)
    for (uint64_t i = 0; i < counts[r]; i++, off++)
      json_object_array_add(events, event_of(&all[off], r));
  json_object_object_add(doc, "traceEvents", events);
  int rc = io_json_write_file(g_path, "the trace", doc);
  json_object_put(doc);
  if (rc == SP_OK) sp_log_info("trace: wrote %s (%zu spans)", g_path, off);
  return rc;
}

int rank_trace_finish(const comm_world *w) {
  if (!g_on) return SP_OK;
  g_on = 0;
  uint64_t n = g_n, *counts = sp_xcalloc((size_t)w->size, sizeof *counts);
  comm_gather(w, &n, sizeof n, counts, 0);
  wire_span *mine = sp_xcalloc(g_n ? g_n : 1, sizeof *mine);
  for (size_t i = 0; i < g_n; i++) {
    snprintf(mine[i].name, sizeof mine[i].name, "%s", g_spans[i].name);
    snprintf(mine[i].cat, sizeof mine[i].cat, "%s", g_spans[i].cat);
    mine[i].t0 = g_spans[i].t0;
    mine[i].t1 = g_spans[i].t1;
    mine[i].step = g_spans[i].step;
    mine[i].mb = g_spans[i].mb;
    mine[i].value = g_spans[i].value;
  }
  int rc = SP_OK;
  /* Rank by rank over point-to-point messages (the counts differ). */
  if (w->rank == 0) {
    size_t total = 0;
    for (int r = 0; r < w->size; r++) total += counts[r];
    wire_span *all = sp_xcalloc(total ? total : 1, sizeof *all);
    memcpy(all, mine, g_n * sizeof *all);
    size_t off = g_n;
    for (int r = 1; r < w->size; r++) {
      comm_req q = {0};
      if (counts[r]) {
        comm_irecv(w, all + off, counts[r] * sizeof *all, r, 77, &q);
        comm_wait(w, &q, 0, "receiving a trace", NULL);
      }
      off += counts[r];
    }
    rc = write_trace(w, all, counts);
    free(all);
  } else if (g_n) {
    comm_req q = {0};
    comm_isend(w, mine, g_n * sizeof *mine, 0, 77, &q);
    comm_wait(w, &q, 0, "sending the trace", NULL);
  }
  free(mine);
  free(counts);
  free(g_spans);
  g_spans = NULL;
  g_n = g_cap = 0;
  return rc;
}
