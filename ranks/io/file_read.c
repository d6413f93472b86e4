/* Opening a file to read it, and reading it whole at an offset (see
 * file_read.h). */
#include "file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

const char *rank_file_kind_name(mode_t m) {
  return S_ISDIR(m) ? "a directory" : S_ISCHR(m) ? "a character device"
         : S_ISBLK(m) ? "a block device" : S_ISFIFO(m) ? "a FIFO"
         : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

int rank_file_open_read(const char *path, int *fd) { return rank_file_open_read_as(path, path, fd); }

int rank_file_open_read_as(const char *what, const char *path, int *fd) {
  const int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (f < 0) {
    sp_log_error("%s: cannot open: %s", what, strerror(errno));
    return SP_ERR_INPUT;
  }
  struct stat st;
  if (fstat(f, &st) != 0) {
    sp_log_error("%s: cannot look it up: %s", what, strerror(errno));
    close(f);
    return SP_ERR_INPUT;
  }
  if (!S_ISREG(st.st_mode)) {
    sp_log_error("%s: is %s, not a regular file (a file to read must be one)", what,
                 rank_file_kind_name(st.st_mode));
    close(f);
    return SP_ERR_INPUT;
  }
  /* A regular file never blocks; reads go back to the usual mode. */
  const int flags = fcntl(f, F_GETFL);
  if (flags < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    sp_log_error("%s: cannot set blocking reads: %s", what, strerror(errno));
    close(f);
    return SP_ERR_INPUT;
  }
  *fd = f;
  return SP_OK;
}

int rank_file_fopen_read(const char *path, FILE **out) {
  int fd;
  if (rank_file_open_read(path, &fd) != SP_OK) return SP_ERR_INPUT;
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    sp_log_error("%s: cannot open: %s", path, strerror(errno));
    close(fd);
    return SP_ERR_INPUT;
  }
  *out = f;
  return SP_OK;
}

int rank_file_check_regular(const char *path) { return rank_file_check_regular_as(path, path); }

int rank_file_check_regular_as(const char *what, const char *path) {
  int fd;
  if (rank_file_open_read_as(what, path, &fd) != SP_OK) return SP_ERR_INPUT;
  close(fd);
  return SP_OK;
}

int rank_file_pread_full(int fd, void *dst, size_t n, uint64_t off, size_t *got) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = pread(fd, (char *)dst + done, n - done, (off_t)(off + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) break;
    done += (size_t)r;
  }
  *got = done;
  return 0;
}
