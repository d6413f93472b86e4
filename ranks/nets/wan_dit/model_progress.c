/* The load's progress line on a terminal (rank_model_progress_begin,
 * model_file.h), fed by the model file's reader. */
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "model_file_impl.h"

/* The load's progress line (rank_model_progress_begin): the groups read
 * since it began, from any thread. */
static struct {
  pthread_mutex_t lock;
  int on;
  uint64_t bytes;
  double t0, shown; /* when it began, when the line was last drawn */
} g_progress = {.lock = PTHREAD_MUTEX_INITIALIZER};

static double progress_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Draws the line over itself ('\r', then clears what is left of it). */
static void progress_draw(double now, const char *end) {
  const double dt = now - g_progress.t0;
  fprintf(stderr, "\r[rank %d] reading weights: %.1f MB, %.0f MB/s\033[K%s", sp_log_rank(),
          (double)g_progress.bytes / 1e6, dt > 0 ? (double)g_progress.bytes / 1e6 / dt : 0.0,
          end);
  fflush(stderr);
  g_progress.shown = now;
}

void rank_model_progress_begin(void) {
  pthread_mutex_lock(&g_progress.lock);
  /* -q (warnings only) and ranks that do not speak show none either. */
  g_progress.on = isatty(STDERR_FILENO) && sp_log_level() >= 1;
  g_progress.bytes = 0;
  g_progress.t0 = g_progress.shown = progress_now();
  pthread_mutex_unlock(&g_progress.lock);
}

void rank_model_progress_end(void) {
  pthread_mutex_lock(&g_progress.lock);
  if (g_progress.on) progress_draw(progress_now(), "\n");
  g_progress.on = 0;
  pthread_mutex_unlock(&g_progress.lock);
}

void rank_model_progress_add(uint64_t bytes) {
  pthread_mutex_lock(&g_progress.lock);
  if (g_progress.on) {
    g_progress.bytes += bytes;
    const double now = progress_now();
    if (now - g_progress.shown >= 0.1) progress_draw(now, "");
  }
  pthread_mutex_unlock(&g_progress.lock);
}
