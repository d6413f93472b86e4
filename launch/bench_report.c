/* staticpipe bench's result files: from the rows of a sweep, DIR/bench.json,
 * bench.csv and bench.md (the table, also printed to stderr), the plot's
 * data bench-step.dat, and the PNG plot through gnuplot when it is
 * installed. The sweep itself is cmd_bench.c. */
#include <errno.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "bench_report.h"
#include "log.h"

/* The row's steady step time over its base row's; < 0 when there is none. */
static double vs_base(const bench_row *rows, const bench_row *r) {
  if (r->status || r->base < 0) return -1;
  const bench_row *b = &rows[r->base];
  return b->status || b->steady_ms <= 0 ? -1 : r->steady_ms / b->steady_ms;
}

/* A growing text buffer. */
typedef struct text {
  char *p;
  size_t len, cap;
} text;

__attribute__((format(printf, 2, 3))) static void text_add(text *t, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (t->p && t->len + (size_t)n < t->cap) {
      t->len += (size_t)n;
      return;
    }
    size_t cap = 2 * (t->cap + (size_t)n) + 256;
    char *p = sp_xmalloc(cap);
    if (t->p) memcpy(p, t->p, t->len + 1);
    free(t->p);
    t->p = p;
    t->cap = cap;
  }
}

/* Writes text to DIR/name atomically. */
static int write_file(const char *dir, const char *name, const char *s) {
  char path[4200], tmp[4300];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int rc = rank_atomic_begin(path, tmp, sizeof tmp);
  if (rc != SP_OK) return rc;
  FILE *f = fopen(tmp, "w");
  if (!f || fputs(s, f) < 0 || fclose(f) != 0) {
    sp_log_error("%s: cannot write", path);
    rank_atomic_abort(tmp);
    return SP_ERR_RUNTIME;
  }
  return rank_atomic_commit(tmp, path);
}

/* The orders that rows ran, each once, in the order first seen. */
static int orders_run(const bench_row *rows, int n, const char **names) {
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (rows[i].status || !rows[i].order[0]) continue;
    int seen = 0;
    for (int j = 0; j < k; j++) seen |= strcmp(names[j], rows[i].order) == 0;
    if (!seen && k < 3) names[k++] = rows[i].order;
  }
  return k;
}

static json_object *json_num_or_null(double v) { return v < 0 ? NULL : json_object_new_double(v); }

/* DIR/bench.json, bench.csv, bench.md and the plot's data, bench-step.dat
 * (one block per order run, blocks apart by two blank lines, as gnuplot's
 * `index` reads them). */
int bench_write_outputs(const char *dir, const bench_row *rows, int n) {
  json_object *arr = json_object_new_array();
  text csv = {0}, md = {0}, dat = {0};
  text_add(&csv, "ranks,budget,frames,size,stream_frac,order_asked,order,status,step_ms,"
                 "steady_step_ms,predicted_ms,vs_base,streamed,h2d_gb_per_step,load_s,load_gbs,mem_vs_plan\n");
  /* The table's order is the one run, or for a failed run the one asked. */
  text_add(&md, "| ranks | budget | frames | size | stream frac | order | status | step ms | "
                "steady ms | predicted ms | vs base | streamed | h2d GB/step | load s | "
                "load GB/s | mem/plan |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < n; i++) {
    const bench_row *r = &rows[i];
    double vb = vs_base(rows, r);
    json_object *j = json_object_new_object();
    json_object_object_add(j, "ranks", json_object_new_int(r->ranks));
    json_object_object_add(j, "budget", json_object_new_string(r->budget));
    json_object_object_add(j, "frames", json_object_new_string(r->frames));
    json_object_object_add(j, "size", json_object_new_string(r->size));
    json_object_object_add(j, "stream_frac", r->frac_arg ? json_object_new_double(r->frac) : NULL);
    json_object_object_add(j, "order_asked",
                           r->order_arg ? json_object_new_string(r->order_arg) : NULL);
    json_object_object_add(j, "order", r->order[0] ? json_object_new_string(r->order) : NULL);
    json_object_object_add(j, "status", json_object_new_int(r->status));
    json_object_object_add(j, "step_ms", json_object_new_double(r->step_ms));
    json_object_object_add(j, "steady_step_ms", json_object_new_double(r->steady_ms));
    json_object_object_add(j, "predicted_step_ms", json_object_new_double(r->predicted_ms));
    json_object_object_add(j, "vs_base", json_num_or_null(vb));
    json_object_object_add(j, "streamed_fraction", json_object_new_double(r->streamed));
    json_object_object_add(j, "h2d_gb_per_step", json_object_new_double(r->h2d_gb));
    json_object_object_add(j, "load_s", json_object_new_double(r->load_s));
    json_object_object_add(j, "load_gbs", json_object_new_double(r->load_gbs));
    json_object_object_add(j, "mem_vs_plan", json_object_new_double(r->mem_vs_plan));
    json_object_array_add(arr, j);
    char frac[32] = "", vbs[32] = "";
    if (r->frac_arg) snprintf(frac, sizeof frac, "%g", r->frac);
    if (vb >= 0) snprintf(vbs, sizeof vbs, "%.4f", vb);
    text_add(&csv, "%d,\"%s\",%s,%s,%s,%s,%s,%d,%.3f,%.3f,%.3f,%s,%.4f,%.4f,%.3f,%.3f,%.4f\n",
             r->ranks, r->budget, r->frames, r->size, frac, r->order_arg ? r->order_arg : "",
             r->order, r->status, r->step_ms,
             r->steady_ms, r->predicted_ms, vbs, r->streamed, r->h2d_gb, r->load_s, r->load_gbs,
             r->mem_vs_plan);
    if (vb >= 0) snprintf(vbs, sizeof vbs, "%.3f", vb);
    text_add(&md,
             "| %d | `%s` | %s | %s | %s | %s | %s | %.1f | %.1f | %.1f | %s | %.2f | %.3f | "
             "%.2f | %.2f | %.3f |\n",
             r->ranks, r->budget, r->frames, r->size, r->frac_arg ? frac : "-",
             r->order[0] ? r->order : r->order_arg ? r->order_arg : "-",
             r->status ? "failed" : "ok", r->step_ms, r->steady_ms, r->predicted_ms,
             vb >= 0 ? vbs : "-", r->streamed, r->h2d_gb, r->load_s, r->load_gbs, r->mem_vs_plan);
  }
  const char *names[3];
  int norders = orders_run(rows, n, names);
  for (int k = 0; k < norders; k++) {
    text_add(&dat, "%s# order %s: streamed steady_step_ms predicted_ms\n", k ? "\n\n" : "",
             names[k]);
    for (int i = 0; i < n; i++)
      if (!rows[i].status && strcmp(rows[i].order, names[k]) == 0)
        text_add(&dat, "%.4f %.3f %.3f\n", rows[i].streamed, rows[i].steady_ms,
                 rows[i].predicted_ms);
  }
  if (!dat.p) text_add(&dat, "# no configuration succeeded\n");
  int rc = write_file(dir, "bench.json",
                      json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PRETTY));
  if (rc == SP_OK) rc = write_file(dir, "bench.csv", csv.p);
  if (rc == SP_OK) rc = write_file(dir, "bench.md", md.p);
  if (rc == SP_OK) rc = write_file(dir, "bench-step.dat", dat.p);
  fputs(md.p, stderr);
  json_object_put(arr);
  free(csv.p);
  free(md.p);
  free(dat.p);
  return rc;
}

/* PNG plot of the steady step time against the streamed share, measured
 * and predicted, one colour per order run, when gnuplot is there; its
 * absence is said, not an error. */
void bench_plot(const char *dir, const bench_row *rows, int n) {
  const char *names[3];
  int norders = orders_run(rows, n, names);
  if (norders == 0) {
    sp_log_warn("bench: no plot: no configuration succeeded");
    return;
  }
  char script[4200];
  snprintf(script, sizeof script, "%s/bench-step.gp", dir);
  FILE *f = fopen(script, "w");
  if (!f) {
    sp_log_warn("bench: no plot: cannot write %s: %s", script, strerror(errno));
    return;
  }
  fprintf(f,
          "set terminal png size 900,600\nset output '%s/bench-step.png'\n"
          "set xlabel 'streamed share of the blocks'\nset ylabel 'steady step time (ms)'\n"
          "set xrange [-0.05:1.05]\nset key left top\nplot ",
          dir);
  for (int k = 0; k < norders; k++)
    fprintf(f,
            "%s'%s/bench-step.dat' index %d using 1:2 with points pt 7 lc %d title 'measured, %s', "
            "'' index %d using 1:3 with points pt 6 lc %d title 'planner prediction, %s'",
            k ? ", " : "", dir, k, k + 1, names[k], k, k + 1, names[k]);
  fputc('\n', f);
  if (fclose(f) != 0) {
    sp_log_warn("bench: no plot: cannot write %s", script);
    return;
  }
  char *argv[] = {"gnuplot", script, NULL};
  char out[4300], log[4300];
  snprintf(out, sizeof out, "%s/gnuplot.out", dir);
  snprintf(log, sizeof log, "%s/gnuplot.log", dir);
  int rc = bench_run_child(argv, out, log);
  if (rc == 0)
    sp_log_info("bench: wrote %s/bench-step.png", dir);
  else
    sp_log_warn("bench: no plot (gnuplot %s; apt-get install gnuplot-nox draws it); the data "
                "is in %s/bench-step.dat with %s",
                rc == 127 ? "not found" : "failed", dir, script);
}
