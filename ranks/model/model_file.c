/* The staticpipe model file's reader (see model_file.h): a file opened,
 * validated and read group by group, or a synthetic model opened, whose
 * groups are generated as they are read. The presets and dataset paths
 * are model_presets.c's, the load's progress line model_progress.c's, the
 * writer model_writer.c's.
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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "container_io.h"
#include "h5_util.h"
#include "model_container.h"
#include "model_file_impl.h"
#include "log.h"
#include "synth.h"
#include "wan_weights.h"

typedef struct ds_loc {
  uint64_t offset; /* byte offset of the dataset's data in the file */
  uint32_t crc;    /* its checksum attribute */
} ds_loc;

struct rank_model {
  rank_model_info info;
  wan_layout layout[3]; /* as read_group delivers them */
  /* The block datasets in the file: layout[block] in the file's dtype, or
   * for an fp8 file the bf16 layout, whose linear weights are e4m3 in the
   * file (file_dtype), each with its scale at slot count + its place
   * (wan_block_linear_of). */
  wan_layout file_block;
  int fd;       /* -1 for synth: */
  int verify;
  ds_loc *locs; /* per group instance and tensor: embed, blocks..., head */
  rank_model_merge_fn merge; /* applied to every group read, or NULL */
  void *merge_ctx;
};

/* ---- synthetic models --------------------------------------------------- */

static int open_synth(const char *spec, rank_model *m) {
  rank_model_info *in = &m->info;
  int rc = model_file_id_synth(&in->id, spec, WAN_ARCH, KERN_DTYPE_BF16);
  if (rc == SP_OK && rank_model_preset(in->id.preset, &in->config, &in->experts) != 0)
    rc = model_file_id_bad_preset(&in->id, "", rank_model_preset_names());
  return rc;
}

/* ---- validating reader -------------------------------------------------- */

typedef struct check_ctx {
  const char *path;
  hid_t file;
} check_ctx;

/* The experts attribute (absent: one expert) and a two-expert model's
 * defaults. */
static int read_experts(check_ctx *x, rank_model_experts *out) {
  rank_model_experts e = {.count = 1};
  if (H5Aexists(x->file, "experts") <= 0) {
    *out = e;
    return SP_OK;
  }
  int64_t count = 0, steps = 0;
  if (rank_h5_attr_read_num(x->file, "experts", H5T_NATIVE_INT64, &count, 1) != 0 || count != 2) {
    sp_log_error("%s: root attribute experts is not the integer 2 (a model without it has one "
                 "expert)", x->path);
    return SP_ERR_INPUT;
  }
  e.count = 2;
  struct {
    const char *name;
    double *v;
  } d[] = {{"boundary", &e.boundary}, {"cfg_high", &e.cfg[0]}, {"cfg_low", &e.cfg[1]},
           {"shift", &e.shift}};
  for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
    if (rank_h5_attr_read_num(x->file, d[i].name, H5T_NATIVE_DOUBLE, d[i].v, 1) != 0) {
      sp_log_error("%s: root attribute %s of a two-expert model is missing or not a number",
                   x->path, d[i].name);
      return SP_ERR_INPUT;
    }
  if (rank_h5_attr_read_num(x->file, "steps", H5T_NATIVE_INT64, &steps, 1) != 0 || steps < 1 ||
      steps > 1000) {
    sp_log_error("%s: root attribute steps of a two-expert model is missing or not in 1..1000",
                 x->path);
    return SP_ERR_INPUT;
  }
  e.steps = (int)steps;
  char err[160];
  if (rank_model_experts_check(&e, err, sizeof err) != 0) {
    sp_log_error("%s: root attributes: %s", x->path, err);
    return SP_ERR_INPUT;
  }
  *out = e;
  return SP_OK;
}

/* The config attributes and the experts (the root's others are read by
 * rank_container_open_id). */
static int read_config(check_ctx *x, rank_model *m) {
  rank_model_info *in = &m->info;
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
  return read_experts(x, &in->experts);
}

/* The datasets of group g in the file (shapes; bytes in file_dtype). */
static const wan_layout *file_layout(const rank_model *m, wan_group g) {
  return g == WAN_GROUP_BLOCK ? &m->file_block : &m->layout[g];
}

/* The dtype of tensor i of group g in the file. */
static kern_dtype file_dtype(const rank_model *m, wan_group g, int i) {
  return m->info.fp8 && g == WAN_GROUP_BLOCK && wan_block_linear_of(i) >= 0 ? KERN_DTYPE_E4M3
                                                                           : m->info.id.dtype;
}

/* The name of the scale dataset of tensor name, into buf. */
static void scale_name(const char *name, char *buf, size_t n) {
  snprintf(buf, n, "%s%s", name, WAN_FP8_SCALE_SUFFIX);
}

/* One dataset against its table entry (model_container.h); an fp8 file's
 * linear weight then its scale [out] fp32 (at slot count + its place). */
static int check_dataset(check_ctx *x, rank_model *m, int e, wan_group g, int block, int i,
                         ds_loc *locs) {
  const wan_tensor *t = &file_layout(m, g)->t[i];
  const kern_dtype dt = file_dtype(m, g, i);
  char path[256], sname[96];
  rank_model_expert_path(m->info.experts.count, e, g, block, t->name, path, sizeof path);
  int rc = rank_container_check_dataset(x->file, x->path, path, dt, t->ndim, t->shape,
                                        (size_t)t->numel * kern_dtype_size(dt), &locs[i].offset,
                                        &locs[i].crc);
  if (rc != SP_OK || dt != KERN_DTYPE_E4M3) return rc;
  scale_name(t->name, sname, sizeof sname);
  rank_model_expert_path(m->info.experts.count, e, g, block, sname, path, sizeof path);
  ds_loc *sl = &locs[file_layout(m, g)->count + wan_block_linear_of(i)];
  return rank_container_check_dataset(x->file, x->path, path, KERN_DTYPE_F32, 1, t->shape,
                                      (size_t)t->shape[0] * sizeof(float), &sl->offset, &sl->crc);
}

/* The group holds exactly the layout's tensors (and an fp8 file's block
 * its scales). */
static int check_no_extra(check_ctx *x, const rank_model *m, const char *group, wan_group g) {
  const wan_layout *l = file_layout(m, g);
  const char *names[WAN_MAX_TENSORS];
  char scales[WAN_BLOCK_LINEAR_COUNT][96];
  int n = 0;
  for (int i = 0; i < l->count; i++) {
    names[n++] = l->t[i].name;
    if (file_dtype(m, g, i) != KERN_DTYPE_E4M3) continue;
    char *sn = scales[wan_block_linear_of(i)];
    scale_name(l->t[i].name, sn, sizeof scales[0]);
    names[n++] = sn;
  }
  return rank_container_check_members(x->file, x->path, group, names, n);
}

/* Every group and dataset of expert e (under pre: "" or "/experts/high"). */
static int check_expert(check_ctx *x, rank_model *m, int e, const char *pre, uint32_t *acc) {
  const char *path = x->path;
  const wan_config *c = &m->info.config;
  char gname[96];
  int rc;
  snprintf(gname, sizeof gname, "%s/embed", pre);
  if ((rc = check_no_extra(x, m, gname, WAN_GROUP_EMBED)) != SP_OK) return rc;
  snprintf(gname, sizeof gname, "%s/head", pre);
  if ((rc = check_no_extra(x, m, gname, WAN_GROUP_HEAD)) != SP_OK) return rc;
  snprintf(gname, sizeof gname, "%s/blocks", pre);
  hid_t blocks = H5Gopen2(x->file, gname, H5P_DEFAULT);
  H5G_info_t bi;
  if (blocks < 0 || H5Gget_info(blocks, &bi) < 0) {
    sp_log_error("%s: group %s is missing", path, gname);
    if (blocks >= 0) H5Gclose(blocks);
    return SP_ERR_INPUT;
  }
  H5Gclose(blocks);
  if (bi.nlinks != (hsize_t)c->layers) {
    sp_log_error("%s: %s has %llu groups, the config says layers = %lld", path, gname,
                 (unsigned long long)bi.nlinks, (long long)c->layers);
    return SP_ERR_INPUT;
  }
  for (int b = 0; b < (int)c->layers; b++) {
    snprintf(gname, sizeof gname, "%s/blocks/%04d", pre, b);
    if ((rc = check_no_extra(x, m, gname, WAN_GROUP_BLOCK)) != SP_OK) return rc;
  }
  for (int g = 0; g < 3; g++) {
    int nb = g == WAN_GROUP_BLOCK ? (int)c->layers : 1;
    for (int b = 0; b < nb; b++) {
      const wan_layout *l = file_layout(m, (wan_group)g);
      ds_loc *locs = m->locs + rank_model_slot(c, e, (wan_group)g, b, 0);
      for (int i = 0; i < l->count; i++) {
        if ((rc = check_dataset(x, m, e, (wan_group)g, b, i, locs)) != SP_OK) return rc;
        *acc = rank_container_checksum_add(*acc, locs[i].crc);
        if (file_dtype(m, (wan_group)g, i) == KERN_DTYPE_E4M3) /* its scale, right after it */
          *acc = rank_container_checksum_add(*acc, locs[l->count + wan_block_linear_of(i)].crc);
      }
    }
  }
  return SP_OK;
}

static int open_file(const char *path, rank_model *m) {
  check_ctx x = {path, -1};
  int rc = rank_container_open_id(path, WAN_ARCH, &m->info.id, &m->info.fp8, &x.file);
  if (rc != SP_OK) return rc;
  if ((rc = read_config(&x, m)) != SP_OK) goto done;
  if ((rc = rank_container_check_links(x.file, path)) != SP_OK) goto done;
  const wan_config *c = &m->info.config;
  const int ne = m->info.experts.count;
  /* The root holds the one expert's groups, or /experts with two. */
  const char *root_names[] = {"blocks", "embed", "head"};
  if (ne == 1 &&
      (rc = rank_container_check_members(x.file, path, "/", root_names, 3)) != SP_OK)
    goto done;
  for (int g = 0; g < 3; g++) wan_layout_make(c, (wan_group)g, m->info.id.dtype, &m->layout[g]);
  m->file_block = m->layout[WAN_GROUP_BLOCK];
  if (m->info.fp8) wan_layout_make(c, WAN_GROUP_BLOCK, KERN_DTYPE_F32, &m->layout[WAN_GROUP_BLOCK]);
  m->locs = sp_xcalloc((size_t)ne * (size_t)rank_model_instances(c) * WAN_MAX_TENSORS,
                       sizeof *m->locs);
  uint32_t acc = 0;
  if (ne == 1) {
    rc = check_expert(&x, m, 0, "", &acc);
  } else {
    const char *root[] = {"experts"}, *names[] = {"high", "low"};
    if ((rc = rank_container_check_members(x.file, path, "/", root, 1)) != SP_OK) goto done;
    if ((rc = rank_container_check_members(x.file, path, "/experts", names, 2)) != SP_OK)
      goto done;
    for (int e = 0; e < ne && rc == SP_OK; e++) {
      char pre[32];
      snprintf(pre, sizeof pre, "/experts/%s", rank_model_expert_name(ne, e));
      rc = check_expert(&x, m, e, pre, &acc);
    }
  }
  if (rc != SP_OK) goto done;
  /* The model checksum is a function of the datasets' checksums, in the
   * writer's order (table order, experts high first, model_container.h):
   * verified against the root attribute, and the one outputs record either
   * way. */
  model_file_id *id = &m->info.id;
  if (m->verify && (rc = rank_container_checksum_check(path, id->checksum, acc)) != SP_OK)
    goto done;
  rank_container_checksum_str(acc, id->checksum, sizeof id->checksum);
done:
  return rank_container_open_end(x.file, path, rc, &m->fd);
}

int rank_model_spec_is_synth(const char *spec) { return strncmp(spec, "synth:", 6) == 0; }

int rank_model_open(const char *spec, int verify, rank_model **out) {
  rank_model *m = sp_xcalloc(1, sizeof *m);
  m->fd = -1;
  m->verify = verify;
  int rc;
  if (model_file_id_start(&m->info.id, spec)) {
    rc = open_synth(spec, m);
    if (rc == SP_OK)
      for (int g = 0; g < 3; g++)
        wan_layout_make(&m->info.config, (wan_group)g, m->info.id.dtype, &m->layout[g]);
    m->file_block = m->layout[WAN_GROUP_BLOCK];
  } else {
    rc = open_file(spec, m);
  }
  if (rc != SP_OK) {
    rank_model_close(m);
    return rc;
  }
  model_file_id_match(&m->info.id, rank_model_preset_match(&m->info.config, m->info.experts.count));
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

kern_dtype rank_model_group_dtype(const rank_model *m, wan_group g) {
  return g == WAN_GROUP_BLOCK && m->info.fp8 ? KERN_DTYPE_F32 : m->info.id.dtype;
}

uint64_t rank_model_block_file_bytes(const rank_model *m) {
  return m->info.fp8 ? wan_block_fp8_bytes(&m->info.config) : m->file_block.data_bytes;
}

const char *rank_model_dtype_name(const rank_model_info *in) {
  return in->fp8 ? "fp8" : kern_dtype_name(in->id.dtype);
}

/* The name and the bytes in the file of the dataset at slot k of group g
 * (an fp8 file's scales after the tensors). */
static void slot_dataset(const rank_model *m, wan_group g, int k, char *name, size_t n,
                         size_t *bytes) {
  const wan_layout *fl = file_layout(m, g);
  if (k < fl->count) {
    snprintf(name, n, "%s", fl->t[k].name);
    *bytes = (size_t)fl->t[k].numel * kern_dtype_size(file_dtype(m, g, k));
    return;
  }
  int i = 0;
  while (wan_block_linear_of(i) != k - fl->count) i++;
  scale_name(fl->t[i].name, name, n);
  *bytes = (size_t)fl->t[i].shape[0] * sizeof(float);
}

/* Reads the first n datasets of a group instance (the slots of
 * slot_dataset) to dst[k], each checked against its checksum when
 * verifying. */
static int read_n(rank_model *m, int e, wan_group g, int block, int n, void *const *dst,
                  uint64_t *bytes_read) {
  const ds_loc *locs = m->locs + rank_model_slot(&m->info.config, e, g, block, 0);
  rank_container_read r[WAN_MAX_TENSORS];
  char name[96];
  for (int k = 0; k < n; k++) {
    r[k] = (rank_container_read){locs[k].offset, 0, dst[k], locs[k].crc};
    slot_dataset(m, g, k, name, sizeof name, &r[k].bytes);
  }
  int err_no = 0;
  uint32_t got = 0;
  int bad = rank_container_pread(m->fd, n, r, m->verify, &err_no, &got);
  if (bad >= 0) {
    char path[256];
    size_t bytes;
    slot_dataset(m, g, bad, name, sizeof name, &bytes);
    rank_model_expert_path(m->info.experts.count, e, g, block, name, path, sizeof path);
    rank_container_report_read(m->info.id.source, path, locs[bad].crc, err_no, got);
    return SP_ERR_INPUT;
  }
  if (bytes_read)
    for (int i = 0; i < n; i++) *bytes_read += r[i].bytes;
  return SP_OK;
}

/* A group in the file's dtype, straight into its packed layout. */
static int read_datasets(rank_model *m, int e, wan_group g, int block, void *dst,
                         uint64_t *bytes_read) {
  const wan_layout *l = &m->layout[g];
  void *at[WAN_MAX_TENSORS];
  for (int i = 0; i < l->count; i++) at[i] = (char *)dst + l->t[i].offset;
  return read_n(m, e, g, block, l->count, at, bytes_read);
}

/* An fp8 file's scales of one linear weight: finite and positive. */
static int check_scales(const rank_model *m, int e, int block, const wan_tensor *t,
                        const float *scale) {
  const int64_t o = wan_fp8_bad_scale(scale, t->shape[0]);
  if (o >= 0) {
    char name[96], path[256];
    scale_name(t->name, name, sizeof name);
    rank_model_expert_path(m->info.experts.count, e, WAN_GROUP_BLOCK, block, name, path,
                           sizeof path);
    sp_log_error("%s: %s: the scale of output channel %lld is %g: each scale must be finite and "
                 "positive", m->info.id.source, path, (long long)o, (double)scale[o]);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* An fp8 file's block: its datasets into a buffer of the file's bytes
 * (bf16 and e4m3 at the bf16 layout's offsets, the scales after), then
 * into dst in fp32 (m->layout[block]): bf16 widened, each linear weight
 * dequantised with its scales (MODEL.md "fp8 weights"). */
static int read_fp8_block(rank_model *m, int e, int block, float *dst, uint64_t *bytes_read) {
  const wan_layout *fl = &m->file_block, *l = &m->layout[WAN_GROUP_BLOCK];
  const wan_config *c = &m->info.config;
  const int64_t wide = c->ffn_dim > c->dim ? c->ffn_dim : c->dim;
  char *raw = sp_xmalloc(fl->packed_bytes);
  float *scales = sp_xmalloc((size_t)(WAN_BLOCK_LINEAR_COUNT * wide) * sizeof(float));
  void *at[WAN_MAX_TENSORS];
  for (int i = 0; i < fl->count; i++) at[i] = raw + fl->t[i].offset;
  for (int j = 0; j < WAN_BLOCK_LINEAR_COUNT; j++) at[fl->count + j] = scales + j * wide;
  int rc = read_n(m, e, WAN_GROUP_BLOCK, block, fl->count + WAN_BLOCK_LINEAR_COUNT, at,
                  bytes_read);
  for (int i = 0; rc == SP_OK && i < fl->count; i++) {
    const wan_tensor *t = &fl->t[i];
    float *out = (float *)((char *)dst + l->t[i].offset);
    const int lin = wan_block_linear_of(i);
    if (lin < 0) {
      kern_bf16_to_f32_n((const uint16_t *)at[i], out, (size_t)t->numel);
    } else if ((rc = check_scales(m, e, block, t, scales + lin * wide)) == SP_OK) {
      kern_fp8_dequantize_rows((const uint8_t *)at[i], scales + lin * wide, t->shape[0],
                               t->numel / t->shape[0], out);
    }
  }
  free(scales);
  free(raw);
  return rc;
}

int rank_model_read_group(rank_model *m, wan_group g, int block, void *dst, size_t dst_bytes,
                          uint64_t *bytes_read) {
  return rank_model_read_expert_group(m, 0, g, block, dst, dst_bytes, bytes_read);
}

int rank_model_read_expert_group(rank_model *m, int e, wan_group g, int block, void *dst,
                                 size_t dst_bytes, uint64_t *bytes_read) {
  const wan_config *c = &m->info.config;
  const wan_layout *l = &m->layout[g];
  const int ne = m->info.experts.count;
  if (e < 0 || e >= ne) {
    sp_log_error("%s: expert %d does not exist (the model has %d)", m->info.id.source, e, ne);
    return SP_ERR_INPUT;
  }
  if (g == WAN_GROUP_BLOCK && (block < 0 || block >= c->layers)) {
    sp_log_error("%s: block %d does not exist (the model has %lld)", m->info.id.source, block,
                 (long long)c->layers);
    return SP_ERR_INPUT;
  }
  if (dst_bytes < l->packed_bytes) {
    sp_log_error("%s: buffer of %zu bytes too small for a %s group of %zu", m->info.id.source,
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
  if (m->info.id.synthetic) { /* (each tensor's generation is parallel itself) */
    const char *prefix = rank_synth_expert_prefix(ne, e);
    for (int i = 0; i < l->count; i++)
      rank_synth_tensor(c, m->info.id.seed, prefix, g, block, &l->t[i], m->info.id.dtype,
                        (char *)dst + l->t[i].offset);
    rank_model_progress_add(l->packed_bytes);
    return m->merge ? m->merge(m->merge_ctx, e, g, block, l, m->info.id.dtype, dst) : SP_OK;
  }
  const kern_dtype dt = rank_model_group_dtype(m, g);
  int rc = g == WAN_GROUP_BLOCK && m->info.fp8 ? read_fp8_block(m, e, block, dst, bytes_read)
                                               : read_datasets(m, e, g, block, dst, bytes_read);
  if (rc != SP_OK) return rc;
  rank_model_progress_add(l->packed_bytes);
  return m->merge ? m->merge(m->merge_ctx, e, g, block, l, dt, dst) : SP_OK;
}

void rank_model_set_merge(rank_model *m, rank_model_merge_fn fn, void *ctx) {
  m->merge = fn;
  m->merge_ctx = ctx;
}

int rank_model_merging(const rank_model *m) {
  return m->merge != NULL;
}

