/* staticpipe bench's plot (bench_plot, bench_report.h): the steady step
 * time, measured and predicted, against the dimension of the sweep that
 * varies, one panel per value of the other varying dimensions, one colour
 * per order run; its data DIR/bench-step.dat and script bench-step.gp,
 * and the PNG through gnuplot when it is installed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "bench_child.h"
#include "bench_report.h"
#include "log.h"

/* The dimensions a sweep varies, in the order x is chosen from: the first
 * that varies goes on x (the streamed share when none does), the others
 * that vary make the panels. The order is the series, never a dimension. */
enum { DIM_FRAC, DIM_RANKS, DIM_FRAMES, DIM_SIZE, DIM_BUDGET, DIM_DEVICES, NDIMS };
static const char *const dim_name[NDIMS] = {"stream-frac", "ranks", "frames", "size", "budget",
                                            "devices"};
static const char *const dim_axis[NDIMS] = {
    "streamed share of the blocks", "ranks", "frames", "pixels per frame (height x width)",
    "budget", "GPUs (--devices)"};

#define MAX_ORDERS 3

/* A row's value of dimension d as the sweep was given it. */
static void dim_label(const bench_row *r, int d, char *buf, size_t n) {
  switch (d) {
  case DIM_FRAC: snprintf(buf, n, r->frac_arg ? "%g" : "-", r->frac); break;
  case DIM_RANKS: snprintf(buf, n, "%d", r->ranks); break;
  case DIM_FRAMES: snprintf(buf, n, "%d", r->nframes); break;
  case DIM_SIZE: snprintf(buf, n, "%s", r->size); break;
  case DIM_BUDGET: snprintf(buf, n, "%s", r->budget); break;
  default: snprintf(buf, n, "%s", r->devices ? r->devices : "-"); break;
  }
}

/* What the plot is made of: which dimensions vary, the one on x, each
 * row's panel (-1: a failed row, not drawn) and the orders run. */
typedef struct layout {
  int vary[NDIMS], x, npanels, norders;
  int *panel;  /* (n) */
  int *first;  /* (npanels): the first row of each panel, for its title */
  const char *orders[MAX_ORDERS];
} layout;

static int same_dim(const bench_row *a, const bench_row *b, int d) {
  char la[512], lb[512];
  dim_label(a, d, la, sizeof la);
  dim_label(b, d, lb, sizeof lb);
  return strcmp(la, lb) == 0;
}

/* Two rows share a panel when every varying dimension but x is the same. */
static int same_panel(const layout *L, const bench_row *a, const bench_row *b) {
  for (int d = 0; d < NDIMS; d++)
    if (L->vary[d] && d != L->x && !same_dim(a, b, d)) return 0;
  return 1;
}

static void layout_make(const bench_row *rows, int n, layout *L) {
  memset(L, 0, sizeof *L);
  L->panel = sp_xmalloc((size_t)(n ? n : 1) * sizeof *L->panel);
  L->first = sp_xmalloc((size_t)(n ? n : 1) * sizeof *L->first);
  int ok0 = -1;
  for (int i = 0; i < n; i++) {
    if (rows[i].status || !rows[i].order[0]) continue;
    if (ok0 < 0) ok0 = i;
    for (int d = 0; d < NDIMS; d++) L->vary[d] |= !same_dim(&rows[ok0], &rows[i], d);
    int seen = 0;
    for (int k = 0; k < L->norders; k++) seen |= strcmp(L->orders[k], rows[i].order) == 0;
    if (!seen && L->norders < MAX_ORDERS) L->orders[L->norders++] = rows[i].order;
  }
  L->x = DIM_FRAC;
  for (int d = NDIMS - 1; d >= 0; d--)
    if (L->vary[d]) L->x = d;
  for (int i = 0; i < n; i++) {
    L->panel[i] = -1;
    if (rows[i].status || !rows[i].order[0]) continue;
    for (int p = 0; p < L->npanels && L->panel[i] < 0; p++)
      if (same_panel(L, &rows[L->first[p]], &rows[i])) L->panel[i] = p;
    if (L->panel[i] < 0) L->first[L->npanels] = i, L->panel[i] = L->npanels++;
  }
}

/* The row's x: the share streamed, ranks, frames, pixels per frame, or
 * for a budget or a GPU list its place among the values seen (its label
 * under the tick). */
static double x_value(const layout *L, const bench_row *rows, int i) {
  const bench_row *r = &rows[i];
  switch (L->x) {
  case DIM_FRAC: return r->streamed;
  case DIM_RANKS: return r->ranks;
  case DIM_FRAMES: return r->nframes;
  case DIM_SIZE: return (double)r->height * r->width;
  default: break;
  }
  int k = 0; /* the values first seen before r's */
  for (int j = 0; j < i; j++) {
    if (same_dim(&rows[j], r, L->x)) return k;
    int earlier = 0;
    for (int m = 0; m < j && !earlier; m++) earlier = same_dim(&rows[m], &rows[j], L->x);
    k += !earlier;
  }
  return k;
}

/* The panel's title: each varying dimension but x, "ranks 2, frames 9". */
static void panel_title(const layout *L, const bench_row *r, char *buf, size_t n) {
  size_t at = 0;
  buf[0] = '\0';
  for (int d = 0; d < NDIMS && at < n; d++) {
    if (!L->vary[d] || d == L->x) continue;
    char v[512];
    dim_label(r, d, v, sizeof v);
    at += (size_t)snprintf(buf + at, n - at, "%s%s %s", at ? ", " : "", dim_name[d], v);
  }
}

/* No quote or backslash in a string handed to gnuplot. */
static void plain(char *s) {
  for (; *s; s++)
    if (*s == '\'' || *s == '"' || *s == '\\') *s = ' ';
}

/* One block per panel and order with a point (blocks apart by two blank
 * lines, as gnuplot's `index` reads them): "x steady_ms predicted_ms
 * "label"". block[p * MAX_ORDERS + k] is its index, -1 for none. */
static void write_data(FILE *f, const bench_env_item *env, const layout *L,
                       const bench_row *rows, int n, int *block) {
  for (int i = 0; i < BENCH_ENV_ITEMS; i++) fprintf(f, "# %s: %s\n", env[i].key, env[i].value);
  fprintf(f, "# x: %s\n", dim_axis[L->x]);
  int nb = 0;
  for (int p = 0; p < L->npanels; p++)
    for (int k = 0; k < L->norders; k++) {
      block[p * MAX_ORDERS + k] = -1;
      for (int i = 0; i < n; i++) {
        if (L->panel[i] != p || strcmp(rows[i].order, L->orders[k]) != 0) continue;
        if (block[p * MAX_ORDERS + k] < 0) {
          char title[1024];
          panel_title(L, &rows[i], title, sizeof title);
          fprintf(f, "%s# order %s%s%s: x steady_step_ms predicted_ms label\n", nb ? "\n\n" : "",
                  L->orders[k], title[0] ? "; " : "", title);
          block[p * MAX_ORDERS + k] = nb++;
        }
        char label[512];
        dim_label(&rows[i], L->x, label, sizeof label);
        if (L->x == DIM_FRAC) snprintf(label, sizeof label, "%.2f", rows[i].streamed);
        plain(label);
        fprintf(f, "%.6g %.3f %.3f \"%s\"\n", x_value(L, rows, i),
                bench_row_steady_ms(&rows[i]), rows[i].predicted_ms, label);
      }
    }
  if (nb == 0) fprintf(f, "# no configuration succeeded\n");
}

/* The header's value for key ("" when it has none). */
static const char *env_value(const bench_env_item *env, const char *key) {
  for (int i = 0; i < BENCH_ENV_ITEMS; i++)
    if (strcmp(env[i].key, key) == 0) return env[i].value;
  return "";
}

/* The gnuplot script: a grid of panels (one without a grid for one). */
static void write_script(FILE *f, const char *dir, const bench_env_item *env, const layout *L,
                         const bench_row *rows, const int *block) {
  int cols = 1;
  while (cols * cols < L->npanels) cols++;
  const int lines = (L->npanels + cols - 1) / cols;
  char title[600];
  snprintf(title, sizeof title, "%s, commit %s", env_value(env, "gpu"),
           env_value(env, "commit"));
  plain(title);
  fprintf(f, "set terminal png size %d,%d\nset output '%s/bench-step.png'\n",
          cols > 1 ? 600 * cols : 900, lines > 1 ? 420 * lines : 600, dir);
  fprintf(f, "set xlabel '%s'\nset ylabel 'steady step time (ms)'\nset key left top\n",
          dim_axis[L->x]);
  if (L->x == DIM_FRAC) fprintf(f, "set xrange [-0.05:1.05]\n");
  else fprintf(f, "set offsets graph 0.1, graph 0.1, graph 0.1, graph 0.1\n");
  if (L->npanels > 1)
    fprintf(f, "set multiplot layout %d,%d title '%s'\n", lines, cols, title);
  for (int p = 0; p < L->npanels; p++) {
    char pt[1024];
    panel_title(L, &rows[L->first[p]], pt, sizeof pt);
    plain(pt);
    fprintf(f, "set title '%s'\nplot ", L->npanels > 1 ? pt : title);
    int first = 1;
    for (int k = 0; k < L->norders; k++) {
      const int b = block[p * MAX_ORDERS + k];
      if (b < 0) continue;
      fprintf(f,
              "%s'%s/bench-step.dat' index %d using 1:2:xtic(4) with points pt 7 lc %d "
              "title 'measured, %s', '' index %d using 1:3 with points pt 6 lc %d "
              "title 'planner prediction, %s'",
              first ? "" : ", ", dir, b, k + 1, L->orders[k], b, k + 1, L->orders[k]);
      first = 0;
    }
    fputc('\n', f);
  }
  if (L->npanels > 1) fprintf(f, "unset multiplot\n");
}

/* DIR/name written by fill, atomically; SP_OK or the error, logged. */
static int write_with(const char *dir, const char *name, void (*fill)(FILE *, void *),
                      void *ctx) {
  char path[4200], tmp[4300];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int rc = rank_atomic_begin(path, tmp, sizeof tmp);
  if (rc != SP_OK) return rc;
  FILE *f = fopen(tmp, "w");
  if (f) fill(f, ctx);
  if (!f || ferror(f) || fclose(f) != 0) {
    sp_log_error("%s: cannot write: %s", path, strerror(errno));
    rank_atomic_abort(tmp);
    return SP_ERR_RUNTIME;
  }
  return rank_atomic_commit(tmp, path);
}

typedef struct plot_ctx {
  const char *dir;
  const bench_env_item *env;
  const layout *L;
  const bench_row *rows;
  int n, *block;
} plot_ctx;

static void fill_data(FILE *f, void *c) {
  plot_ctx *p = c;
  write_data(f, p->env, p->L, p->rows, p->n, p->block);
}
static void fill_script(FILE *f, void *c) {
  plot_ctx *p = c;
  write_script(f, p->dir, p->env, p->L, p->rows, p->block);
}

int bench_plot(const char *dir, const bench_env_item *env, const bench_row *rows, int n) {
  layout L;
  layout_make(rows, n, &L);
  int *block = sp_xmalloc((size_t)(L.npanels ? L.npanels : 1) * MAX_ORDERS * sizeof *block);
  plot_ctx c = {dir, env, &L, rows, n, block};
  int rc = write_with(dir, "bench-step.dat", fill_data, &c);
  if (rc == SP_OK && L.npanels == 0) sp_log_warn("bench: no plot: no configuration succeeded");
  if (rc == SP_OK && L.npanels > 0) rc = write_with(dir, "bench-step.gp", fill_script, &c);
  if (rc == SP_OK && L.npanels > 0) {
    char script[4200], out[4300], log[4300];
    snprintf(script, sizeof script, "%s/bench-step.gp", dir);
    snprintf(out, sizeof out, "%s/gnuplot.out", dir);
    snprintf(log, sizeof log, "%s/gnuplot.log", dir);
    char *argv[] = {"gnuplot", script, NULL};
    int g = bench_run_child(argv, out, log);
    if (g == 0)
      sp_log_info("bench: wrote %s/bench-step.png (x: %s, %d panel%s)", dir, dim_axis[L.x],
                  L.npanels, L.npanels > 1 ? "s" : "");
    else
      sp_log_warn("bench: no plot (gnuplot %s; apt-get install gnuplot-nox draws it); the data "
                  "is in %s/bench-step.dat with %s",
                  g == 127 ? "not found" : "failed", dir, script);
  }
  free(block);
  free(L.panel);
  free(L.first);
  return rc;
}
