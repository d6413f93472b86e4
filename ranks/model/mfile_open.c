/* The model-file layer's open: a synth: spec parsed, or a file validated
 * from its schema, every dataset's place recorded for the reads (see
 * mfile.h). The file is opened with HDF5 once to validate; the weights are
 * then read with pread() from a plain descriptor (mfile_read.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5_util.h"
#include "log.h"
#include "mfile_impl.h"
#include "model_container.h"
#include "synth.h"

void mfile_tables(const net_schema *s, const void *config, net_group **g, int *ng,
                  net_tensor **t, int *nt) {
  *ng = s->groups(config, NULL);
  *g = sp_xcalloc((size_t)*ng + 1, sizeof **g);
  s->groups(config, *g);
  *nt = s->tensors(config, NULL);
  *t = sp_xcalloc((size_t)*nt + 1, sizeof **t);
  s->tensors(config, *t);
}

void mfile_tensor_path(const net_tensor *t, char *buf, size_t n) {
  snprintf(buf, n, "%s/%s", t->group, t->name);
}

void mfile_scale_path(const char *ds, char *buf, size_t n) {
  snprintf(buf, n, "%s%s", ds, MFILE_SCALE_SUFFIX);
}

/* The last component of path ("/blocks/0003" -> "0003"). */
static const char *leaf(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* 1 when group child lies directly in group parent ("/" the root). */
static int child_of(const char *child, const char *parent) {
  const char *s = strrchr(child, '/');
  size_t n = s ? (size_t)(s - child) : 0;
  if (strcmp(parent, "/") == 0) return n == 0;
  return strlen(parent) == n && strncmp(child, parent, n) == 0;
}

/* The group at path holds exactly its child groups, its tensors and their
 * scales (the formats found). */
static int check_members(const mfile *m, hid_t file, const char *path, const char *group) {
  int cap = m->ngroups + 2 * m->ntensors + 1, n = 0;
  const char **names = sp_xcalloc((size_t)cap, sizeof *names);
  char (*scales)[NET_NAME_MAX + 8] = sp_xcalloc((size_t)m->ntensors + 1, sizeof *scales);
  for (int i = 0; i < m->ngroups; i++)
    if (child_of(m->g[i].path, group)) names[n++] = leaf(m->g[i].path);
  for (int i = 0; i < m->ntensors; i++) {
    if (strcmp(m->t[i].group, group) != 0) continue;
    names[n++] = m->t[i].name;
    if (!mfile_format_of(m->loc[i].dtype)->scaled) continue;
    mfile_scale_path(m->t[i].name, scales[i], sizeof scales[i]);
    names[n++] = scales[i];
  }
  int rc = rank_container_check_members(file, path, group, names, n);
  free(scales);
  free(names);
  return rc;
}

/* Every group is there and a counted one holds as many as the config says. */
static int check_groups(const mfile *m, hid_t file, const char *path) {
  for (int i = 0; i < m->ngroups; i++) {
    const net_group *g = &m->g[i];
    hid_t h = H5Gopen2(file, g->path, H5P_DEFAULT);
    H5G_info_t gi;
    if (h < 0 || H5Gget_info(h, &gi) < 0) {
      sp_log_error("%s: group %s is missing", path, g->path);
      if (h >= 0) H5Gclose(h);
      return SP_ERR_INPUT;
    }
    H5Gclose(h);
    const int k = g->count_attr ? net_attr_find(m->schema, g->count_attr) : -1;
    if (k < 0) continue;
    const int64_t want = net_attr_get(&m->schema->attrs[k], m->config, 0);
    if (gi.nlinks != (hsize_t)want) {
      sp_log_error("%s: %s has %llu groups, the config says %s = %lld", path, g->path,
                   (unsigned long long)gi.nlinks, g->count_attr, (long long)want);
      return SP_ERR_INPUT;
    }
  }
  return SP_OK;
}

/* Every tensor's dataset (and a scaled format's scales) in table order,
 * their CRCs folded into *acc. */
static int check_datasets(mfile *m, hid_t file, const char *path, uint32_t *acc) {
  for (int i = 0; i < m->ntensors; i++) {
    const net_tensor *t = &m->t[i];
    const kern_dtype *allowed;
    const int nallowed = mfile_root_allowed(m->root, t, &allowed);
    char ds[NET_PATH_MAX + NET_NAME_MAX + 16], sds[sizeof ds + 8];
    rank_container_found got;
    mfile_tensor_path(t, ds, sizeof ds);
    int rc = rank_container_check_dataset(file, path, ds, allowed, nallowed, t, &got);
    if (rc != SP_OK) return rc;
    m->loc[i] = (mfile_loc){got.dtype, got.offset, got.bytes, got.crc, 0, 0};
    *acc = rank_container_checksum_add(*acc, got.crc);
    if (!mfile_format_of(got.dtype)->scaled) continue;
    /* its scales: float32 (rows), right after it in the checksum */
    net_tensor st = {.ndim = 1, .shape = {mfile_tensor_rows(t)}};
    net_tensor_finish(&st);
    const kern_dtype f32[1] = {KERN_DTYPE_F32};
    mfile_scale_path(ds, sds, sizeof sds);
    if ((rc = rank_container_check_dataset(file, path, sds, f32, 1, &st, &got)) != SP_OK) return rc;
    m->loc[i].scale_offset = got.offset;
    m->loc[i].scale_crc = got.crc;
    *acc = rank_container_checksum_add(*acc, got.crc);
  }
  return SP_OK;
}

/* The structure, datasets, hooks and members of an open file. */
static int check_file(mfile *m, hid_t file, const char *path, const mfile_hooks *h,
                      uint32_t *acc) {
  int rc = rank_container_check_links(file, path);
  if (rc == SP_OK) rc = check_groups(m, file, path);
  if (rc == SP_OK) rc = check_datasets(m, file, path, acc);
  if (rc == SP_OK && h && h->read) rc = h->read(h->ctx, file, path, acc);
  if (rc == SP_OK) rc = check_members(m, file, path, "/");
  for (int i = 0; i < m->ngroups && rc == SP_OK; i++)
    if (!m->g[i].foreign) rc = check_members(m, file, path, m->g[i].path);
  return rc;
}

static int open_file(mfile *m, const char *path, const mfile_hooks *h) {
  hid_t f;
  int rc = rank_container_open(path, &f);
  if (rc != SP_OK) return rc;
  rank_container_root root;
  uint32_t acc = 0;
  model_file_id *id = &m->id;
  if ((rc = rank_container_read_root(f, path, m->schema, &root)) != SP_OK) goto done;
  m->root = mfile_root_named(root.dtype);
  snprintf(id->arch, sizeof id->arch, "%s", root.arch);
  snprintf(id->preset, sizeof id->preset, "%s", root.preset);
  snprintf(id->checksum, sizeof id->checksum, "%s", root.checksum);
  id->dtype = m->root->rest[0];
  if ((rc = mfile_attrs_read(f, path, m->schema, m->config)) != SP_OK) goto done;
  mfile_tables(m->schema, m->config, &m->g, &m->ngroups, &m->t, &m->ntensors);
  m->loc = sp_xcalloc((size_t)m->ntensors + 1, sizeof *m->loc);
  if ((rc = check_file(m, f, path, h, &acc)) != SP_OK) goto done;
  /* The model checksum is a function of the datasets' checksums, in table
   * order: verified against the root attribute, and the one outputs record
   * either way. */
  if (m->verify && (rc = rank_container_checksum_check(path, id->checksum, acc)) != SP_OK)
    goto done;
  rank_container_checksum_str(acc, id->checksum, sizeof id->checksum);
done:
  return rank_container_open_end(f, path, rc, &m->fd);
}

static int open_synth(mfile *m, const char *spec) {
  const net_schema *s = m->schema;
  m->root = mfile_root_named(s->synth_dtype);
  int rc = model_file_id_synth(&m->id, spec, s->arch, m->root->rest[0]);
  if (rc == SP_OK && s->preset(m->id.preset, m->config) != 0)
    rc = model_file_id_bad_preset(&m->id, s->preset_kind, s->preset_names());
  if (rc != SP_OK) return rc;
  mfile_tables(s, m->config, &m->g, &m->ngroups, &m->t, &m->ntensors);
  m->loc = sp_xcalloc((size_t)m->ntensors + 1, sizeof *m->loc);
  for (int i = 0; i < m->ntensors; i++) {
    const mfile_format *f = mfile_format_of(m->root->rest[0]);
    m->loc[i].dtype = f->dtype;
    m->loc[i].bytes = mfile_format_bytes(f, &m->t[i]);
  }
  return SP_OK;
}

int mfile_open(const char *spec, const net_schema *s, const mfile_hooks *hooks, int verify,
               mfile **out) {
  mfile *m = sp_xcalloc(1, sizeof *m);
  m->schema = s;
  m->fd = -1;
  m->verify = verify;
  m->config = sp_xcalloc(1, s->config_size);
  int rc = model_file_id_start(&m->id, spec) ? open_synth(m, spec) : open_file(m, spec, hooks);
  if (rc != SP_OK) {
    mfile_close(m);
    return rc;
  }
  model_file_id_match(&m->id, s->preset_match(m->config));
  *out = m;
  return SP_OK;
}

void mfile_close(mfile *m) {
  if (!m) return;
  if (m->fd >= 0) close(m->fd);
  free(m->stage);
  free(m->loc);
  free(m->t);
  free(m->g);
  free(m->config);
  free(m);
}

const void *mfile_config(const mfile *m) { return m->config; }
const model_file_id *mfile_id(const mfile *m) { return &m->id; }
const mfile_root *mfile_root_dtype(const mfile *m) { return m->root; }
int mfile_count(const mfile *m) { return m->ntensors; }
const net_tensor *mfile_tensor(const mfile *m, int i) { return &m->t[i]; }
kern_dtype mfile_stored(const mfile *m, int i) { return m->loc[i].dtype; }

uint64_t mfile_stored_bytes(const mfile *m, int i) {
  const int scaled = mfile_format_of(m->loc[i].dtype)->scaled;
  return m->loc[i].bytes + (scaled ? (uint64_t)mfile_tensor_rows(&m->t[i]) * sizeof(float) : 0);
}

int mfile_find(const mfile *m, const char *group, const char *name) {
  for (int i = 0; i < m->ntensors; i++)
    if (strcmp(m->t[i].group, group) == 0 && strcmp(m->t[i].name, name) == 0) return i;
  return -1;
}

int mfile_arch(const char *path, char *arch, size_t n) {
  rank_h5_silence();
  /* Not a regular file: no arch (the caller's reader says why). */
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || access(path, R_OK) != 0 ||
      H5Fis_hdf5(path) <= 0)
    return -1;
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return -1;
  int rc = rank_h5_attr_read_str(f, "arch", arch, n);
  H5Fclose(f);
  return rc;
}
