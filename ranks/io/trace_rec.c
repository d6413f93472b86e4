/* The trace recorder and the trace file (see trace_rec.h). */
#include "trace_rec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json_out.h"
#include "log.h"

#ifdef STATICPIPE_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

typedef struct span {
  const char *name, *cat;
  double t0, t1; /* seconds since the recording began */
  int step, mb;
  double value; /* a counter's value (cat "counter") */
} span;

static int g_on = 0;
static double g_origin = 0;
static char g_path[4096];
static span *g_spans = NULL;
static size_t g_n = 0, g_cap = 0;

double rank_trace_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void io_trace_begin(const char *path) {
  snprintf(g_path, sizeof g_path, "%s", path);
  g_origin = rank_trace_now();
  g_on = 1;
}

int rank_trace_on(void) { return g_on; }
const char *io_trace_path(void) { return g_path; }

static void add(const char *name, const char *cat, double t0, int step, int mb, double value) {
  if (g_n == g_cap) {
    g_cap = g_cap ? 2 * g_cap : 1024;
    span *p = realloc(g_spans, g_cap * sizeof *p);
    if (!p) sp_fatal("out of host memory for the trace (%zu spans)", g_cap);
    g_spans = p;
  }
  g_spans[g_n++] = (span){name, cat, t0 - g_origin, rank_trace_now() - g_origin, step, mb, value};
}

void rank_trace_span(const char *name, const char *cat, double t0, int step, int mb) {
  if (g_on) add(name, cat, t0, step, mb, 0);
}

void rank_trace_counter(const char *name, double value) {
  if (g_on) add(name, "counter", rank_trace_now(), -1, -1, value);
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

io_trace_event *io_trace_end(size_t *n) {
  g_on = 0;
  io_trace_event *out = sp_xcalloc(g_n ? g_n : 1, sizeof *out);
  for (size_t i = 0; i < g_n; i++) {
    snprintf(out[i].name, sizeof out[i].name, "%s", g_spans[i].name);
    snprintf(out[i].cat, sizeof out[i].cat, "%s", g_spans[i].cat);
    out[i].t0 = g_spans[i].t0;
    out[i].t1 = g_spans[i].t1;
    out[i].step = g_spans[i].step;
    out[i].mb = g_spans[i].mb;
    out[i].value = g_spans[i].value;
  }
  *n = g_n;
  free(g_spans);
  g_spans = NULL;
  g_n = g_cap = 0;
  return out;
}

/* One trace event: a complete span ("ph":"X") or a counter sample ("C"). */
static json_object *event_of(const io_trace_event *s, int rank) {
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

int io_trace_write(const char *path, int nranks, const char (*hosts)[64],
                   const io_trace_event *all, const uint64_t *counts) {
  json_object *doc = json_object_new_object(), *events = json_object_new_array();
  json_object_object_add(doc, "displayTimeUnit", json_object_new_string("ms"));
  for (int r = 0; r < nranks; r++) {
    char name[600];
    snprintf(name, sizeof name, "rank %d (%s)", r, hosts[r]);
    json_object *e = json_object_new_object(), *args = json_object_new_object();
    json_object_object_add(e, "name", json_object_new_string("process_name"));
    json_object_object_add(e, "ph", json_object_new_string("M"));
    json_object_object_add(e, "pid", json_object_new_int(r));
    json_object_object_add(args, "name", io_json_string(name));
    json_object_object_add(e, "args", args);
    json_object_array_add(events, e);
  }
  size_t off = 0;
  for (int r = 0; r < nranks; r++)
    for (uint64_t i = 0; i < counts[r]; i++, off++)
      json_object_array_add(events, event_of(&all[off], r));
  json_object_object_add(doc, "traceEvents", events);
  int rc = io_json_write_file(path, "the trace", doc);
  json_object_put(doc);
  if (rc == SP_OK) sp_log_info("trace: wrote %s (%zu spans)", path, off);
  return rc;
}
