/* The paths a user gives, checked before any work starts: an input must be
 * a regular file (a FIFO, a device or a directory would block, never end,
 * or be read as garbage), an output must be a regular file or a new path
 * whose directory is writable and whose name (and the temporary name
 * beside it, atomic_file.h) fits the filesystem, and no output may be one
 * of the files the command reads or another output. Files are compared by
 * identity (device and inode; for a path that does not exist yet, its
 * directory's identity and its name), never by spelling.
 *
 * The checks never open a path the user gave (stat(2) only), so a FIFO
 * cannot block them; an output's check creates and removes its temporary
 * name once, the one sure test that the directory takes a new file. Each failure logs one line naming the flag and the path
 * ("--out /dev/null: ...") and returns SP_ERR_INPUT. A flag of NULL names
 * the path alone. */
#ifndef RANK_PATH_CHECK_H
#define RANK_PATH_CHECK_H

/* A path and the flag that gave it ("--model", "jobs.txt:3: out"). */
typedef struct rank_path_arg {
  const char *flag;
  const char *path;
} rank_path_arg;

enum {
  RANK_PATH_FILE = 0,        /* an input must be a regular file */
  RANK_PATH_FILE_OR_DIR = 1, /* ... or a directory (convert's inputs) */
  RANK_PATH_FILE_OR_FIFO = 2, /* ... or a named pipe (run --jobs, read as a stream) */
};

/* An input: exists, is a regular file (or a directory with
 * RANK_PATH_FILE_OR_DIR, a named pipe with RANK_PATH_FILE_OR_FIFO), is
 * readable. SP_OK or SP_ERR_INPUT (logged). */
int rank_path_check_input(const char *flag, const char *path, int how);

/* An output: absent (a dangling symbolic link counts as absent: the rename
 * replaces the link) or a regular file; its directory exists and is
 * writable (a probe file of the temporary name is created and removed);
 * its last component and its temporary name fit the directory's NAME_MAX;
 * it is none of the n paths in others (inputs, or outputs already
 * claimed; entries with a NULL or empty path, or one that cannot be looked
 * up, are skipped: those fail where they are read). SP_OK or SP_ERR_INPUT
 * (logged). */
int rank_path_check_output(const char *flag, const char *path, const rank_path_arg *others,
                           int n);

/* *same = 1 when a and b name one file (or one new path), else 0. SP_OK,
 * or SP_ERR_INPUT (logged) when either cannot be looked up. */
int rank_path_same(const char *a, const char *b, int *same);

#endif
