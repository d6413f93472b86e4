/* The converter pipeline (see conv.h): a checkpoint opened, its layout
 * told from its keys, every key mapped, the config inferred, every tensor
 * cross-checked against the schema's table, then written through the
 * model-file layer's writer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"
#include "log.h"

/* ---- the job ----------------------------------------------------------------- */

const conv_src *conv_job_find(const conv_job *j, const char *name) {
  for (int i = 0; i < j->ck.n; i++)
    if (strcmp(j->src[i].name, name) == 0) return &j->src[i];
  return NULL;
}

void conv_job_key(const conv_job *j, const char *name, char *out, size_t n) {
  conv_unmap(j->layout, j->param, name, out, n);
}

int64_t conv_job_count(const conv_job *j, const char *prefix) {
  int64_t most = 0, v;
  for (int i = 0; i < j->ck.n; i++)
    if (conv_index_after(j->src[i].name, prefix, &v) && v + 1 > most) most = v + 1;
  return most;
}

void conv_job_free(conv_job *j) {
  free(j->slot);
  free(j->t);
  free(j->config);
  free(j->src);
  conv_ckpt_close(&j->ck);
  memset(j, 0, sizeof *j);
}

/* ---- layout and keys --------------------------------------------------------------- */

/* The layout that takes the most keys (a tie to the earlier); the
 * network's default when none takes any. */
static const conv_layout *detect(const conv_job *j) {
  const conv_net *net = j->net;
  int best = -1;
  long most = 0;
  for (int l = 0; net->layouts[l]; l++) {
    long n = 0;
    for (int i = 0; i < j->ck.n; i++) n += conv_takes(net->layouts[l], j->ck.t[i]->key);
    if (n > most) most = n, best = l;
  }
  return net->layouts[best >= 0 ? best : net->default_layout];
}

/* 1 when key is an fp8 format's helper (ComfyUI's KEY.scale_weight,
 * KEY.scale_input, the scaled_fp8 marker): no model tensor. */
static int fp8_helper(const char *key) {
  static const char *const tails[] = {".scale_weight", ".scale_input", ".scaled_fp8"};
  for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
    size_t n = strlen(key), k = strlen(tails[i]);
    if (n >= k && strcmp(key + n - k, tails[i]) == 0) return 1;
  }
  return strcmp(key, "scaled_fp8") == 0;
}

/* Every key mapped or set aside; a tied copy skipped when what it copies
 * is there. Returns how many map. */
static int map_keys(conv_job *j) {
  int mapped = 0;
  int *tied = sp_xcalloc((size_t)j->ck.n + 1, sizeof *tied);
  for (int i = 0; i < j->ck.n; i++) {
    conv_src *s = &j->src[i];
    s->t = j->ck.t[i];
    s->scale = 1.0f;
    if (fp8_helper(s->t->key)) {
      s->skip = 1;
      j->helpers++;
    } else if (conv_skips(j->layout, s->t->key)) {
      s->skip = 1;
      j->skipped++;
    } else if (conv_map(j->layout, j->param, s->t->key, s->name, sizeof s->name, &tied[i]) != 0 ||
               (j->net->known && !j->net->known(s->name))) {
      s->name[0] = 0;
    }
  }
  for (int i = 0; i < j->ck.n; i++) {
    if (!j->src[i].name[0]) continue;
    for (int k = 0; tied[i] && k < j->ck.n; k++)
      if (k != i && !tied[k] && strcmp(j->src[k].name, j->src[i].name) == 0) {
        j->src[i].name[0] = 0;
        j->src[i].skip = 1;
        j->skipped++;
        break;
      }
    mapped += j->src[i].name[0] != 0;
  }
  free(tied);
  return mapped;
}

/* ---- the cross-check ---------------------------------------------------------------- */

static int dtype_ok(const conv_net *net, conv_dtype d) {
  for (int i = 0; i < net->ndtypes; i++)
    if (net->dtypes[i] == d) return 1;
  return 0;
}

static void shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
  size_t o = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && o < n; i++)
    o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (o < n) snprintf(buf + o, n - o, "]");
}

/* Source i against table entry ti: claimed once, its shape and dtype. */
static void check_one(conv_job *j, int i, int ti) {
  const conv_src *s = &j->src[i];
  const char *path = conv_path(&j->ck, s->t);
  if (j->slot[ti] >= 0) {
    const conv_tensor *o = j->src[j->slot[ti]].t;
    conv_problem(&j->p, "%s: tensor '%s': duplicate of '%s' in %s", path, s->t->key, o->key,
                 conv_path(&j->ck, o));
    return;
  }
  j->slot[ti] = i;
  const net_tensor *t = &j->t[ti];
  int same = s->t->ndim == t->ndim;
  for (int d = 0; same && d < t->ndim; d++) same = s->t->shape[d] == t->shape[d];
  if (!same) {
    char have[128], want[128];
    shape_str(s->t->ndim, s->t->shape, have, sizeof have);
    shape_str(t->ndim, t->shape, want, sizeof want);
    conv_problem(&j->p, "%s: tensor '%s': shape %s, the inferred config needs %s", path, s->t->key,
                 have, want);
  }
  if (!dtype_ok(j->net, s->t->dtype)) {
    char names[128] = "";
    for (int k = 0; k < j->net->ndtypes; k++)
      snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? ", " : "",
               conv_dtype_name(j->net->dtypes[k]));
    conv_problem(&j->p, "%s: tensor '%s': dtype %s is not supported (%s)", path, s->t->key,
                 s->t->dtype_name, names);
  }
}

/* 1 when group path lies in a group counted by a config attribute (a block). */
static int counted(const net_group *g, int ng, const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return 0;
  for (int k = 0; k < ng; k++)
    if (g[k].count_attr && strlen(g[k].path) == (size_t)(slash - path) &&
        strncmp(g[k].path, path, (size_t)(slash - path)) == 0)
      return 1;
  return 0;
}

/* A counted group (a block) none of whose tensors is there: one problem
 * for the gap, its tensors marked in gap. */
static void group_gaps(conv_job *j, uint8_t *gap) {
  const net_schema *s = j->net->schema;
  const int ng = s->groups(j->config, NULL);
  net_group *g = sp_xcalloc((size_t)ng + 1, sizeof *g);
  s->groups(j->config, g);
  for (int ti = 0; ti < j->nt;) {
    int end = ti, present = 0;
    while (end < j->nt && strcmp(j->t[end].group, j->t[ti].group) == 0)
      present += j->slot[end++] >= 0;
    if (!present && counted(g, ng, j->t[ti].group)) {
      const char *leaf = strrchr(j->t[ti].group, '/');
      conv_problem(&j->p, "%s: missing block %d: none of its %d tensors is in the checkpoint (a "
                          "gap in the block numbering)", j->ck.label, atoi(leaf + 1), end - ti);
      memset(gap + ti, 1, (size_t)(end - ti));
    }
    ti = end;
  }
  free(g);
}

/* Every mapped source against the table of the inferred config, then every
 * table entry that none fills. */
static void check_tensors(conv_job *j) {
  const net_schema *s = j->net->schema;
  j->nt = s->tensors(j->config, NULL);
  j->t = sp_xcalloc((size_t)j->nt + 1, sizeof *j->t);
  s->tensors(j->config, j->t);
  j->slot = sp_xmalloc(((size_t)j->nt + 1) * sizeof *j->slot);
  for (int i = 0; i < j->nt; i++) j->slot[i] = -1;
  for (int i = 0; i < j->ck.n; i++) {
    if (!j->src[i].name[0]) continue;
    int ti = 0;
    while (ti < j->nt && strcmp(j->t[ti].key, j->src[i].name) != 0) ti++;
    if (ti < j->nt) {
      check_one(j, i, ti);
      continue;
    }
    conv_problem(&j->p, "%s: tensor '%s': not a tensor of %s of the inferred config (%s keys)",
                 conv_path(&j->ck, j->src[i].t), j->src[i].t->key, j->net->what, j->layout->name);
  }
  uint8_t *gap = sp_xcalloc((size_t)j->nt + 1, 1);
  group_gaps(j, gap);
  char key[1200];
  for (int ti = 0; ti < j->nt; ti++) {
    if (j->slot[ti] >= 0 || gap[ti]) continue;
    conv_job_key(j, j->t[ti].key, key, sizeof key);
    conv_problem(&j->p, "%s: missing tensor '%s'", j->ck.label, key);
  }
  free(gap);
}

/* ---- prepare ------------------------------------------------------------------------- */

int conv_prepare(const conv_net *net, int n, char *const *args, const char *out_path,
                 conv_job *j) {
  memset(j, 0, sizeof *j);
  j->net = net;
  int rc = conv_ckpt_open(n, args, &j->ck, &j->p);
  if (rc != SP_OK) return rc;
  j->src = sp_xcalloc((size_t)j->ck.n + 1, sizeof *j->src);
  for (int i = 0; i < j->ck.n; i++) j->src[i].t = j->ck.t[i];
  if (net->screen && (rc = net->screen(j)) != SP_OK) return rc;
  j->layout = detect(j);
  if (net->params) net->params(j);
  if (map_keys(j) == 0) {
    sp_log_error("%s: no tensor of %s among its %d tensors (a foreign architecture?)", j->ck.label,
                 net->what, j->ck.n);
    return SP_ERR_INPUT;
  }
  sp_log_info("convert: %d file(s), %d tensors, %s with %s keys", j->ck.nf, j->ck.n,
              net->short_what, j->layout->name);
  if (j->skipped)
    sp_log_info("convert: %d %s skipped", j->skipped, net->skip_what);
  for (int i = 0; i < j->ck.n; i++)
    if (!j->src[i].name[0] && !j->src[i].skip)
      conv_problem(&j->p, "%s: tensor '%s': not a tensor of %s (%s keys)",
                   conv_path(&j->ck, j->src[i].t), j->src[i].t->key, net->what, j->layout->name);
  j->config = sp_xcalloc(1, net->schema->config_size);
  if (net->infer(j) == 0) check_tensors(j);
  conv_scales(j);
  return conv_problems_end(&j->p, out_path);
}

/* ---- write ----------------------------------------------------------------------------- */

/* The files' metadata as root attributes "meta.KEY" (the writer adds the
 * namespace); keys HDF5 or a terminal would mangle are skipped. */
static int write_metadata(mfile_writer *w, const conv_ckpt *ck) {
  for (int s = 0; s < ck->nf; s++) {
    for (int i = 0; i < ck->f[s].nmeta; i++) {
      const char *k = ck->f[s].meta_key[i], *v = ck->f[s].meta_val[i];
      int ok = *k && strlen(k) <= 200 && strlen(v) <= 60000 && k[0] != '.';
      for (const char *c = k; ok && *c; c++) ok = *c > 0x20 && *c < 0x7f && *c != '/';
      if (!ok) {
        sp_log_warn("%s: __metadata__ key '%.60s...' skipped (printable ASCII without '/', at "
                    "most 200 bytes, value at most 60000)", ck->f[s].path, k);
        continue;
      }
      int rc = mfile_writer_meta(w, k, v);
      if (rc != SP_OK) return rc;
    }
  }
  return SP_OK;
}

int conv_write(const conv_net *net, const conv_job *jobs, int njobs, const conv_output *o) {
  mfile_writer *w = NULL;
  conv_progress pr = {o->progress, 0, 0, 0, 0};
  for (int e = 0; e < njobs; e++)
    for (int ti = 0; ti < jobs[e].nt; ti++) {
      pr.total += jobs[e].src[jobs[e].slot[ti]].t->bytes;
    }
  conv_progress_tick(&pr, 0);
  int rc = mfile_writer_open(o->path, net->schema, o->config, o->root, o->preset, o->hooks, &w);
  if (rc == SP_OK && o->quant != KERN_DTYPE_COUNT && (rc = mfile_writer_set_quant(w, o->quant)))
    mfile_writer_abort(w);
  if (rc != SP_OK) return rc;
  for (int e = 0, at = 0; e < njobs && rc == SP_OK; at += jobs[e].nt, e++) {
    const conv_job *j = &jobs[e];
    if (net->copy_metadata) rc = write_metadata(w, &j->ck);
    for (int ti = 0; ti < j->nt && rc == SP_OK; ti++)
      rc = conv_copy(w, at + ti, &j->ck, &j->src[j->slot[ti]], &pr);
  }
  if (rc != SP_OK) {
    mfile_writer_abort(w);
    return rc;
  }
  rc = mfile_writer_commit(w);
  if (rc == SP_OK) conv_progress_tick(&pr, 1);
  return rc;
}
