/* Logging and the fatal reporter (see log.h). */
#include "log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_rank = 0;
static int g_nranks = 1;
static int g_level = 1;
static char g_device[128] = "cpu";
static FILE *g_file = NULL;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_errors = 0;
static char g_last_error[1024] = ""; /* text of the last error line */

#define SP_MAX_HOOKS 8
static sp_abort_hook g_hooks[SP_MAX_HOOKS];
static int g_nhooks = 0;

void sp_log_set_rank(int rank, int nranks) { g_rank = rank; g_nranks = nranks; }
int sp_log_rank(void) { return g_rank; }
void sp_log_set_level(int level) { g_level = level; }
int sp_log_level(void) { return g_level; }
void sp_log_set_file(FILE *f) { g_file = f; }

void sp_log_set_device(const char *device) {
  snprintf(g_device, sizeof g_device, "%s", device ? device : "?");
}

/* Copies src into dst (cap bytes, always terminated) with every control
 * byte (below 0x20, and 0x7f) written as \xNN: a message is one line, and
 * text quoted from a file or a flag (a path, a key) must neither break it
 * nor send terminal escapes. */
static void escape_controls(const char *src, char *dst, size_t cap) {
  static const char hex[] = "0123456789abcdef";
  size_t o = 0;
  for (const unsigned char *p = (const unsigned char *)src; *p && o + 1 < cap; p++) {
    if (*p < 0x20 || *p == 0x7f) {
      if (o + 5 > cap) break;
      dst[o++] = '\\';
      dst[o++] = 'x';
      dst[o++] = hex[*p >> 4];
      dst[o++] = hex[*p & 15];
    } else {
      dst[o++] = (char)*p;
    }
  }
  dst[o] = '\0';
}

/* One line to stderr (unless only the log file takes it: terminal 0) and
 * to the log file. */
static void emit(const char *tag, int terminal, const char *fmt, va_list ap) {
  char raw[4096], line[4096];
  int n = snprintf(raw, sizeof raw, "[rank %d] %s", g_rank, tag);
  if (n < 0) n = 0;
  if ((size_t)n < sizeof raw) vsnprintf(raw + n, sizeof raw - (size_t)n, fmt, ap);
  size_t len = strlen(raw);
  while (len > 0 && raw[len - 1] == '\n') raw[--len] = '\0';
  escape_controls(raw, line, sizeof line);
  pthread_mutex_lock(&g_lock);
  if (terminal) {
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
  }
  if (g_file) {
    fprintf(g_file, "%s\n", line);
    fflush(g_file);
  }
  pthread_mutex_unlock(&g_lock);
}

/* A per-rank log file (--log-dir) keeps the info and warning lines that a
 * quiet level (-q) keeps off the terminal: it is the record of the run. */
#define SP_LOG_FN(name, tag, min_level)                                     \
  void name(const char *fmt, ...) {                                         \
    const int terminal = g_level >= (min_level);                            \
    if (!terminal && !(g_file && g_level >= 0 && (min_level) <= 1)) return; \
    va_list ap;                                                             \
    va_start(ap, fmt);                                                      \
    emit(tag, terminal, fmt, ap);                                           \
    va_end(ap);                                                             \
  }
SP_LOG_FN(sp_log_info, "", 1)
SP_LOG_FN(sp_log_warn, "warning: ", 0)
SP_LOG_FN(sp_log_debug, "debug: ", 2)

void sp_log_error(const char *fmt, ...) {
  g_errors++;
  va_list ap;
  va_start(ap, fmt);
  /* Kept even when silenced: it is the text a failed phase sends to the
   * other ranks (comm_phase_end). */
  vsnprintf(g_last_error, sizeof g_last_error, fmt, ap);
  va_end(ap);
  if (g_level < 0) return;
  va_start(ap, fmt);
  emit("error: ", 1, fmt, ap);
  va_end(ap);
}

const char *sp_log_last_error(void) { return g_last_error; }

int sp_log_error_count(void) { return g_errors; }

void sp_abort_hook_push(sp_abort_hook hook) {
  if (g_nhooks < SP_MAX_HOOKS) g_hooks[g_nhooks++] = hook;
}

_Noreturn void sp_fatal_at(const char *file, int line, const char *call,
                           const char *fmt, ...) {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  char raw[2048], msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  escape_controls(raw, msg, sizeof msg);
  char out[2600];
  snprintf(out, sizeof out, "[rank %d] fatal: %s (host %s, device %s, %s:%d%s%s)\n", g_rank,
           msg, host, g_device, file, line, call ? ", call " : "", call ? call : "");
  pthread_mutex_lock(&g_lock);
  fputs(out, stderr);
  fflush(stderr);
  if (g_file) {
    fputs(out, g_file);
    fflush(g_file);
  }
  pthread_mutex_unlock(&g_lock);
  for (int i = g_nhooks - 1; i >= 0; i--) g_hooks[i](SP_ERR_RUNTIME);
  _exit(SP_ERR_RUNTIME);
}

void *sp_xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) sp_fatal("out of host memory allocating %zu bytes", bytes);
  return p;
}

void *sp_xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p) sp_fatal("out of host memory allocating %zu x %zu bytes", n, size);
  return p;
}

char *sp_xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = sp_xmalloc(n);
  memcpy(p, s, n);
  return p;
}
