/* The paths a user gives (see path_check.h). */
#include "path_check.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "file_read.h"
#include "log.h"

enum { PATH_BUF = 4096 };

/* Logs "FLAG PATH: what" (or "PATH: what"); returns SP_ERR_INPUT. */
static int refuse(const char *flag, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int refuse(const char *flag, const char *path, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (flag)
    sp_log_error("%s %s: %s", flag, path, what);
  else
    sp_log_error("%s: %s", path, what);
  return SP_ERR_INPUT;
}

/* The directory part and the last component of path, in buffers of
 * PATH_BUF bytes (dirname and basename may modify their argument). */
static void split(const char *path, char *dir, char *base) {
  char a[PATH_BUF], b[PATH_BUF];
  snprintf(a, sizeof a, "%s", path);
  snprintf(b, sizeof b, "%s", path);
  snprintf(dir, PATH_BUF, "%s", dirname(a));
  snprintf(base, PATH_BUF, "%s", basename(b));
}

/* Identity of a path: the file's device and inode, or for a path that does
 * not exist yet its directory's, with its last component. */
typedef struct path_id {
  dev_t dev;
  ino_t ino;
  char name[PATH_BUF]; /* "" for an existing file */
} path_id;

/* Logs (when loud) and returns SP_ERR_INPUT when neither the path nor its
 * directory can be looked up. */
static int path_identity(const char *path, int loud, path_id *id) {
  struct stat st;
  id->name[0] = '\0';
  if (stat(path, &st) == 0) {
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    return SP_OK;
  }
  if (errno != ENOENT)
    return loud ? refuse(NULL, path, "cannot look it up: %s", strerror(errno)) : SP_ERR_INPUT;
  char dir[PATH_BUF];
  split(path, dir, id->name);
  if (stat(dir, &st) != 0)
    return loud ? refuse(NULL, path, "cannot look up its directory '%s': %s", dir,
                         strerror(errno))
                : SP_ERR_INPUT;
  id->dev = st.st_dev;
  id->ino = st.st_ino;
  return SP_OK;
}

static int same_id(const path_id *a, const path_id *b) {
  return a->dev == b->dev && a->ino == b->ino && strcmp(a->name, b->name) == 0;
}

int rank_path_same(const char *a, const char *b, int *same) {
  path_id ia, ib;
  if (path_identity(a, 1, &ia) != SP_OK || path_identity(b, 1, &ib) != SP_OK)
    return SP_ERR_INPUT;
  *same = same_id(&ia, &ib);
  return SP_OK;
}

int rank_path_check_input(const char *flag, const char *path, int how) {
  struct stat st;
  if (!path || !path[0]) return refuse(flag, "''", "the path is empty");
  if (stat(path, &st) != 0) return refuse(flag, path, "cannot open: %s", strerror(errno));
  const int dir_ok = how == RANK_PATH_FILE_OR_DIR && S_ISDIR(st.st_mode);
  const int fifo_ok = how == RANK_PATH_FILE_OR_FIFO && S_ISFIFO(st.st_mode);
  if (!S_ISREG(st.st_mode) && !dir_ok && !fifo_ok)
    return refuse(flag, path, "is %s, not a regular file%s", rank_file_kind_name(st.st_mode),
                  how == RANK_PATH_FILE_OR_DIR    ? " or a directory"
                  : how == RANK_PATH_FILE_OR_FIFO ? " or a named pipe"
                                                  : "");
  if (access(path, dir_ok ? R_OK | X_OK : R_OK) != 0)
    return refuse(flag, path, "cannot open: %s", strerror(errno));
  return SP_OK;
}

int rank_path_check_output(const char *flag, const char *path, const rank_path_arg *others,
                           int n) {
  if (!path || !path[0]) return refuse(flag, "''", "the path is empty");
  struct stat st;
  if (stat(path, &st) == 0) {
    if (!S_ISREG(st.st_mode))
      return refuse(flag, path,
                    "is %s: an output must be a regular file or a new path (it is written "
                    "beside it and renamed into place)",
                    rank_file_kind_name(st.st_mode));
  } else if (errno != ENOENT) {
    return refuse(flag, path, "cannot be written: %s", strerror(errno));
  }
  char dir[PATH_BUF], base[PATH_BUF];
  split(path, dir, base);
  if (stat(dir, &st) != 0)
    return refuse(flag, path, "cannot write to directory '%s': %s", dir, strerror(errno));
  if (!S_ISDIR(st.st_mode)) return refuse(flag, path, "'%s' is not a directory", dir);
  if (access(dir, W_OK | X_OK) != 0)
    return refuse(flag, path, "cannot write to directory '%s': %s", dir, strerror(errno));
  char tmp[PATH_BUF], tdir[PATH_BUF], tbase[PATH_BUF];
  if (rank_atomic_tmp_name_longest(path, tmp, sizeof tmp) != 0)
    return refuse(flag, path, "the path is too long (at most %d bytes)", PATH_BUF - 64);
  split(tmp, tdir, tbase);
  errno = 0;
  long name_max = pathconf(dir, _PC_NAME_MAX);
  if (name_max > 0 && strlen(tbase) > (size_t)name_max)
    return refuse(flag, path,
                  "the name is %zu bytes; with the temporary name written beside it (%zu "
                  "bytes) it exceeds the filesystem's limit of %ld: shorten it by %zu bytes",
                  strlen(base), strlen(tbase), name_max, strlen(tbase) - (size_t)name_max);
  /* access() says yes to root on filesystems that still refuse (sysfs, some
   * network mounts): creating the temporary name itself is the one sure
   * test. It is removed at once; an existing one (another run's) is left. */
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno != EEXIST)
    return refuse(flag, path, "cannot create a file in directory '%s': %s", dir, strerror(errno));
  if (fd >= 0) {
    close(fd);
    unlink(tmp);
  }
  path_id me, other;
  if (path_identity(path, 1, &me) != SP_OK) return SP_ERR_INPUT;
  for (int i = 0; i < n; i++) {
    if (!others[i].path || !others[i].path[0]) continue;
    /* A path that cannot be looked up (its directory is missing: an input
     * that will fail when it is read) is no file this output could be. */
    if (path_identity(others[i].path, 0, &other) != SP_OK) continue;
    if (same_id(&me, &other))
      return refuse(flag, path, "is the same file as %s %s", others[i].flag ? others[i].flag : "",
                    others[i].path);
  }
  return SP_OK;
}
