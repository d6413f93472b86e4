/* Small HDF5 helpers shared by the model file and the tensor files:
 * attributes read and written with every return code checked, HDF5's own
 * error printing turned off (the callers report), and output files written
 * atomically. */
#ifndef RANK_H5_UTIL_H
#define RANK_H5_UTIL_H

#include <hdf5.h>
#include <stddef.h>

void rank_h5_silence(void);
/* A string attribute (fixed or variable length) into out; -1 if missing or
 * not a string. */
int rank_h5_attr_read_str(hid_t loc, const char *name, char *out, size_t n);
/* A numeric attribute of exactly count elements, converted to memtype; -1
 * if missing, of another class or another size. */
int rank_h5_attr_read_num(hid_t loc, const char *name, hid_t memtype, void *out, hssize_t count);
int rank_h5_attr_write_str(hid_t loc, const char *name, const char *value);
/* count 1: a scalar attribute; else a 1-D one. */
int rank_h5_attr_write_num(hid_t loc, const char *name, hid_t filetype, hid_t memtype,
                           const void *v, hsize_t count);

/* Creates the empty group name under loc. Returns 0 or -1. */
int rank_h5_group_create(hid_t loc, const char *name);

/* An HDF5 output written atomically (atomic_file.h): created under a
 * temporary name beside path and renamed onto it at commit; a failure or
 * an abort removes it, leaving an existing file at path untouched. */
typedef struct rank_h5_out {
  char path[4096];
  char tmp[4096]; /* "" once renamed or removed */
  hid_t file;     /* -1 once closed */
} rank_h5_out;

/* Starts o for path: the temporary name (rank_atomic_begin's logged status
 * when it cannot be made) and the HDF5 file in it; when HDF5 cannot create
 * the file, logs "PATH: create_err", removes the name and returns
 * SP_ERR_RUNTIME. Nothing is left to abort after a failure. */
int rank_h5_out_open(rank_h5_out *o, const char *path, const char *create_err);
/* Closes o's file (o->file -1 after): flushed first, and when the flush
 * fails (a full disk) given up so that HDF5 holds no identifier of it any
 * more. 0, or -1 (not logged) when it could not be written whole. */
int rank_h5_out_close(rank_h5_out *o);
/* Closes the file (rank_h5_out_close) and renames it onto path; when the
 * close fails, logs "PATH: close_err" and removes it. SP_OK or
 * SP_ERR_RUNTIME. */
int rank_h5_out_commit(rank_h5_out *o, const char *close_err);
/* Gives the file up if open (whatever HDF5 still has to write of it goes
 * nowhere, every identifier of it is closed) and removes the temporary
 * name if still there. Safe after any failure, a full disk included. */
void rank_h5_out_abort(rank_h5_out *o);

#endif
