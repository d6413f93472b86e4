/* The staticpipe model file: validating reader, synthetic models, writer
 * (see model_file.h).
 *
 * Reading: the file is opened with HDF5 once to validate every dataset and
 * record where its bytes are; weights are then read with pread() from a
 * plain descriptor at those offsets. That is exactly the bytes of the
 * dataset (contiguous, unfiltered, checked), safe from several threads
 * (serial HDF5 is not), and as fast as the page cache. */
#include "model_file.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"
#include "h5_util.h"
#include "model_file_impl.h"
#include "log.h"
#include "synth.h"

typedef struct ds_loc {
  uint64_t offset; /* byte offset of the dataset's data in the file */
  uint32_t crc;    /* its checksum attribute */
} ds_loc;

struct rank_model {
  rank_model_info info;
  wan_layout layout[3];
  int fd;       /* -1 for synth: */
  int verify;
  ds_loc *locs; /* per group instance and tensor: embed, blocks..., head */
  rank_model_merge_fn merge; /* applied to every group read, or NULL */
  void *merge_ctx;
};

void rank_model_dataset_path(wan_group g, int block, const char *name, char *buf, size_t n) {
  if (g == WAN_GROUP_BLOCK)
    snprintf(buf, n, "/blocks/%04d/%s", block, name);
  else
    snprintf(buf, n, "/%s/%s", g == WAN_GROUP_EMBED ? "embed" : "head", name);
}


/* ---- synthetic models --------------------------------------------------- */

static int open_synth(const char *spec, rank_model *m) {
  /* synth:PRESET[:SEED] */
  const char *p = spec + strlen("synth:");
  char preset[64];
  const char *colon = strchr(p, ':');
  size_t len = colon ? (size_t)(colon - p) : strlen(p);
  if (len == 0 || len >= sizeof preset) goto bad;
  memcpy(preset, p, len);
  preset[len] = '\0';
  uint64_t seed = 0;
  if (colon) {
    char *end = NULL;
    errno = 0;
    if (!colon[1] || colon[1] == '-') goto bad;
    seed = strtoull(colon + 1, &end, 10);
    if (*end || errno) goto bad;
  }
  if (wan_preset(preset, &m->info.config) != 0) {
    sp_log_error("%s: unknown preset '%s' (known: wan2.1-tiny, wan2.1-1.3b, wan2.1-14b)", spec,
                 preset);
    return SP_ERR_INPUT;
  }
  m->info.synthetic = 1;
  m->info.seed = seed;
  m->info.dtype = KERN_DTYPE_BF16;
  snprintf(m->info.arch, sizeof m->info.arch, "%s", WAN_ARCH);
  snprintf(m->info.preset, sizeof m->info.preset, "%s", preset);
  snprintf(m->info.checksum, sizeof m->info.checksum, "synth:%s:%" PRIu64 ":v%d", preset, seed,
           RANK_SYNTH_VERSION);
  return SP_OK;
bad:
  sp_log_error("%s: not a synthetic model spec: expected synth:PRESET[:SEED] with SEED a "
               "non-negative integer",
               spec);
  return SP_ERR_INPUT;
}

/* ---- validating reader -------------------------------------------------- */

typedef struct check_ctx {
  const char *path;
  hid_t file;
} check_ctx;

/* Root attributes and config. */
static int read_root(check_ctx *x, rank_model *m) {
  rank_model_info *in = &m->info;
  char s[256];
  if (rank_h5_attr_read_str(x->file, "format", s, sizeof s) != 0 || strcmp(s, RANK_MODEL_FORMAT) != 0) {
    sp_log_error("%s: not a staticpipe model file (root attribute format is not \"%s\")",
                 x->path, RANK_MODEL_FORMAT);
    return SP_ERR_INPUT;
  }
  int64_t version = 0;
  if (rank_h5_attr_read_num(x->file, "format_version", H5T_NATIVE_INT64, &version, 1) != 0) {
    sp_log_error("%s: root attribute format_version is missing or not an integer", x->path);
    return SP_ERR_INPUT;
  }
  if (version != RANK_MODEL_FORMAT_VERSION) {
    sp_log_error("%s: format_version %lld is not supported (this build reads version %d)",
                 x->path, (long long)version, RANK_MODEL_FORMAT_VERSION);
    return SP_ERR_INPUT;
  }
  if (rank_h5_attr_read_str(x->file, "arch", in->arch, sizeof in->arch) != 0 ||
      strcmp(in->arch, WAN_ARCH) != 0) {
    sp_log_error("%s: root attribute arch is missing or not \"%s\"", x->path, WAN_ARCH);
    return SP_ERR_INPUT;
  }
  if (rank_h5_attr_read_str(x->file, "dtype", s, sizeof s) != 0 ||
      (strcmp(s, "bf16") != 0 && strcmp(s, "fp32") != 0)) {
    sp_log_error("%s: root attribute dtype is missing or not \"bf16\"/\"fp32\"", x->path);
    return SP_ERR_INPUT;
  }
  in->dtype = strcmp(s, "fp32") == 0 ? KERN_DTYPE_F32 : KERN_DTYPE_BF16;
  if (rank_h5_attr_read_str(x->file, "preset", in->preset, sizeof in->preset) != 0) in->preset[0] = 0;
  if (rank_h5_attr_read_str(x->file, "checksum", in->checksum, sizeof in->checksum) != 0) {
    sp_log_error("%s: root attribute checksum is missing", x->path);
    return SP_ERR_INPUT;
  }
  wan_config *c = &in->config;
  struct {
    const char *name;
    int64_t *v;
  } ints[] = {{"dim", &c->dim},           {"ffn_dim", &c->ffn_dim},   {"heads", &c->heads},
              {"layers", &c->layers},     {"in_dim", &c->in_dim},     {"out_dim", &c->out_dim},
              {"text_len", &c->text_len}, {"text_dim", &c->text_dim}, {"freq_dim", &c->freq_dim}};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    if (rank_h5_attr_read_num(x->file, ints[i].name, H5T_NATIVE_INT64, ints[i].v, 1) != 0) {
      sp_log_error("%s: config attribute %s is missing or not an integer", x->path,
                   ints[i].name);
      return SP_ERR_INPUT;
    }
  }
  if (rank_h5_attr_read_num(x->file, "patch", H5T_NATIVE_INT64, c->patch, 3) != 0) {
    sp_log_error("%s: config attribute patch is missing or not 3 integers", x->path);
    return SP_ERR_INPUT;
  }
  if (rank_h5_attr_read_num(x->file, "eps", H5T_NATIVE_DOUBLE, &c->eps, 1) != 0) {
    sp_log_error("%s: config attribute eps is missing or not a number", x->path);
    return SP_ERR_INPUT;
  }
  char err[256];
  if (wan_config_check(c, err, sizeof err) != 0) {
    sp_log_error("%s: %s", x->path, err);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* Refuses soft and external links anywhere in the file: every object must
 * be inside it. */
static herr_t link_visit(hid_t g, const char *name, const H5L_info_t *info, void *op) {
  if (info->type != H5L_TYPE_HARD) {
    snprintf((char *)op, 512, "%s", name);
    return 1;
  }
  return 0;
}

/* One dataset: existence, kind, layout, filters, dtype, shape, storage. */
static int check_dataset(check_ctx *x, rank_model *m, wan_group g, int block,
                         const wan_tensor *t, ds_loc *loc) {
  char path[256];
  rank_model_dataset_path(g, block, t->name, path, sizeof path);
  int rc = SP_ERR_INPUT;
  hid_t d = -1, dcpl = -1, type = -1, space = -1;
  const char *why = NULL;
  char whybuf[256];
  if (H5Lexists(x->file, path, H5P_DEFAULT) <= 0) {
    why = "dataset is missing";
    goto fail;
  }
  if ((d = H5Dopen2(x->file, path, H5P_DEFAULT)) < 0) {
    why = "not a dataset";
    goto fail;
  }
  if ((dcpl = H5Dget_create_plist(d)) < 0) {
    why = "cannot read its creation properties";
    goto fail;
  }
  H5D_layout_t layout = H5Pget_layout(dcpl);
  if (layout == H5D_VIRTUAL) {
    why = "is a virtual dataset (data outside the file)";
    goto fail;
  }
  if (layout != H5D_CONTIGUOUS) {
    why = layout == H5D_CHUNKED ? "layout is chunked, expected contiguous (rewrite the file "
                                  "with staticpipe convert or init)"
                                : "layout is not contiguous";
    goto fail;
  }
  if (H5Pget_nfilters(dcpl) != 0) {
    why = "has filters (compression); expected none";
    goto fail;
  }
  if (H5Pget_external_count(dcpl) != 0) {
    why = "stores its data in an external file";
    goto fail;
  }
  if ((type = H5Dget_type(d)) < 0) {
    why = "cannot read its dtype";
    goto fail;
  }
  int bf16 = m->info.dtype == KERN_DTYPE_BF16;
  int type_ok = bf16 ? (H5Tget_class(type) == H5T_INTEGER && H5Tget_size(type) == 2 &&
                        H5Tget_sign(type) == H5T_SGN_NONE && H5Tget_order(type) == H5T_ORDER_LE)
                     : (H5Tget_class(type) == H5T_FLOAT && H5Tget_size(type) == 4 &&
                        H5Tget_order(type) == H5T_ORDER_LE);
  char dt[32] = "";
  if (rank_h5_attr_read_str(d, "dtype", dt, sizeof dt) != 0) dt[0] = 0;
  if (!type_ok || strcmp(dt, kern_dtype_name(m->info.dtype)) != 0) {
    snprintf(whybuf, sizeof whybuf,
             "dtype is not %s (expected %s and attribute dtype = \"%s\", found \"%s\")",
             kern_dtype_name(m->info.dtype),
             bf16 ? "16-bit unsigned little-endian" : "32-bit float little-endian",
             kern_dtype_name(m->info.dtype), dt);
    why = whybuf;
    goto fail;
  }
  if ((space = H5Dget_space(d)) < 0) {
    why = "cannot read its shape";
    goto fail;
  }
  int nd = H5Sget_simple_extent_ndims(space);
  hsize_t dims[8];
  int shape_ok = nd == t->ndim && nd <= 8 && H5Sget_simple_extent_dims(space, dims, NULL) == nd;
  for (int i = 0; shape_ok && i < nd; i++) shape_ok = dims[i] == (hsize_t)t->shape[i];
  if (!shape_ok) {
    char want[96] = "", have[96] = "";
    for (int i = 0; i < t->ndim; i++)
      snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? "," : "",
               (long long)t->shape[i]);
    if (nd > 0 && nd <= 8 && H5Sget_simple_extent_dims(space, dims, NULL) == nd)
      for (int i = 0; i < nd; i++)
        snprintf(have + strlen(have), sizeof have - strlen(have), "%s%llu", i ? "," : "",
                 (unsigned long long)dims[i]);
    snprintf(whybuf, sizeof whybuf, "shape is [%s], the config needs [%s]", have, want);
    why = whybuf;
    goto fail;
  }
  if (H5Dget_storage_size(d) != (hsize_t)t->bytes) {
    snprintf(whybuf, sizeof whybuf, "storage holds %llu bytes, expected %zu",
             (unsigned long long)H5Dget_storage_size(d), t->bytes);
    why = whybuf;
    goto fail;
  }
  haddr_t off = H5Dget_offset(d);
  if (off == HADDR_UNDEF) {
    why = "has no allocated contiguous storage";
    goto fail;
  }
  if (rank_h5_attr_read_num(d, "checksum", H5T_NATIVE_UINT32, &loc->crc, 1) != 0) {
    why = "checksum attribute is missing";
    goto fail;
  }
  loc->offset = (uint64_t)off;
  rc = SP_OK;
fail:
  if (why) sp_log_error("%s: %s: %s", x->path, path, why);
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  if (dcpl >= 0) H5Pclose(dcpl);
  if (d >= 0) H5Dclose(d);
  return rc;
}

/* Counts the members of a group; refuses anything the table does not name. */
static int check_no_extra(check_ctx *x, const char *group, const wan_layout *l) {
  hid_t g = H5Gopen2(x->file, group, H5P_DEFAULT);
  if (g < 0) {
    sp_log_error("%s: group %s is missing", x->path, group);
    return SP_ERR_INPUT;
  }
  H5G_info_t gi;
  int rc = SP_OK;
  if (H5Gget_info(g, &gi) < 0) {
    sp_log_error("%s: cannot list group %s", x->path, group);
    rc = SP_ERR_INPUT;
  } else if (gi.nlinks != (hsize_t)l->count) {
    for (hsize_t i = 0; i < gi.nlinks; i++) {
      char name[256];
      if (H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name,
                             H5P_DEFAULT) < 0)
        continue;
      if (wan_layout_find(l, name) < 0) {
        sp_log_error("%s: %s/%s: unexpected object (not a tensor of this group)", x->path,
                     group, name);
        rc = SP_ERR_INPUT;
        break;
      }
    }
    for (int i = 0; rc == SP_OK && i < l->count; i++) {
      if (H5Lexists(g, l->t[i].name, H5P_DEFAULT) <= 0) {
        sp_log_error("%s: %s/%s: dataset is missing", x->path, group, l->t[i].name);
        rc = SP_ERR_INPUT;
      }
    }
    if (rc == SP_OK) {
      sp_log_error("%s: group %s has %llu members, expected %d", x->path, group,
                   (unsigned long long)gi.nlinks, l->count);
      rc = SP_ERR_INPUT;
    }
  }
  H5Gclose(g);
  return rc;
}

static int open_file(const char *path, rank_model *m) {
  rank_h5_silence();
  snprintf(m->info.source, sizeof m->info.source, "%s", path);
  if (access(path, R_OK) != 0) {
    sp_log_error("%s: cannot open model file: %s", path, strerror(errno));
    return SP_ERR_INPUT;
  }
  if (H5Fis_hdf5(path) <= 0) {
    sp_log_error("%s: not an HDF5 file (truncated or another format)", path);
    return SP_ERR_INPUT;
  }
  check_ctx x = {path, -1};
  int rc = SP_ERR_INPUT;
  x.file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (x.file < 0) {
    sp_log_error("%s: HDF5 cannot open the file (truncated or damaged)", path);
    return SP_ERR_INPUT;
  }
  if ((rc = read_root(&x, m)) != SP_OK) goto done;
  char bad_link[512] = "";
  if (H5Lvisit(x.file, H5_INDEX_NAME, H5_ITER_INC, link_visit, bad_link) != 0) {
    sp_log_error("%s: %s: soft or external link (every object must live in the file)", path,
                 bad_link[0] ? bad_link : "?");
    rc = SP_ERR_INPUT;
    goto done;
  }
  const wan_config *c = &m->info.config;
  for (int g = 0; g < 3; g++) wan_layout_make(c, (wan_group)g, m->info.dtype, &m->layout[g]);
  m->locs = sp_xcalloc((size_t)rank_model_instances(c) * WAN_MAX_TENSORS, sizeof *m->locs);
  if ((rc = check_no_extra(&x, "/embed", &m->layout[WAN_GROUP_EMBED])) != SP_OK) goto done;
  if ((rc = check_no_extra(&x, "/head", &m->layout[WAN_GROUP_HEAD])) != SP_OK) goto done;
  hid_t blocks = H5Gopen2(x.file, "/blocks", H5P_DEFAULT);
  H5G_info_t bi;
  if (blocks < 0 || H5Gget_info(blocks, &bi) < 0) {
    sp_log_error("%s: group /blocks is missing", path);
    if (blocks >= 0) H5Gclose(blocks);
    rc = SP_ERR_INPUT;
    goto done;
  }
  H5Gclose(blocks);
  if (bi.nlinks != (hsize_t)c->layers) {
    sp_log_error("%s: /blocks has %llu groups, the config says layers = %lld", path,
                 (unsigned long long)bi.nlinks, (long long)c->layers);
    rc = SP_ERR_INPUT;
    goto done;
  }
  for (int b = 0; b < (int)c->layers; b++) {
    char gname[64];
    snprintf(gname, sizeof gname, "/blocks/%04d", b);
    if ((rc = check_no_extra(&x, gname, &m->layout[WAN_GROUP_BLOCK])) != SP_OK) goto done;
  }
  for (int g = 0; g < 3; g++) {
    int nb = g == WAN_GROUP_BLOCK ? (int)c->layers : 1;
    for (int b = 0; b < nb; b++) {
      const wan_layout *l = &m->layout[g];
      ds_loc *locs = m->locs + (size_t)rank_model_instance(c, (wan_group)g, b) * WAN_MAX_TENSORS;
      for (int i = 0; i < l->count; i++)
        if ((rc = check_dataset(&x, m, (wan_group)g, b, &l->t[i], &locs[i])) != SP_OK) goto done;
    }
  }
  rc = SP_OK;
done:
  H5Fclose(x.file);
  if (rc != SP_OK) return rc;
  m->fd = open(path, O_RDONLY | O_CLOEXEC);
  if (m->fd < 0) {
    sp_log_error("%s: cannot open for reading: %s", path, strerror(errno));
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

int rank_model_open(const char *spec, int verify, rank_model **out) {
  rank_model *m = sp_xcalloc(1, sizeof *m);
  m->fd = -1;
  m->verify = verify;
  int rc;
  if (strncmp(spec, "synth:", 6) == 0) {
    rc = open_synth(spec, m);
    snprintf(m->info.source, sizeof m->info.source, "%s", spec);
    if (rc == SP_OK)
      for (int g = 0; g < 3; g++)
        wan_layout_make(&m->info.config, (wan_group)g, m->info.dtype, &m->layout[g]);
  } else {
    rc = open_file(spec, m);
  }
  if (rc != SP_OK) {
    rank_model_close(m);
    return rc;
  }
  const char *p = wan_preset_match(&m->info.config);
  if (!m->info.preset[0] && p) snprintf(m->info.preset, sizeof m->info.preset, "%s", p);
  *out = m;
  return SP_OK;
}

void rank_model_close(rank_model *m) {
  if (!m) return;
  if (m->fd >= 0) close(m->fd);
  free(m->locs);
  free(m);
}

const rank_model_info *rank_model_get_info(const rank_model *m) { return &m->info; }
const wan_layout *rank_model_layout(const rank_model *m, wan_group g) { return &m->layout[g]; }

static int pread_full(int fd, void *dst, size_t n, uint64_t off) {
  char *p = dst;
  while (n > 0) {
    ssize_t r = pread(fd, p, n, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
    off += (uint64_t)r;
  }
  return 0;
}

int rank_model_read_group(rank_model *m, wan_group g, int block, void *dst, size_t dst_bytes,
                          uint64_t *bytes_read) {
  const wan_config *c = &m->info.config;
  const wan_layout *l = &m->layout[g];
  if (g == WAN_GROUP_BLOCK && (block < 0 || block >= c->layers)) {
    sp_log_error("%s: block %d does not exist (the model has %lld)", m->info.source, block,
                 (long long)c->layers);
    return SP_ERR_INPUT;
  }
  if (dst_bytes < l->packed_bytes) {
    sp_log_error("%s: buffer of %zu bytes too small for a %s group of %zu", m->info.source,
                 dst_bytes, wan_group_name(g), l->packed_bytes);
    return SP_ERR_RUNTIME;
  }
  /* Zero the padding between tensors (and after the last): not the whole
   * group, whose bytes the reads below write anyway (a memset of the group
   * on one thread took as long as the parallel read). */
  for (int i = 0; i < l->count; i++) {
    size_t end = l->t[i].offset + l->t[i].bytes;
    size_t next = i + 1 < l->count ? l->t[i + 1].offset : l->packed_bytes;
    if (next > end) memset((char *)dst + end, 0, next - end);
  }
  if (l->count && l->t[0].offset > 0) memset(dst, 0, l->t[0].offset);
  if (m->info.synthetic) { /* (each tensor's generation is parallel itself) */
    for (int i = 0; i < l->count; i++)
      rank_synth_tensor(c, m->info.seed, g, block, &l->t[i], m->info.dtype,
                        (char *)dst + l->t[i].offset);
    return m->merge ? m->merge(m->merge_ctx, g, block, l, m->info.dtype, dst) : SP_OK;
  }
  const ds_loc *locs = m->locs + (size_t)rank_model_instance(c, g, block) * WAN_MAX_TENSORS;
  /* Several threads: one thread's pread from the page cache runs at a few
   * GB/s, well under the memory's rate. The reads go in pieces of
   * READ_PIECE bytes, each checksummed right after its read while it is in
   * cache; each tensor's CRC is then joined from its pieces'
   * (crc32c_combine). The first failing tensor is reported. */
  enum { READ_PIECE = 2 << 20 };
  int64_t pieces[WAN_MAX_TENSORS + 1];
  pieces[0] = 0;
  for (int i = 0; i < l->count; i++)
    pieces[i + 1] = pieces[i] + (int64_t)((l->t[i].bytes + READ_PIECE - 1) / READ_PIECE);
  uint32_t *piece_crc = sp_xmalloc((size_t)(pieces[l->count] + 1) * sizeof *piece_crc);
  int bad = -1, bad_errno = 0;
  uint32_t bad_crc = 0;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t k = 0; k < pieces[l->count]; k++) {
    int i = 0;
    while (pieces[i + 1] <= k) i++;
    const wan_tensor *t = &l->t[i];
    size_t off = (size_t)(k - pieces[i]) * READ_PIECE;
    size_t n = t->bytes - off < READ_PIECE ? t->bytes - off : READ_PIECE;
    char *p = (char *)dst + t->offset + off;
    if (pread_full(m->fd, p, n, locs[i].offset + off) != 0) {
      int e = errno ? errno : EIO;
#pragma omp critical(sp_read_group)
      if (bad < 0 || i < bad) {
        bad = i;
        bad_errno = e;
      }
    } else if (m->verify) {
      piece_crc[k] = crc32c(0, p, n);
    }
  }
  if (bad < 0 && m->verify) {
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < l->count; i++) {
      uint32_t crc = crc32c(0, NULL, 0);
      for (int64_t k = pieces[i]; k < pieces[i + 1]; k++) {
        size_t off = (size_t)(k - pieces[i]) * READ_PIECE;
        size_t n = l->t[i].bytes - off < READ_PIECE ? l->t[i].bytes - off : READ_PIECE;
        crc = k == pieces[i] ? piece_crc[k] : crc32c_combine(crc, piece_crc[k], n);
      }
      if (crc != locs[i].crc) {
#pragma omp critical(sp_read_group)
        if (bad < 0 || i < bad) {
          bad = i;
          bad_crc = crc;
        }
      }
    }
  }
  free(piece_crc);
  if (bad >= 0) {
    char path[256];
    rank_model_dataset_path(g, block, l->t[bad].name, path, sizeof path);
    if (bad_errno)
      sp_log_error("%s: %s: read failed (file truncated or unreadable: %s)", m->info.source,
                   path, strerror(bad_errno));
    else
      sp_log_error("%s: %s: checksum mismatch (stored %08x, data gives %08x): the file is "
                   "damaged",
                   m->info.source, path, locs[bad].crc, bad_crc);
    return SP_ERR_INPUT;
  }
  if (bytes_read)
    for (int i = 0; i < l->count; i++) *bytes_read += l->t[i].bytes;
  return m->merge ? m->merge(m->merge_ctx, g, block, l, m->info.dtype, dst) : SP_OK;
}

void rank_model_set_merge(rank_model *m, rank_model_merge_fn fn, void *ctx) {
  m->merge = fn;
  m->merge_ctx = ctx;
}

