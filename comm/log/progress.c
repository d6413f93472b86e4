/* A long phase's progress line (progress.h): on a terminal redrawn in
 * place, in a log a line per tenth. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "progress.h"

/* The phase since sp_progress_begin, from any thread. */
static struct {
  pthread_mutex_t lock;
  int tty, log;       /* draw a line in place; write log lines */
  const char *what, *unit;
  uint64_t done, total;
  int tenths;         /* the last tenth written to the log */
  double t0, shown;   /* when it began, when the line was last drawn */
} g_progress = {.lock = PTHREAD_MUTEX_INITIALIZER};

static double progress_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "X.X of Y.Y MB (P%), R MB/s", "K of T layers (P%), R layers/s", or
 * without a total "X.X MB, R MB/s". */
static void progress_text(double now, char *buf, size_t n) {
  const double dt = now - g_progress.t0, scale = g_progress.unit ? 1.0 : 1e-6;
  const double done = (double)g_progress.done * scale, total = (double)g_progress.total * scale;
  const double rate = dt > 0 ? done / dt : 0.0;
  const char *unit = g_progress.unit ? g_progress.unit : "MB";
  const char *num = g_progress.unit ? "%.0f" : "%.1f";
  int at = snprintf(buf, n, num, done);
  if (g_progress.total) {
    at += snprintf(buf + at, n - (size_t)at, " of ");
    at += snprintf(buf + at, n - (size_t)at, num, total);
    at += snprintf(buf + at, n - (size_t)at, " %s (%.0f%%)", unit,
                   100.0 * (double)g_progress.done / (double)g_progress.total);
  } else {
    at += snprintf(buf + at, n - (size_t)at, " %s", unit);
  }
  snprintf(buf + at, n - (size_t)at, g_progress.unit ? ", %.2f %s/s" : ", %.0f %s/s", rate, unit);
}

/* Draws the line over itself ('\r', then clears what is left of it). */
static void progress_draw(double now, const char *end) {
  char text[192];
  progress_text(now, text, sizeof text);
  fprintf(stderr, "\r[rank %d] %s: %s\033[K%s", sp_log_rank(), g_progress.what, text, end);
  fflush(stderr);
  g_progress.shown = now;
}

/* A log line at each tenth reached, once the phase is long enough: the
 * tenth of the percentage the line prints (rounded, as progress_text
 * rounds it), so 69.7% written as "70%" counts as the seventh tenth and
 * 73% after it is not another line. */
static void progress_log(double now) {
  const long pct = lround(100.0 * (double)g_progress.done / (double)g_progress.total);
  const int tenths = (int)(pct / 10);
  if (tenths <= g_progress.tenths || now - g_progress.t0 < SP_PROGRESS_LOG_AFTER_S) return;
  g_progress.tenths = tenths;
  char text[192];
  progress_text(now, text, sizeof text);
  sp_log_info("%s: %s", g_progress.what, text);
}

void sp_progress_begin(const char *what, const char *unit, uint64_t total) {
  pthread_mutex_lock(&g_progress.lock);
  /* -q (warnings only) and ranks that do not speak show none. */
  const int speaks = sp_log_level() >= 1;
  g_progress.tty = speaks && isatty(STDERR_FILENO);
  g_progress.log = speaks && !g_progress.tty && total > 0;
  g_progress.what = what;
  g_progress.unit = unit;
  g_progress.done = 0;
  g_progress.total = total;
  g_progress.tenths = 0;
  g_progress.t0 = g_progress.shown = progress_now();
  if (g_progress.tty) progress_draw(g_progress.t0, "");
  pthread_mutex_unlock(&g_progress.lock);
}

void sp_progress_end(void) {
  pthread_mutex_lock(&g_progress.lock);
  if (g_progress.tty) progress_draw(progress_now(), "\n");
  g_progress.tty = g_progress.log = 0;
  pthread_mutex_unlock(&g_progress.lock);
}

void sp_progress_add(uint64_t n) {
  pthread_mutex_lock(&g_progress.lock);
  if (g_progress.tty || g_progress.log) {
    g_progress.done += n;
    const double now = progress_now();
    if (g_progress.tty && now - g_progress.shown >= 0.1) progress_draw(now, "");
    if (g_progress.log) progress_log(now);
  }
  pthread_mutex_unlock(&g_progress.lock);
}
