/* Opening a file to read it: every reader of a file a user names goes
 * through here (the model files' HDF5 and safetensors readers, the
 * tokenizers, the cond, latent and noise files, index files, prompt lists,
 * inventories). The file is opened with O_NONBLOCK, so a FIFO without a
 * writer, a terminal or a device cannot block the open, then checked with
 * fstat to be a regular file before a byte is read, then set back to
 * blocking reads. Anything else is refused with one line naming the path
 * and what it is ("x.st: is a FIFO, not a regular file") and SP_ERR_INPUT
 * (exit 2). A read at an offset that goes on after short reads is here
 * too, for the readers that pread() a file in pieces. */
#ifndef RANK_FILE_READ_H
#define RANK_FILE_READ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* "a directory", "a FIFO", "a character device", ... for a file mode. */
const char *rank_file_kind_name(mode_t mode);

/* path opened for reading into *fd (O_CLOEXEC), a regular file. SP_OK, or
 * SP_ERR_INPUT after one line (cannot open, or not a regular file). */
int rank_file_open_read(const char *path, int *fd);
/* The same as a stdio stream ("rb"). */
int rank_file_fopen_read(const char *path, FILE **out);
/* The check alone (opened and closed): for readers that open by name
 * themselves, as HDF5's H5Fopen does. SP_OK or SP_ERR_INPUT (logged). */
int rank_file_check_regular(const char *path);
/* The same two, their message naming what instead of the path (what
 * names the path too: "stdin:3: image-latents=x.h5"). */
int rank_file_open_read_as(const char *what, const char *path, int *fd);
int rank_file_check_regular_as(const char *what, const char *path);

/* n bytes at offset off of fd into dst, reading on after a short read or
 * an interrupted one until n or the end of the file: *got is the count
 * read (less than n only at the end of the file). 0, or -1 with errno set
 * by the failed read; the caller names the file. */
int rank_file_pread_full(int fd, void *dst, size_t n, uint64_t off, size_t *got);

#endif
