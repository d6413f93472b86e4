/* The model files' shared container (see model_container.h). */
#include "model_container.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic_file.h"
#include "crc32c.h"
#include "file_read.h"
#include "h5_util.h"
#include "log.h"
#include "mfile_format.h"

/* ---- reading ------------------------------------------------------------ */

/* A safetensors file starts with its header's length (8 bytes, little
 * endian, at most 100 MB) and the header's opening brace. */
static int looks_like_safetensors(const char *path) {
  FILE *f = NULL;
  if (rank_file_fopen_read(path, &f) != SP_OK) return 0;
  unsigned char b[9];
  size_t got = fread(b, 1, sizeof b, f);
  fclose(f);
  if (got != sizeof b || b[8] != '{') return 0;
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | b[i];
  return n >= 2 && n <= 100000000u;
}

int rank_container_open_fd(const char *path, int *fd) {
  return rank_file_open_read(path, fd); /* io/file_read.h */
}

int rank_container_open(const char *path, hid_t *out) {
  rank_h5_silence();
  /* A regular file before HDF5 opens it by name (io/file_read.h). */
  if (rank_file_check_regular(path) != SP_OK) return SP_ERR_INPUT;
  if (H5Fis_hdf5(path) <= 0) {
    if (looks_like_safetensors(path))
      sp_log_error("%s: a safetensors checkpoint, not a staticpipe model file: convert it once "
                   "with 'staticpipe convert %s -o MODEL.h5' (bf16; --dtype fp32 for the CPU "
                   "reference; shards: pass them all or their directory), then use MODEL.h5",
                   path, path);
    else
      sp_log_error("%s: not an HDF5 file (truncated or another format)", path);
    return SP_ERR_INPUT;
  }
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    sp_log_error("%s: HDF5 cannot open the file (truncated or damaged)", path);
    return SP_ERR_INPUT;
  }
  *out = f;
  return SP_OK;
}

/* "bf16"/"fp32"/... : the root dtypes s takes, for messages. */
static void root_dtype_list(const net_schema *s, char *buf, size_t n) {
  buf[0] = 0;
  for (int i = 0; s->root_dtypes[i]; i++)
    snprintf(buf + strlen(buf), n - strlen(buf), "%s\"%s\"", i ? "/" : "", s->root_dtypes[i]);
}

int rank_container_read_root(hid_t file, const char *path, const net_schema *want,
                             rank_container_root *out) {
  char s[256];
  if (rank_h5_attr_read_str(file, "format", s, sizeof s) != 0 || strcmp(s, RANK_MODEL_FORMAT) != 0) {
    sp_log_error("%s: not a staticpipe model file (root attribute format is not \"%s\")", path,
                 RANK_MODEL_FORMAT);
    return SP_ERR_INPUT;
  }
  int64_t version = 0;
  if (rank_h5_attr_read_num(file, "format_version", H5T_NATIVE_INT64, &version, 1) != 0) {
    sp_log_error("%s: root attribute format_version is missing or not an integer", path);
    return SP_ERR_INPUT;
  }
  if (version != RANK_MODEL_FORMAT_VERSION) {
    sp_log_error("%s: format_version %lld is not supported (this build reads version %d)", path,
                 (long long)version, RANK_MODEL_FORMAT_VERSION);
    return SP_ERR_INPUT;
  }
  if (rank_h5_attr_read_str(file, "arch", out->arch, sizeof out->arch) != 0 ||
      strcmp(out->arch, want->arch) != 0) {
    const net_schema *have = net_schema_of(out->arch);
    if (have)
      sp_log_error("%s is a %s model (a %s); this command needs a %s %s", path, out->arch,
                   have->what, want->arch, want->what);
    else
      sp_log_error("%s: root attribute arch is missing or not \"%s\"", path, want->arch);
    return SP_ERR_INPUT;
  }
  int known = rank_h5_attr_read_str(file, "dtype", out->dtype, sizeof out->dtype) == 0;
  for (int i = 0; known && want->root_dtypes[i]; i++)
    if (strcmp(out->dtype, want->root_dtypes[i]) == 0) known = 2;
  if (known != 2) {
    root_dtype_list(want, s, sizeof s);
    sp_log_error("%s: root attribute dtype is missing or not %s", path, s);
    return SP_ERR_INPUT;
  }
  if (rank_h5_attr_read_str(file, "preset", out->preset, sizeof out->preset) != 0)
    out->preset[0] = 0;
  if (rank_h5_attr_read_str(file, "checksum", out->checksum, sizeof out->checksum) != 0) {
    sp_log_error("%s: root attribute checksum is missing", path);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

static herr_t link_visit(hid_t g, const char *name, const H5L_info_t *info, void *op) {
  if (info->type != H5L_TYPE_HARD) {
    snprintf((char *)op, 512, "%s", name);
    return 1;
  }
  return 0;
}

int rank_container_check_links(hid_t file, const char *path) {
  char bad_link[512] = "";
  herr_t r = H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, link_visit, bad_link);
  if (r < 0) {
    /* HDF5 could not read the groups themselves: no link was found. */
    sp_log_error("%s: cannot read the file's groups (truncated or damaged)", path);
    return SP_ERR_INPUT;
  }
  if (r > 0) {
    sp_log_error("%s: %s: soft or external link (every object must live in the file)", path,
                 bad_link);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

static int name_index(const char *const *names, int count, const char *name) {
  for (int i = 0; i < count; i++)
    if (strcmp(names[i], name) == 0) return i;
  return -1;
}

int rank_container_check_members(hid_t file, const char *path, const char *group,
                                 const char *const *names, int count) {
  hid_t g = H5Gopen2(file, group, H5P_DEFAULT);
  if (g < 0) {
    sp_log_error("%s: group %s is missing", path, group);
    return SP_ERR_INPUT;
  }
  H5G_info_t gi;
  int rc = SP_OK;
  if (H5Gget_info(g, &gi) < 0) {
    sp_log_error("%s: cannot list group %s", path, group);
    rc = SP_ERR_INPUT;
  } else if (gi.nlinks != (hsize_t)count) {
    const char *sep = strcmp(group, "/") == 0 ? "" : "/";
    for (hsize_t i = 0; i < gi.nlinks; i++) {
      char name[256];
      if (H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name,
                             H5P_DEFAULT) < 0)
        continue;
      if (name_index(names, count, name) < 0) {
        sp_log_error("%s: %s%s%s: unexpected object (not a tensor of this group)", path, group,
                     sep, name);
        rc = SP_ERR_INPUT;
        break;
      }
    }
    for (int i = 0; rc == SP_OK && i < count; i++) {
      if (H5Lexists(g, names[i], H5P_DEFAULT) <= 0) {
        sp_log_error("%s: %s%s%s: dataset is missing", path, group, sep, names[i]);
        rc = SP_ERR_INPUT;
      }
    }
    if (rc == SP_OK) {
      sp_log_error("%s: group %s has %llu members, expected %d", path, group,
                   (unsigned long long)gi.nlinks, count);
      rc = SP_ERR_INPUT;
    }
  }
  H5Gclose(g);
  return rc;
}

static void shape_text(int ndim, const hsize_t *d, const int64_t *s, char *buf, size_t n) {
  buf[0] = 0;
  for (int i = 0; i < ndim; i++)
    snprintf(buf + strlen(buf), n - strlen(buf), "%s%llu", i ? "," : "",
             d ? (unsigned long long)d[i] : (unsigned long long)s[i]);
}

/* Why the storage of dataset d (creation properties dcpl) cannot be read
 * in place: it must be one contiguous run of bytes in the file, no filters,
 * nothing external. NULL when it can. */
static const char *storage_why(hid_t dcpl) {
  H5D_layout_t layout = H5Pget_layout(dcpl);
  if (layout == H5D_VIRTUAL) return "is a virtual dataset (data outside the file)";
  if (layout != H5D_CONTIGUOUS)
    return layout == H5D_CHUNKED ? "layout is chunked, expected contiguous (rewrite the file "
                                   "with staticpipe convert or init)"
                                 : "layout is not contiguous";
  if (H5Pget_nfilters(dcpl) != 0) return "has filters (compression); expected none";
  if (H5Pget_external_count(dcpl) != 0) return "stores its data in an external file";
  return NULL;
}

/* How format f is stored, for messages: "16-bit unsigned little-endian". */
static void storage_text(const mfile_format *f, char *buf, size_t n) {
  const size_t bits = 8 * (f->elem ? f->elem : 1);
  if (f->is_float)
    snprintf(buf, n, "%zu-bit float little-endian", bits);
  else
    snprintf(buf, n, "%zu-bit unsigned%s", bits, bits > 8 ? " little-endian" : "");
}

/* Whether HDF5 type `type` stores format f. */
static int type_holds(hid_t type, const mfile_format *f) {
  const size_t width = f->elem ? f->elem : 1;
  if (f->is_float)
    return H5Tget_class(type) == H5T_FLOAT && H5Tget_size(type) == width &&
           H5Tget_order(type) == H5T_ORDER_LE;
  return H5Tget_class(type) == H5T_INTEGER && H5Tget_size(type) == width &&
         (width == 1 || H5Tget_order(type) == H5T_ORDER_LE) && H5Tget_sign(type) == H5T_SGN_NONE;
}

/* The format dataset d holds among the n allowed: the one its attribute
 * dtype names when that is allowed and its type stores it (*got); NULL
 * when none, with the reason in whybuf naming what is stored and what the
 * attribute says apart (either may be the one that is wrong). */
static const char *dtype_why(hid_t d, hid_t type, const kern_dtype *allowed, int n,
                             const mfile_format **got, char *whybuf, size_t cap) {
  char dt[32] = "", want[96] = "", stored[64];
  if (rank_h5_attr_read_str(d, "dtype", dt, sizeof dt) != 0) dt[0] = 0;
  for (int i = 0; i < n; i++) {
    const mfile_format *f = mfile_format_of(allowed[i]);
    if (strcmp(dt, f->name) == 0 && type_holds(type, f)) {
      *got = f;
      return NULL;
    }
    snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", i ? "/" : "", f->name);
  }
  H5T_class_t cls = H5Tget_class(type);
  size_t bits = 8 * H5Tget_size(type);
  if (cls == H5T_FLOAT)
    snprintf(stored, sizeof stored, "%zu-bit float", bits);
  else if (cls == H5T_INTEGER)
    snprintf(stored, sizeof stored, "%zu-bit %s integer", bits,
             H5Tget_sign(type) == H5T_SGN_NONE ? "unsigned" : "signed");
  else
    snprintf(stored, sizeof stored, "neither integer nor float");
  const char *order = H5Tget_order(type) == H5T_ORDER_BE ? " big-endian" : "";
  if (n == 1) {
    char how[64];
    storage_text(mfile_format_of(allowed[0]), how, sizeof how);
    snprintf(whybuf, cap,
             "dtype is not %s (expected %s data and attribute dtype = \"%s\"; found %s%s data "
             "and attribute dtype = \"%s\")",
             want, how, want, stored, order, dt);
  } else {
    snprintf(whybuf, cap, "dtype is none of %s (found %s%s data and attribute dtype = \"%s\")",
             want, stored, order, dt);
  }
  return whybuf;
}

/* Why dataspace space is not the ndim-dimensional shape: NULL when it is,
 * else the reason (both shapes) in whybuf. */
static const char *shape_why(hid_t space, int ndim, const int64_t *shape, char *whybuf,
                             size_t cap) {
  int nd = H5Sget_simple_extent_ndims(space);
  hsize_t dims[8];
  int shape_ok = nd == ndim && nd <= 8 && H5Sget_simple_extent_dims(space, dims, NULL) == nd;
  for (int i = 0; shape_ok && i < nd; i++) shape_ok = dims[i] == (hsize_t)shape[i];
  if (shape_ok) return NULL;
  char want[96], have[96] = "";
  shape_text(ndim, NULL, shape, want, sizeof want);
  if (nd > 0 && nd <= 8 && H5Sget_simple_extent_dims(space, dims, NULL) == nd)
    shape_text(nd, dims, NULL, have, sizeof have);
  snprintf(whybuf, cap, "shape is [%s], the config needs [%s]", have, want);
  return whybuf;
}

/* Why a block format's dataset d does not hold tensor t: its rows whole
 * blocks, its attribute shape the tensor's own (the dataset's are rows
 * and row bytes). NULL when it does. */
static const char *blocks_why(hid_t d, const mfile_format *f, const net_tensor *t, char *whybuf,
                              size_t cap) {
  if (!mfile_format_fits(f, t)) {
    snprintf(whybuf, cap, "dtype %s: its rows of %lld values are not whole %s blocks of %d",
             f->name, (long long)mfile_tensor_cols(t), f->name, mfile_format_block(f));
    return whybuf;
  }
  if (f->elem) return NULL;
  int64_t shape[NET_MAX_NDIM] = {0};
  int same = rank_h5_attr_read_num(d, "shape", H5T_NATIVE_INT64, shape, t->ndim) == 0;
  for (int k = 0; same && k < t->ndim; k++) same = shape[k] == t->shape[k];
  if (same) return NULL;
  char want[96];
  shape_text(t->ndim, NULL, t->shape, want, sizeof want);
  snprintf(whybuf, cap, "attribute shape (the %s tensor's own) is missing or not [%s]", f->name,
           want);
  return whybuf;
}

/* Why the dataset d, of the format it holds, is not tensor t as stored:
 * its shape and storage size. NULL when it is. */
static const char *size_why(hid_t d, hid_t space, const mfile_format *f, const net_tensor *t,
                            char *whybuf, size_t cap) {
  const char *blk = blocks_why(d, f, t, whybuf, cap);
  if (blk) return blk;
  int64_t dims[NET_MAX_NDIM];
  const int nd = mfile_format_dims(f, t, dims);
  const char *why = shape_why(space, nd, dims, whybuf, cap);
  if (why) return why;
  const uint64_t bytes = mfile_format_bytes(f, t);
  if (H5Dget_storage_size(d) == (hsize_t)bytes) return NULL;
  snprintf(whybuf, cap, "storage holds %llu bytes, expected %llu",
           (unsigned long long)H5Dget_storage_size(d), (unsigned long long)bytes);
  return whybuf;
}

int rank_container_check_dataset(hid_t file, const char *path, const char *ds,
                                 const kern_dtype *allowed, int nallowed, const net_tensor *t,
                                 rank_container_found *out) {
  int rc = SP_ERR_INPUT;
  hid_t d = -1, dcpl = -1, type = -1, space = -1;
  const char *why = NULL;
  const mfile_format *f = NULL;
  char whybuf[320];
  H5O_info_t oi;
  haddr_t off = HADDR_UNDEF;
  if (H5Lexists(file, ds, H5P_DEFAULT) <= 0)
    why = "dataset is missing";
  else if ((d = H5Dopen2(file, ds, H5P_DEFAULT)) < 0)
    why = "not a dataset";
  /* One name per dataset: a hard link would let one tensor's bytes stand
   * for another's under a checksum copied along with them. */
  else if (H5Oget_info(d, &oi) < 0 || oi.rc != 1)
    why = "is hard-linked under another name too (each tensor must be a dataset of its own)";
  else if ((dcpl = H5Dget_create_plist(d)) < 0)
    why = "cannot read its creation properties";
  else if ((why = storage_why(dcpl)) != NULL)
    ;
  else if ((type = H5Dget_type(d)) < 0)
    why = "cannot read its dtype";
  else if ((why = dtype_why(d, type, allowed, nallowed, &f, whybuf, sizeof whybuf)) != NULL)
    ;
  else if ((space = H5Dget_space(d)) < 0)
    why = "cannot read its shape";
  else if ((why = size_why(d, space, f, t, whybuf, sizeof whybuf)) != NULL)
    ;
  else if ((off = H5Dget_offset(d)) == HADDR_UNDEF)
    why = "has no allocated contiguous storage";
  else if (rank_h5_attr_read_num(d, "checksum", H5T_NATIVE_UINT32, &out->crc, 1) != 0)
    why = "checksum attribute is missing";
  if (!why) {
    out->offset = (uint64_t)off;
    out->dtype = f->dtype;
    out->bytes = mfile_format_bytes(f, t);
    rc = SP_OK;
  } else {
    sp_log_error("%s: %s: %s", path, ds, why);
  }
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  if (dcpl >= 0) H5Pclose(dcpl);
  if (d >= 0) H5Dclose(d);
  return rc;
}

/* Reads n bytes at off. 0, or the errno of the failed read, or
 * RANK_CONTAINER_SHORT_READ when the file ends first (errno says nothing
 * then, and may hold a stale value). */
static int pread_full(int fd, void *dst, size_t n, uint64_t off) {
  char *p = dst;
  while (n > 0) {
    ssize_t r = pread(fd, p, n, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno ? errno : EIO;
    if (r == 0) return RANK_CONTAINER_SHORT_READ;
    p += r;
    n -= (size_t)r;
    off += (uint64_t)r;
  }
  return 0;
}

int rank_container_pread(int fd, int count, const rank_container_read *r, int verify,
                         int *err_no, uint32_t *got_crc) {
  /* Several threads: one thread's pread from the page cache runs at a few
   * GB/s, well under the memory's rate. The reads go in pieces of
   * READ_PIECE bytes, each checksummed right after its read while it is in
   * cache; each dataset's CRC is then joined from its pieces'
   * (crc32c_combine). The first failing dataset is reported. */
  enum { READ_PIECE = 2 << 20 };
  int64_t *pieces = sp_xmalloc((size_t)(count + 1) * sizeof *pieces);
  pieces[0] = 0;
  for (int i = 0; i < count; i++)
    pieces[i + 1] = pieces[i] + (int64_t)((r[i].bytes + READ_PIECE - 1) / READ_PIECE);
  uint32_t *piece_crc = sp_xmalloc((size_t)(pieces[count] + 1) * sizeof *piece_crc);
  int bad = -1, bad_errno = 0;
  uint32_t bad_crc = 0;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t k = 0; k < pieces[count]; k++) {
    int i = 0;
    while (pieces[i + 1] <= k) i++;
    size_t off = (size_t)(k - pieces[i]) * READ_PIECE;
    size_t n = r[i].bytes - off < READ_PIECE ? r[i].bytes - off : READ_PIECE;
    char *p = (char *)r[i].dst + off;
    int e = pread_full(fd, p, n, r[i].offset + off);
    if (e != 0) {
#pragma omp critical(sp_container_read)
      if (bad < 0 || i < bad) {
        bad = i;
        bad_errno = e;
      }
    } else if (verify) {
      piece_crc[k] = crc32c(0, p, n);
    }
  }
  if (bad < 0 && verify) {
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < count; i++) {
      uint32_t crc = crc32c(0, NULL, 0);
      for (int64_t k = pieces[i]; k < pieces[i + 1]; k++) {
        size_t off = (size_t)(k - pieces[i]) * READ_PIECE;
        size_t n = r[i].bytes - off < READ_PIECE ? r[i].bytes - off : READ_PIECE;
        crc = k == pieces[i] ? piece_crc[k] : crc32c_combine(crc, piece_crc[k], n);
      }
      if (crc != r[i].crc) {
#pragma omp critical(sp_container_read)
        if (bad < 0 || i < bad) {
          bad = i;
          bad_crc = crc;
        }
      }
    }
  }
  free(piece_crc);
  free(pieces);
  *err_no = bad_errno;
  *got_crc = bad_crc;
  return bad;
}

void rank_container_report_read(const char *source, const char *ds, uint32_t want, int err_no,
                                uint32_t got) {
  if (err_no == RANK_CONTAINER_SHORT_READ)
    sp_log_error("%s: %s: the file ends before the dataset's data does (truncated)", source, ds);
  else if (err_no)
    sp_log_error("%s: %s: read failed (%s)", source, ds, strerror(err_no));
  else
    sp_log_error("%s: %s: checksum mismatch (stored %08x, data gives %08x): the file is "
                 "damaged",
                 source, ds, want, got);
}

int rank_container_open_end(hid_t file, const char *path, int rc, int *fd) {
  H5Fclose(file);
  return rc != SP_OK ? rc : rank_container_open_fd(path, fd);
}

/* ---- the model checksum -------------------------------------------------- */

uint32_t rank_container_checksum_add(uint32_t acc, uint32_t crc) {
  uint8_t le[4] = {(uint8_t)crc, (uint8_t)(crc >> 8), (uint8_t)(crc >> 16), (uint8_t)(crc >> 24)};
  return crc32c(acc, le, 4);
}

int rank_container_checksum_check(const char *path, const char *stored, uint32_t acc) {
  char sum[32];
  rank_container_checksum_str(acc, sum, sizeof sum);
  if (strcmp(sum, stored) == 0) return SP_OK;
  sp_log_error("%s: root attribute checksum is \"%s\", its datasets' checksums give \"%s\": "
               "the file is damaged",
               path, stored, sum);
  return SP_ERR_INPUT;
}

void rank_container_checksum_str(uint32_t acc, char *buf, size_t n) {
  snprintf(buf, n, "crc32c:%08x", acc);
}

/* ---- writing ------------------------------------------------------------- */

int rank_container_write_root(hid_t file, const char *arch, const char *preset,
                              const char *dtype) {
  int64_t version = RANK_MODEL_FORMAT_VERSION;
  int ok = rank_h5_attr_write_str(file, "format", RANK_MODEL_FORMAT) == 0 &&
           rank_h5_attr_write_num(file, "format_version", H5T_STD_I64LE, H5T_NATIVE_INT64,
                                  &version, 1) == 0 &&
           rank_h5_attr_write_str(file, "arch", arch) == 0 &&
           rank_h5_attr_write_str(file, "preset", preset ? preset : "") == 0 &&
           rank_h5_attr_write_str(file, "dtype", dtype) == 0;
  return ok ? 0 : -1;
}

int rank_container_write_meta(hid_t file, const char *key, const char *value) {
  char name[300];
  snprintf(name, sizeof name, "meta.%s", key);
  if (H5Aexists(file, name) > 0) return 0;
  return rank_h5_attr_write_str(file, name, value);
}

hid_t rank_container_create_dataset(hid_t file, const char *ds, const mfile_format *f, int ndim,
                                    const int64_t *dims) {
  hsize_t hd[8];
  if (ndim < 0 || ndim > 8) return -1;
  for (int k = 0; k < ndim; k++) hd[k] = (hsize_t)dims[k];
  const size_t w = f->elem ? f->elem : 1;
  hid_t ftype = f->is_float ? H5T_IEEE_F32LE : w == 2 ? H5T_STD_U16LE : H5T_STD_U8LE;
  hid_t s = -1, dcpl = -1, d = -1;
  int ok = (s = H5Screate_simple(ndim, hd, NULL)) >= 0 &&
           (dcpl = H5Pcreate(H5P_DATASET_CREATE)) >= 0 &&
           H5Pset_layout(dcpl, H5D_CONTIGUOUS) >= 0 &&
           H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) >= 0 &&
           (d = H5Dcreate2(file, ds, ftype, s, H5P_DEFAULT, dcpl, H5P_DEFAULT)) >= 0;
  if (dcpl >= 0) H5Pclose(dcpl);
  if (s >= 0) H5Sclose(s);
  return ok ? d : -1;
}

int rank_container_write_values(hid_t d, const mfile_format *f, const void *data, int64_t first,
                                int64_t count, int64_t total) {
  const size_t w = f->elem ? f->elem : 1;
  hid_t mtype = f->is_float ? H5T_NATIVE_FLOAT : w == 2 ? H5T_NATIVE_UINT16 : H5T_NATIVE_UINT8;
  if (first == 0 && count == total)
    return H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0 ? -1 : 0;
  /* The file space seen as 1-D, so a part need not be whole rows. */
  hsize_t all = (hsize_t)total, start = (hsize_t)first, n = (hsize_t)count;
  hid_t flat = -1, ms = -1;
  int ok = (flat = H5Screate_simple(1, &all, NULL)) >= 0 &&
           H5Sselect_hyperslab(flat, H5S_SELECT_SET, &start, NULL, &n, NULL) >= 0 &&
           (ms = H5Screate_simple(1, &n, NULL)) >= 0 &&
           H5Dwrite(d, mtype, ms, flat, H5P_DEFAULT, data) >= 0;
  if (ms >= 0) H5Sclose(ms);
  if (flat >= 0) H5Sclose(flat);
  return ok ? 0 : -1;
}

int rank_container_finish_dataset(hid_t d, const mfile_format *f, const net_tensor *t,
                                  uint32_t crc) {
  int ok = rank_h5_attr_write_str(d, "dtype", f->name) == 0 &&
           rank_h5_attr_write_num(d, "checksum", H5T_STD_U32LE, H5T_NATIVE_UINT32, &crc, 1) == 0;
  if (ok && !f->elem) /* a block format's rows of bytes: the tensor's own shape beside them */
    ok = rank_h5_attr_write_num(d, "shape", H5T_STD_I64LE, H5T_NATIVE_INT64, t->shape,
                                t->ndim) == 0;
  return H5Dclose(d) < 0 || !ok ? -1 : 0;
}

int rank_container_commit(rank_h5_out *o, uint32_t acc) {
  char sum[32];
  const char *path = o->path;
  rank_container_checksum_str(acc, sum, sizeof sum);
  if (rank_h5_attr_write_str(o->file, "checksum", sum) != 0) {
    sp_log_error("%s: cannot write the model file (checksum attribute)", path);
    return SP_ERR_RUNTIME;
  }
  if (rank_h5_out_close(o) != 0) {
    sp_log_error("%s: cannot write the model file (closing the file failed (disk full?))", path);
    return SP_ERR_RUNTIME;
  }
  return rank_atomic_commit(o->tmp, path);
}
