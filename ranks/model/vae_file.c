/* The VAE decoder's model file: presets, synthetic weights, the validating
 * reader (see vae_file.h). Validation and reads go through the container
 * shared with the DiT's file (model_container.h). */
#include "vae_file.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "container_io.h"
#include "h5_util.h"
#include "log.h"
#include "model_container.h"
#include "model_file.h"
#include "synth.h"
#include "vae_file_impl.h"

struct vae_model {
  vae_model_info info;
  wan_vae_weights w; /* structure only: the table's slots point here */
  wan_vae_table table;
  rank_table_reader file;
};

/* ---- presets ------------------------------------------------------------- */

/* The presets: the published config, and wan2.1-vae-tiny, the published
 * structure (dim_mult, residual blocks, temporal upsampling, so T = 1 +
 * 4 (F - 1) and 8x in space) at dim 8: widths 32, 32, 16, 8, for tests. */
static const struct {
  const char *name;
  int64_t dim; /* 0: the published */
} presets[] = {
    {"wan2.1-vae", 0},
    {"wan2.1-vae-tiny", 8},
};
#define N_PRESETS (sizeof presets / sizeof presets[0])

int vae_preset(const char *name, wan_vae_config *out) {
  for (size_t i = 0; i < N_PRESETS; i++) {
    if (strcmp(name, presets[i].name) != 0) continue;
    wan_vae_config_published(out);
    if (presets[i].dim) out->dim = presets[i].dim;
    return 0;
  }
  return -1;
}

const char *vae_preset_names(void) {
  static char list[128];
  return model_file_preset_list(list, sizeof list, presets, N_PRESETS, sizeof presets[0]);
}

static int config_equal(const wan_vae_config *a, const wan_vae_config *b) {
  if (a->dim != b->dim || a->z_dim != b->z_dim || a->n_mult != b->n_mult ||
      a->num_res_blocks != b->num_res_blocks)
    return 0;
  for (int i = 0; i < a->n_mult; i++)
    if (a->dim_mult[i] != b->dim_mult[i]) return 0;
  for (int i = 0; i + 1 < a->n_mult; i++)
    if (a->temporal_up[i] != b->temporal_up[i]) return 0;
  return 1;
}

const char *vae_preset_match(const wan_vae_config *c) {
  for (size_t i = 0; i < N_PRESETS; i++) {
    wan_vae_config p = {0};
    vae_preset(presets[i].name, &p);
    if (config_equal(&p, c)) return presets[i].name;
  }
  return NULL;
}

/* ---- config attributes (vae_file_impl.h) --------------------------------- */

void vae_file_dataset_path(const char *name, char *buf, size_t n) {
  snprintf(buf, n, "/%s/%s", VAE_FILE_GROUP, name);
}

int vae_file_config_write(hid_t file, const wan_vae_config *c) {
  int64_t n_mult = c->n_mult, temporal[WAN_VAE_MAX_LEVELS - 1];
  for (int i = 0; i + 1 < c->n_mult; i++) temporal[i] = c->temporal_up[i];
  int ok = rank_h5_attr_write_num(file, "dim", H5T_STD_I64LE, H5T_NATIVE_INT64, &c->dim, 1) == 0 &&
           rank_h5_attr_write_num(file, "z_dim", H5T_STD_I64LE, H5T_NATIVE_INT64, &c->z_dim, 1) == 0 &&
           rank_h5_attr_write_num(file, "n_mult", H5T_STD_I64LE, H5T_NATIVE_INT64, &n_mult, 1) == 0 &&
           rank_h5_attr_write_num(file, "dim_mult", H5T_STD_I64LE, H5T_NATIVE_INT64, c->dim_mult,
                                  (hsize_t)c->n_mult) == 0 &&
           rank_h5_attr_write_num(file, "num_res_blocks", H5T_STD_I64LE, H5T_NATIVE_INT64,
                                  &c->num_res_blocks, 1) == 0;
  if (ok && c->n_mult > 1)
    ok = rank_h5_attr_write_num(file, "temporal_up", H5T_STD_I64LE, H5T_NATIVE_INT64, temporal,
                                (hsize_t)(c->n_mult - 1)) == 0;
  return ok ? 0 : -1;
}

int vae_file_config_read(hid_t file, const char *path, wan_vae_config *c) {
  memset(c, 0, sizeof *c);
  int64_t n_mult = 0, temporal[WAN_VAE_MAX_LEVELS - 1] = {0};
  const char *bad = NULL;
  if (rank_h5_attr_read_num(file, "dim", H5T_NATIVE_INT64, &c->dim, 1) != 0) bad = "dim";
  else if (rank_h5_attr_read_num(file, "z_dim", H5T_NATIVE_INT64, &c->z_dim, 1) != 0) bad = "z_dim";
  else if (rank_h5_attr_read_num(file, "num_res_blocks", H5T_NATIVE_INT64, &c->num_res_blocks, 1) != 0)
    bad = "num_res_blocks";
  else if (rank_h5_attr_read_num(file, "n_mult", H5T_NATIVE_INT64, &n_mult, 1) != 0 || n_mult < 1 ||
           n_mult > WAN_VAE_MAX_LEVELS)
    bad = "n_mult";
  else if (rank_h5_attr_read_num(file, "dim_mult", H5T_NATIVE_INT64, c->dim_mult, n_mult) != 0)
    bad = "dim_mult";
  else if (n_mult > 1 &&
           rank_h5_attr_read_num(file, "temporal_up", H5T_NATIVE_INT64, temporal, n_mult - 1) != 0)
    bad = "temporal_up";
  if (bad) {
    sp_log_error("%s: config attribute %s is missing or malformed (dim, z_dim, num_res_blocks: "
                 "integers; n_mult 1..%d; dim_mult: n_mult integers; temporal_up: n_mult - 1)",
                 path, bad, WAN_VAE_MAX_LEVELS);
    return SP_ERR_INPUT;
  }
  c->n_mult = (int)n_mult;
  for (int i = 0; i + 1 < c->n_mult; i++) {
    if (temporal[i] != 0 && temporal[i] != 1) {
      sp_log_error("%s: config attribute temporal_up[%d] = %lld is not 0 or 1", path, i,
                   (long long)temporal[i]);
      return SP_ERR_INPUT;
    }
    c->temporal_up[i] = (int)temporal[i];
  }
  char err[256];
  if (wan_vae_config_check(c, err, sizeof err) != 0) {
    sp_log_error("%s: %s", path, err);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* ---- synthetic VAEs ------------------------------------------------------- */

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* center + half U[-1, 1) per kind of tensor (vae_file.h). */
static void synth_scale(const wan_vae_tensor *t, double *center, double *half) {
  *center = 0.0;
  if (ends_with(t->name, ".gamma")) {
    *center = 1.0;
    *half = 0.1;
  } else if (ends_with(t->name, ".bias")) {
    *half = 0.05;
  } else {
    *half = sqrt(3.0 / (double)(t->numel / t->shape[0])); /* variance 1/fan_in */
  }
}

static void synth_tensor(uint64_t seed, const wan_vae_tensor *t, float *dst) {
  uint64_t key = rank_synth_key(seed, t->name);
  double center, half;
  synth_scale(t, &center, &half);
  const int64_t n = t->numel;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; i++)
    dst[i] = (float)(center + half * rank_synth_uniform(key, (uint64_t)i));
}

static int open_synth(const char *spec, vae_model *m) {
  model_file_id *id = &m->info.id;
  int rc = model_file_id_synth(id, spec, VAE_MODEL_ARCH, KERN_DTYPE_F32);
  if (rc == SP_OK && vae_preset(id->preset, &m->info.config) != 0)
    rc = model_file_id_bad_preset(id, "VAE ", vae_preset_names());
  return rc;
}

/* ---- validating reader ----------------------------------------------------- */

static int open_file(const char *path, vae_model *m) {
  vae_model_info *in = &m->info;
  const wan_vae_table *t = &m->table;
  uint32_t acc = 0;
  hid_t f;
  int rc = rank_container_open_id(path, VAE_MODEL_ARCH, &in->id, NULL, &f);
  if (rc != SP_OK) return rc;
  if ((rc = vae_file_config_read(f, path, &in->config)) != SP_OK) goto done;
  if ((rc = rank_container_check_links(f, path)) != SP_OK) goto done;
  wan_vae_table_make(&in->config, &m->w, &m->table);
  const char *root_names[] = {VAE_FILE_GROUP};
  if ((rc = rank_container_check_members(f, path, "/", root_names, 1)) != SP_OK) goto done;
  rank_container_tensor ct[WAN_VAE_MAX_TENSORS];
  for (int i = 0; i < t->count; i++)
    ct[i] = (rank_container_tensor){t->t[i].name, t->t[i].ndim, t->t[i].shape, t->t[i].numel};
  rc = rank_container_check_tensors(f, path, VAE_FILE_GROUP, in->id.dtype, t->count, ct,
                                    &m->file.offset, &m->file.crc, &acc);
done:
  return rank_table_reader_end(&m->file, f, path, in->id.checksum, acc, rc);
}

int vae_model_open(const char *spec, int verify, vae_model **out) {
  vae_model *m = sp_xcalloc(1, sizeof *m);
  int synth = rank_table_reader_start(&m->file, &m->info.id, spec, verify);
  int rc = synth ? open_synth(spec, m) : open_file(spec, m);
  if (rc != SP_OK) {
    vae_model_close(m);
    return rc;
  }
  vae_model_info *in = &m->info;
  wan_vae_table_make(&in->config, &m->w, &m->table);
  model_file_size_set(&in->size, &in->id, m->table.count, m->table.params);
  model_file_id_match(&in->id, vae_preset_match(&in->config));
  *out = m;
  return SP_OK;
}

void vae_model_close(vae_model *m) {
  if (!m) return;
  rank_table_reader_close(&m->file);
  free(m);
}

const vae_model_info *vae_model_get_info(const vae_model *m) { return &m->info; }

int vae_model_read(vae_model *m, float *packed, int64_t packed_floats) {
  const wan_vae_table *t = &m->table;
  const model_file_id *id = &m->info.id;
  if (packed_floats < t->packed_floats) {
    sp_log_error("%s: buffer of %lld floats too small for the decoder's %lld", id->source,
                 (long long)packed_floats, (long long)t->packed_floats);
    return SP_ERR_RUNTIME;
  }
  for (int i = 0; i < t->count; i++) { /* the padding after each tensor */
    int64_t end = t->t[i].offset + t->t[i].numel;
    int64_t next = i + 1 < t->count ? t->t[i + 1].offset : t->packed_floats;
    if (next > end) memset(packed + end, 0, (size_t)(next - end) * sizeof *packed);
  }
  if (id->synthetic) {
    for (int i = 0; i < t->count; i++) synth_tensor(id->seed, &t->t[i], packed + t->t[i].offset);
    return SP_OK;
  }
  /* fp32 lands in place; bf16 is read into one staging buffer, then widened. */
  uint16_t *stage = id->dtype == KERN_DTYPE_BF16
                        ? sp_xmalloc((size_t)t->params * sizeof *stage) : NULL;
  rank_container_f32 r[WAN_VAE_MAX_TENSORS];
  const char *names[WAN_VAE_MAX_TENSORS];
  for (int i = 0; i < t->count; i++) {
    r[i] = (rank_container_f32){m->file.offset[i], m->file.crc[i], t->t[i].numel,
                                packed + t->t[i].offset};
    names[i] = t->t[i].name;
  }
  int rc = rank_table_reader_read(&m->file, id, VAE_FILE_GROUP, t->count, r, names, stage);
  free(stage);
  return rc;
}

int model_file_arch(const char *path, char *arch, size_t n) {
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
