/* Small HDF5 helpers shared by the model file and the tensor files:
 * attributes read and written with every return code checked, and
 * HDF5's own error printing turned off (the callers report). */
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

#endif
