/* staticpipe bench's result files: from the rows of a sweep, DIR/bench.json,
 * bench.csv (a plain CSV: its header line first) with the environment in
 * bench-env.csv, and bench.md (the table, also printed to stderr). The
 * plot is bench_plot.c's, the sweep cmd_bench.c's. */
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "bench_report.h"
#include "log.h"

/* Mean and sample standard deviation of one field of a row's runs; the
 * deviation is < 0 with fewer than two runs, both are with none. */
typedef struct stat {
  double mean, sd;
} stat;

static stat row_stat(const bench_row *r, size_t field) {
  stat st = {-1, -1};
  if (r->runs == 0) return st;
  double sum = 0, sq = 0;
  for (int i = 0; i < r->runs; i++) sum += *(const double *)((const char *)&r->meas[i] + field);
  st.mean = sum / r->runs;
  if (r->runs < 2) return st;
  for (int i = 0; i < r->runs; i++) {
    double d = *(const double *)((const char *)&r->meas[i] + field) - st.mean;
    sq += d * d;
  }
  st.sd = sqrt(sq / (r->runs - 1));
  return st;
}

#define ROW_STAT(r, f) row_stat((r), offsetof(bench_meas, f))

/* The row's steady step time over its base row's; < 0 when there is none. */
static double vs_base(const bench_row *rows, const bench_row *r) {
  if (r->status || r->base < 0) return -1;
  const bench_row *b = &rows[r->base];
  const double base = ROW_STAT(b, steady_ms).mean;
  return b->status || base <= 0 ? -1 : ROW_STAT(r, steady_ms).mean / base;
}

/* The row's probed activation rate: only with a hop between two ranks. */
static stat act_stat(const bench_row *r) {
  stat none = {-1, -1};
  return r->ranks > 1 ? ROW_STAT(r, act_gbs) : none;
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

/* The links of a row in words: one hop as bench_link_format says it,
 * several as "GPU a-b: ..." joined by "; "; "" without GPUs. */
static void row_link_text(const bench_row *r, char *buf, size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  for (int h = 0; h < r->hops; h++) {
    char one[64];
    bench_link_format(&r->link[h], one, sizeof one);
    int w = r->hops == 1 ? snprintf(buf, size, "%s", one)
                         : snprintf(buf + len, size - len, "%sGPU %d-%d: %s", h ? "; " : "",
                                    r->hop_gpu[h], r->hop_gpu[h + 1], one);
    if (w < 0 || (size_t)w >= size - len) return;
    len += (size_t)w;
  }
}

static json_object *json_num_or_null(double v) { return v < 0 ? NULL : json_object_new_double(v); }

static json_object *row_json(const bench_row *rows, const bench_row *r) {
  json_object *j = json_object_new_object(), *a;
  char link[BENCH_MAX_HOPS * 80];
  row_link_text(r, link, sizeof link);
  const stat step = ROW_STAT(r, step_ms), steady = ROW_STAT(r, steady_ms),
             video = ROW_STAT(r, video_s), sps = ROW_STAT(r, steps_per_s), act = act_stat(r),
             load = ROW_STAT(r, load_s), load_gbs = ROW_STAT(r, load_gbs);
  json_object_object_add(j, "ranks", json_object_new_int(r->ranks));
  json_object_object_add(j, "devices", r->devices ? json_object_new_string(r->devices) : NULL);
  a = r->on_gpus ? json_object_new_array() : NULL;
  for (int q = 0; r->on_gpus && q < r->ranks; q++)
    json_object_array_add(a, json_object_new_int(r->hop_gpu[q]));
  json_object_object_add(j, "gpus", a);
  json_object_object_add(j, "link", r->hops ? json_object_new_string(link) : NULL);
  a = r->hops ? json_object_new_array() : NULL;
  for (int h = 0; h < r->hops; h++) {
    const bench_link *l = &r->link[h];
    json_object *o = json_object_new_object();
    json_object_object_add(o, "from", json_object_new_int(r->hop_gpu[h]));
    json_object_object_add(o, "to", json_object_new_int(r->hop_gpu[h + 1]));
    json_object_object_add(o, "type", json_object_new_string(bench_link_kind_name(l->kind)));
    json_object_object_add(o, "gen", l->gen ? json_object_new_int(l->gen) : NULL);
    json_object_object_add(o, "width", l->width ? json_object_new_int(l->width) : NULL);
    json_object_object_add(o, "path", l->path[0] ? json_object_new_string(l->path) : NULL);
    json_object_array_add(a, o);
  }
  json_object_object_add(j, "links", a);
  json_object_object_add(j, "model", json_object_new_string(r->model));
  json_object_object_add(j, "format", json_object_new_string(r->format));
  json_object_object_add(j, "precision",
                         r->precision ? json_object_new_string(r->precision) : NULL);
  json_object_object_add(j, "budget", json_object_new_string(r->budget));
  json_object_object_add(j, "frames", json_object_new_int(r->nframes));
  json_object_object_add(j, "size", json_object_new_string(r->size));
  json_object_object_add(j, "height", json_object_new_int(r->height));
  json_object_object_add(j, "width", json_object_new_int(r->width));
  json_object_object_add(j, "stream_frac", r->frac_arg ? json_object_new_double(r->frac) : NULL);
  json_object_object_add(j, "order_asked",
                         r->order_arg ? json_object_new_string(r->order_arg) : NULL);
  json_object_object_add(j, "order", r->order[0] ? json_object_new_string(r->order) : NULL);
  json_object_object_add(j, "status", json_object_new_int(r->status));
  json_object_object_add(j, "repeat", json_object_new_int(r->repeat));
  json_object_object_add(j, "runs", json_object_new_int(r->runs));
  const int ok = r->status == 0;
  const struct { const char *key; stat st; } stats[] = {
      {"step_ms", step},   {"steady_step_ms", steady}, {"video_s", video},
      {"steps_per_s", sps}, {"act_gbs", act}};
  for (size_t i = 0; i < sizeof stats / sizeof stats[0]; i++) {
    char sd[64];
    snprintf(sd, sizeof sd, "%s_sd", stats[i].key);
    json_object_object_add(j, stats[i].key, ok ? json_num_or_null(stats[i].st.mean) : NULL);
    json_object_object_add(j, sd, ok ? json_num_or_null(stats[i].st.sd) : NULL);
  }
  json_object_object_add(j, "act_mb",
                         ok && r->ranks > 1 ? json_object_new_double(r->act_mb) : NULL);
  json_object_object_add(j, "predicted_step_ms",
                         ok ? json_object_new_double(r->predicted_ms) : NULL);
  json_object_object_add(j, "vs_base", json_num_or_null(vs_base(rows, r)));
  json_object_object_add(j, "streamed_fraction", ok ? json_object_new_double(r->streamed) : NULL);
  json_object_object_add(j, "h2d_gb_per_step", ok ? json_object_new_double(r->h2d_gb) : NULL);
  json_object_object_add(j, "load_s", ok ? json_num_or_null(load.mean) : NULL);
  json_object_object_add(j, "load_gbs", ok ? json_num_or_null(load_gbs.mean) : NULL);
  json_object_object_add(j, "mem_vs_plan", ok ? json_object_new_double(r->mem_vs_plan) : NULL);
  return j;
}

/* A mean in a CSV field ("" when there is none), to the decimals given. */
static void csv_num(text *t, double v, int decimals) {
  if (v >= 0) text_add(t, ",%.*f", decimals, v);
  else text_add(t, ",");
}

/* A mean and, over two runs or more, its deviation in a markdown cell:
 * "12.3 ± 0.4", "12.3", or "-". */
static void md_stat(text *t, stat st, int decimals) {
  if (st.mean < 0) text_add(t, " - |");
  else if (st.sd < 0) text_add(t, " %.*f |", decimals, st.mean);
  else text_add(t, " %.*f ± %.*f |", decimals, st.mean, decimals, st.sd);
}

static void row_csv(text *csv, const bench_row *rows, const bench_row *r) {
  char link[BENCH_MAX_HOPS * 80], frac[32] = "";
  row_link_text(r, link, sizeof link);
  if (r->frac_arg) snprintf(frac, sizeof frac, "%g", r->frac);
  const int ok = r->status == 0;
  text_add(csv, "%d,\"%s\",%s,%s,\"%s\",\"%s\",\"%s\",%d,%s,%s,%s,%s,%d,%d", r->ranks,
           r->model, r->format, r->precision ? r->precision : "",
           r->devices ? r->devices : "", link, r->budget, r->nframes, r->size, frac,
           r->order_arg ? r->order_arg : "", r->order, r->status, r->runs);
  const stat st[] = {ROW_STAT(r, step_ms),     ROW_STAT(r, steady_ms), ROW_STAT(r, video_s),
                     ROW_STAT(r, steps_per_s), act_stat(r)};
  const int dec[] = {3, 3, 4, 4, 4};
  for (int i = 0; i < 5; i++) {
    csv_num(csv, ok ? st[i].mean : -1, dec[i]);
    csv_num(csv, ok ? st[i].sd : -1, dec[i]);
    if (i == 3) csv_num(csv, ok && r->ranks > 1 ? r->act_mb : -1, 4);
  }
  csv_num(csv, ok ? r->predicted_ms : -1, 3);
  csv_num(csv, vs_base(rows, r), 4);
  csv_num(csv, ok ? r->streamed : -1, 4);
  csv_num(csv, ok ? r->h2d_gb : -1, 4);
  csv_num(csv, ok ? ROW_STAT(r, load_s).mean : -1, 3);
  csv_num(csv, ok ? ROW_STAT(r, load_gbs).mean : -1, 3);
  csv_num(csv, ok ? r->mem_vs_plan : -1, 4);
  text_add(csv, "\n");
}

static void row_md(text *md, const bench_row *rows, const bench_row *r) {
  char link[BENCH_MAX_HOPS * 80], frac[32] = "-";
  row_link_text(r, link, sizeof link);
  if (r->frac_arg) snprintf(frac, sizeof frac, "%g", r->frac);
  const stat none = {-1, -1}, vb = {vs_base(rows, r), -1};
  const int ok = r->status == 0;
  text_add(md, "| %d | %s | %s | %s | %s | %s | `%s` | %d | %s | %s | %s | %s | %d |", r->ranks,
           r->model, r->format, r->precision ? r->precision : "-",
           r->devices ? r->devices : "-", link[0] ? link : "-", r->budget, r->nframes, r->size,
           frac, r->order[0] ? r->order : r->order_arg ? r->order_arg : "-",
           ok ? "ok" : "failed", r->runs);
  md_stat(md, ok ? ROW_STAT(r, step_ms) : none, 1);
  md_stat(md, ok ? ROW_STAT(r, steady_ms) : none, 1);
  md_stat(md, ok ? ROW_STAT(r, video_s) : none, 3);
  md_stat(md, ok ? ROW_STAT(r, steps_per_s) : none, 3);
  md_stat(md, (stat){ok && r->ranks > 1 ? r->act_mb : -1, -1}, 2);
  md_stat(md, ok ? act_stat(r) : none, 2);
  md_stat(md, (stat){ok ? r->predicted_ms : -1, -1}, 1);
  md_stat(md, vb, 3);
  md_stat(md, (stat){ok ? r->streamed : -1, -1}, 2);
  md_stat(md, (stat){ok ? r->h2d_gb : -1, -1}, 3);
  md_stat(md, ok ? ROW_STAT(r, load_s) : none, 2);
  md_stat(md, ok ? ROW_STAT(r, load_gbs) : none, 2);
  md_stat(md, (stat){ok ? r->mem_vs_plan : -1, -1}, 3);
  text_add(md, "\n");
}

/* A CSV field: quoted, each quote doubled. */
static void csv_quoted(text *t, const char *s) {
  text_add(t, "\"");
  for (; *s; s++) text_add(t, *s == '"' ? "\"\"" : "%c", *s);
  text_add(t, "\"");
}

double bench_row_steady_ms(const bench_row *r) { return ROW_STAT(r, steady_ms).mean; }

/* DIR/bench.json ({"environment": {...}, "rows": [...]}), bench.csv (one
 * line per row under the header line), bench-env.csv (key,value: the
 * environment) and bench.md (the environment as a list, then the
 * table). */
int bench_write_outputs(const char *dir, const bench_env_item *env, const bench_row *rows,
                        int n) {
  json_object *root = json_object_new_object(), *je = json_object_new_object(),
              *arr = json_object_new_array();
  text csv = {0}, md = {0}, envcsv = {0};
  text_add(&envcsv, "key,value\n");
  for (int i = 0; i < BENCH_ENV_ITEMS; i++) {
    json_object_object_add(je, env[i].key, json_object_new_string(env[i].value));
    text_add(&md, "- %s: %s\n", env[i].key, env[i].value);
    csv_quoted(&envcsv, env[i].key);
    text_add(&envcsv, ",");
    csv_quoted(&envcsv, env[i].value);
    text_add(&envcsv, "\n");
  }
  json_object_object_add(root, "environment", je);
  json_object_object_add(root, "rows", arr);
  text_add(&csv, "ranks,model,format,precision,devices,link,budget,frames,size,stream_frac,"
                 "order_asked,order,status,"
                 "runs,step_ms,step_ms_sd,steady_step_ms,steady_step_ms_sd,video_s,video_s_sd,"
                 "steps_per_s,steps_per_s_sd,act_mb,act_gbs,act_gbs_sd,predicted_ms,vs_base,"
                 "streamed,h2d_gb_per_step,load_s,load_gbs,mem_vs_plan\n");
  /* The table's order is the one run, or for a failed run the one asked. */
  text_add(&md, "\n| ranks | model | format | precision | GPUs | link | budget | frames | size | "
                "stream frac | order | "
                "status | runs | step ms | steady ms | s/video | steps/s | act MB | act GB/s | "
                "predicted ms | vs base | streamed | h2d GB/step | load s | load GB/s | "
                "mem/plan |\n|");
  for (int c = 0; c < 26; c++) text_add(&md, "---|");
  text_add(&md, "\n");
  for (int i = 0; i < n; i++) {
    json_object_array_add(arr, row_json(rows, &rows[i]));
    row_csv(&csv, rows, &rows[i]);
    row_md(&md, rows, &rows[i]);
  }
  int rc = write_file(dir, "bench.json",
                      json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY));
  if (rc == SP_OK) rc = write_file(dir, "bench.csv", csv.p);
  if (rc == SP_OK) rc = write_file(dir, "bench-env.csv", envcsv.p);
  if (rc == SP_OK) rc = write_file(dir, "bench.md", md.p);
  fputs(md.p, stderr);
  json_object_put(root);
  free(csv.p);
  free(md.p);
  free(envcsv.p);
  return rc;
}
