/* Atomic output files (see atomic_file.h). */
#include "atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

/* Registered temporaries. The signal handler only reads this table and calls
 * unlink (async-signal-safe); entries are written under a lock with signals
 * blocked so the handler never sees a half-written path. */
#define MAX_TMP 16
#define TMP_LEN 4096
static char g_tmp[MAX_TMP][TMP_LEN];
static volatile sig_atomic_t g_used[MAX_TMP];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_handlers_installed = 0;
static unsigned g_counter = 0;

static void remove_all_tmp(void) {
  for (int i = 0; i < MAX_TMP; i++)
    if (g_used[i]) unlink(g_tmp[i]);
}

static void on_signal(int sig) {
  remove_all_tmp();
  signal(sig, SIG_DFL);
  raise(sig);
}

static void on_fatal(int code) { remove_all_tmp(); }

static void install_handlers(void) {
  if (g_handlers_installed) return;
  g_handlers_installed = 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    struct sigaction old;
    /* Leave a handler the user (or a launcher) set alone. */
    if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL)
      sigaction(sigs[i], &sa, NULL);
  }
  sp_abort_hook_push(on_fatal);
}

static void set_slot(const char *path, int used) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < MAX_TMP; i++) {
    if (used && !g_used[i]) {
      snprintf(g_tmp[i], TMP_LEN, "%s", path);
      g_used[i] = 1;
      break;
    }
    if (!used && g_used[i] && strcmp(g_tmp[i], path) == 0) {
      g_used[i] = 0;
      break;
    }
  }
  pthread_mutex_unlock(&g_lock);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* "DIR/.NAME.tmp-PID-K": the one place the temporary name is spelled.
 * Returns the length written, or -1 when the path is empty or the name
 * does not fit n bytes. */
static int tmp_name(const char *final_path, unsigned k, char *tmp, size_t n) {
  size_t len = strlen(final_path);
  if (len == 0 || len >= TMP_LEN - 64) return -1;
  char dirbuf[TMP_LEN], basebuf[TMP_LEN];
  snprintf(dirbuf, sizeof dirbuf, "%s", final_path);
  snprintf(basebuf, sizeof basebuf, "%s", final_path);
  int w = snprintf(tmp, n, "%s/.%s.tmp-%ld-%u", dirname(dirbuf), basename(basebuf),
                   (long)getpid(), k);
  return w < 0 || (size_t)w >= n ? -1 : w;
}

/* 1 when tmp is a temporary of this process that is still registered. */
static int registered(const char *tmp) {
  int hit = 0;
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < MAX_TMP && !hit; i++) hit = g_used[i] && strcmp(g_tmp[i], tmp) == 0;
  pthread_mutex_unlock(&g_lock);
  return hit;
}

/* The process id of entry, a temporary name of final path base made by
 * tmp_name (".BASE.tmp-PID-K", digits only after the prefix), or -1. */
static long tmp_owner(const char *entry, const char *base) {
  size_t bl = strlen(base);
  if (entry[0] != '.' || strncmp(entry + 1, base, bl) != 0 ||
      strncmp(entry + 1 + bl, ".tmp-", 5) != 0)
    return -1;
  const char *p = entry + 1 + bl + 5;
  char *end;
  errno = 0;
  long pid = strtol(p, &end, 10);
  if (errno || end == p || *end != '-' || pid <= 0) return -1;
  p = end + 1;
  (void)strtoul(p, &end, 10);
  return end == p || *end || errno ? -1 : pid;
}

/* Removes the temporary files of final path base in dir that a process
 * which no longer runs left behind (killed with SIGKILL, or the machine
 * went down: no handler could remove them). Processes are looked up on
 * this host: a live writer here keeps its file, and this process's own
 * names count as live while registered; on a file system shared between
 * hosts, a temporary that a process of another host is writing to the same
 * path counts as stale when no process here has its id. */
static void remove_stale(const char *dir, const char *base) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char path[TMP_LEN];
  while ((e = readdir(d)) != NULL) {
    const long pid = tmp_owner(e->d_name, base);
    if (pid < 0) continue;
    int w = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (w < 0 || (size_t)w >= sizeof path) continue;
    const int dead = pid == (long)getpid() ? !registered(path)
                                             : kill((pid_t)pid, 0) != 0 && errno == ESRCH;
    if (dead && unlink(path) == 0)
      sp_log_info("%s: removed a temporary file that process %ld left behind", path, pid);
  }
  closedir(d);
}

int rank_atomic_tmp_name_longest(const char *final_path, char *tmp, size_t n) {
  return tmp_name(final_path, UINT_MAX, tmp, n) < 0 ? -1 : 0;
}

int rank_atomic_begin(const char *final_path, char *tmp, size_t n) {
  size_t len = strlen(final_path);
  if (len == 0 || len >= TMP_LEN - 64) {
    sp_log_error("%s: output path is empty or too long", final_path);
    return SP_ERR_INPUT;
  }
  char dirbuf[TMP_LEN];
  snprintf(dirbuf, sizeof dirbuf, "%s", final_path);
  const char *dir = dirname(dirbuf);
  if (access(dir, W_OK) != 0) {
    sp_log_error("%s: cannot write to directory '%s': %s", final_path, dir, strerror(errno));
    return SP_ERR_INPUT;
  }
  char basebuf[TMP_LEN];
  snprintf(basebuf, sizeof basebuf, "%s", final_path);
  remove_stale(dir, basename(basebuf));
  pthread_mutex_lock(&g_lock);
  unsigned k = g_counter++;
  install_handlers();
  pthread_mutex_unlock(&g_lock);
  if (tmp_name(final_path, k, tmp, n) < 0) {
    sp_log_error("%s: output path too long", final_path);
    return SP_ERR_INPUT;
  }
  set_slot(tmp, 1);
  return SP_OK;
}

int rank_atomic_commit(const char *tmp, const char *final_path) {
  int fd = open(tmp, O_RDONLY);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
  if (rename(tmp, final_path) != 0) {
    sp_log_error("%s: cannot move the finished output into place: %s", final_path,
                 strerror(errno));
    unlink(tmp);
    set_slot(tmp, 0);
    return SP_ERR_RUNTIME;
  }
  set_slot(tmp, 0);
  return SP_OK;
}

void rank_atomic_abort(const char *tmp) {
  unlink(tmp);
  set_slot(tmp, 0);
}
