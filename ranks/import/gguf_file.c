/* GGUF files (gguf.h): opening through io/file_read (never blocking on a
 * FIFO or device), the header read in growing prefixes until the parser
 * has all of it, the metadata accessors and tensor reads. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_read.h"
#include "gguf.h"
#include "json_in.h"
#include "log.h"
#include "utf8.h"

#define GGUF_FIRST_READ ((size_t)1 << 20)

void rank_gguf_close(rank_gguf_file *f) {
  if (!f) return;
  if (f->fd >= 0) close(f->fd);
  rank_gguf_header_free(&f->h);
  free(f->path);
  free(f);
}

/* Opens path through io/file_read (a FIFO or device refused without
 * blocking) and takes its size. */
static int open_regular(rank_gguf_file *f) {
  if (rank_file_open_read(f->path, &f->fd) != SP_OK) return SP_ERR_INPUT;
  struct stat sb;
  if (fstat(f->fd, &sb) != 0) {
    sp_log_error("%s: cannot stat: %s", f->path, strerror(errno));
    return SP_ERR_RUNTIME;
  }
  f->file_size = (uint64_t)sb.st_size;
  return SP_OK;
}

/* Reads prefixes of the file (1 MiB, then as much as the parser asks for,
 * at least twice the last) until the header parses. */
static int read_header(rank_gguf_file *f) {
  uint8_t *buf = NULL;
  size_t len = 0;
  uint64_t want = GGUF_FIRST_READ;
  char err[1024];
  int rc = SP_ERR_INPUT;
  for (;;) {
    if (want > f->file_size) want = f->file_size;
    if (want > RANK_GGUF_MAX_HEADER) {
      sp_log_error("%s: the header is longer than the %llu-byte bound", f->path,
                   (unsigned long long)RANK_GGUF_MAX_HEADER);
      break;
    }
    uint8_t *nb = realloc(buf, (size_t)want + 1);
    if (!nb) {
      sp_log_error("%s: out of memory for a %llu-byte header", f->path, (unsigned long long)want);
      rc = SP_ERR_RUNTIME;
      break;
    }
    buf = nb;
    size_t got = 0;
    if (rank_file_pread_full(f->fd, buf + len, (size_t)want - len, len, &got) != 0) {
      sp_log_error("%s: read failed: %s", f->path, strerror(errno));
      rc = SP_ERR_RUNTIME;
      break;
    }
    if (got != (size_t)want - len) {
      sp_log_error("%s: the file ended early while its header was read (changed while reading?)",
                   f->path);
      break;
    }
    len = (size_t)want;
    uint64_t need = 0;
    const int r = rank_gguf_parse(buf, len, f->file_size, &f->h, &need, err, sizeof err);
    if (r == 0) {
      rc = SP_OK;
      break;
    }
    if (r < 0) {
      sp_log_error("%s: %s", f->path, err);
      break;
    }
    want = need > 2 * (uint64_t)len ? need : 2 * (uint64_t)len;
  }
  free(buf);
  return rc;
}

int rank_gguf_open(const char *path, rank_gguf_file **out) {
  rank_gguf_file *f = calloc(1, sizeof *f);
  if (!f || !(f->path = strdup(path))) {
    sp_log_error("%s: out of memory", path);
    free(f);
    return SP_ERR_RUNTIME;
  }
  f->fd = -1;
  int rc = open_regular(f);
  if (rc == SP_OK) rc = read_header(f);
  if (rc != SP_OK) {
    rank_gguf_close(f);
    return rc;
  }
  *out = f;
  return SP_OK;
}

const char *rank_gguf_meta_name(const rank_gguf_file *f, const char *key) {
  const rank_gguf_kv *kv = rank_gguf_kv_find(&f->h, key);
  if (!kv) return NULL;
  if (kv->type != RANK_GGUF_STRING) {
    sp_log_error("%s: metadata '%s' is a %s, not a string", f->path, key,
                 rank_gguf_vtype_name(kv->type));
    return NULL;
  }
  if (memchr(kv->str, '\0', kv->str_len) ||
      io_utf8_check((const unsigned char *)kv->str, kv->str_len) != kv->str_len) {
    char pb[160];
    sp_log_error("%s: metadata '%s' ('%s') has a NUL byte or invalid UTF-8", f->path, key,
                 io_printable(kv->str, kv->str_len, pb, sizeof pb));
    return NULL;
  }
  return kv->str;
}

int rank_gguf_meta_u64(const rank_gguf_file *f, const char *key, uint64_t *out) {
  const rank_gguf_kv *kv = rank_gguf_kv_find(&f->h, key);
  if (!kv) return -1;
  switch (kv->type) {
  case RANK_GGUF_U8: case RANK_GGUF_U16: case RANK_GGUF_U32: case RANK_GGUF_U64:
    *out = kv->u;
    return 0;
  case RANK_GGUF_I8: case RANK_GGUF_I16: case RANK_GGUF_I32: case RANK_GGUF_I64:
    if (kv->i >= 0) {
      *out = (uint64_t)kv->i;
      return 0;
    }
    break;
  default:
    break;
  }
  sp_log_error("%s: metadata '%s' is not an integer >= 0 (a %s)", f->path, key,
               rank_gguf_vtype_name(kv->type));
  return -1;
}

const rank_gguf_tensor *rank_gguf_tensor_find(const rank_gguf_file *f, const char *name) {
  return rank_gguf_header_tensor(&f->h, name);
}

int rank_gguf_read(const rank_gguf_file *f, const rank_gguf_tensor *t, uint64_t off, void *dst,
                   size_t n) {
  if (off > t->bytes || n > t->bytes - off) {
    sp_log_error("%s: tensor '%s': read of %zu bytes at %llu outside its %llu bytes", f->path,
                 t->name, n, (unsigned long long)off, (unsigned long long)t->bytes);
    return SP_ERR_RUNTIME;
  }
  size_t got = 0;
  if (rank_file_pread_full(f->fd, dst, n, f->h.data_start + t->offset + off, &got) != 0) {
    sp_log_error("%s: tensor '%s': read failed: %s", f->path, t->name, strerror(errno));
    return SP_ERR_RUNTIME;
  }
  if (got != n) {
    sp_log_error("%s: tensor '%s': the file ended early (changed while reading?)", f->path,
                 t->name);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}
