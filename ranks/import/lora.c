/* LoRA files (see lora.h): the spec and mode parsers, key classification,
 * the check of a file against the model. The merge is lora_merge.c. */
#include "lora.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "log.h"
#include "lora_impl.h"
#include "num.h"
#include "plan.h"
#include "safetensors.h"

#define STRENGTH_MAX 1000.0
#define UNMATCHED_SHOWN 5 /* unmatched keys named in the error line */

/* ---- --lora and --lora-mode ------------------------------------------- */

/* 1 when strtod would take s whole (blanks around it allowed): a number to
 * a lenient reader. */
static int loose_number(const char *s) {
  char *end = NULL;
  strtod(s, &end);
  if (end == s) return 0;
  while (isspace((unsigned char)*end)) end++;
  return *end == '\0';
}

int rank_lora_spec_parse(const char *text, rank_lora_spec *out, char *err, size_t errlen) {
  rank_lora_spec s = {.strength = 1.0, .expert = RANK_LORA_EXPERT_ALL};
  char buf[sizeof s.path + 64];
  size_t len = strlen(text);
  if (len == 0 || len >= sizeof buf) {
    snprintf(err, errlen, "is empty or longer than %zu bytes", sizeof s.path - 1);
    return SP_ERR_INPUT;
  }
  memcpy(buf, text, len + 1);
  char *at = strrchr(buf, '@');
  if (at && (strcmp(at + 1, "high") == 0 || strcmp(at + 1, "low") == 0)) {
    s.expert = at[1] == 'h' ? RANK_LORA_EXPERT_HIGH : RANK_LORA_EXPERT_LOW;
    *at = '\0';
  }
  char *colon = strrchr(buf, ':');
  /* The strength in the one number syntax (planner/num.h); what a lenient
   * reading would take as a number ("0x10", " 1", "nan") is refused as a
   * strength rather than read as part of the file's name. */
  double v;
  if (colon && colon[1] && plan_num_real(colon + 1, -HUGE_VAL, HUGE_VAL, &v) != PLAN_OK &&
      loose_number(colon + 1)) {
    snprintf(err, errlen, "strength '%s' is not a decimal number in -%g..%g (no blanks, '+', "
             "hex, inf or nan)", colon + 1, STRENGTH_MAX, STRENGTH_MAX);
    return SP_ERR_INPUT;
  }
  if (colon && plan_num_real(colon + 1, -HUGE_VAL, HUGE_VAL, &v) == PLAN_OK) {
    if (fabs(v) > STRENGTH_MAX) {
      snprintf(err, errlen, "strength %s is not a number in -%g..%g", colon + 1, STRENGTH_MAX,
               STRENGTH_MAX);
      return SP_ERR_INPUT;
    }
    s.strength = v;
    *colon = '\0';
  }
  len = strlen(buf);
  if (len == 0 || len >= sizeof s.path) {
    snprintf(err, errlen, "names no file, or a path longer than %zu bytes", sizeof s.path - 1);
    return SP_ERR_INPUT;
  }
  memcpy(s.path, buf, len + 1);
  *out = s;
  return SP_OK;
}

static const char *expert_tag(rank_lora_expert e) {
  return e == RANK_LORA_EXPERT_HIGH ? "@high" : e == RANK_LORA_EXPERT_LOW ? "@low" : "";
}

void rank_lora_spec_format(const rank_lora_spec *s, char *buf, size_t n) {
  snprintf(buf, n, "%s:%g%s", s->path, s->strength, expert_tag(s->expert));
}

int rank_lora_mode_parse(const char *name, rank_lora_mode *out) {
  static const rank_lora_mode modes[] = {RANK_LORA_AUTO, RANK_LORA_MERGED, RANK_LORA_BYPASS};
  for (size_t i = 0; name && i < sizeof modes / sizeof modes[0]; i++)
    if (strcmp(name, rank_lora_mode_name(modes[i])) == 0) {
      *out = modes[i];
      return SP_OK;
    }
  sp_log_error("--lora-mode '%s' is unknown: use auto, merged or bypass", name ? name : "(null)");
  return SP_ERR_INPUT;
}

const char *rank_lora_mode_name(rank_lora_mode m) {
  return m == RANK_LORA_BYPASS ? "bypass" : m == RANK_LORA_MERGED ? "merged" : "auto";
}

/* ---- keys ------------------------------------------------------------- */

static const struct {
  const char *suffix;
  part p;
} suffixes[] = {
    {".lora_down.weight", PART_DOWN}, {".lora_A.weight", PART_DOWN},
    {".lora_up.weight", PART_UP},     {".lora_B.weight", PART_UP},
    {".alpha", PART_ALPHA},           {".diff_b", PART_DIFF_B},
    {".diff", PART_DIFF},
};

static const char *const prefixes[] = {"model.diffusion_model.", "diffusion_model.",
                                       "transformer.", "base_model.model."};
#define KOHYA_PREFIX "lora_unet_"

/* kohya spells "blocks.3.self_attn.q" as "blocks_3_self_attn_q": finds the
 * table tensor whose name, without leaf (".weight", ".bias" or "") and with
 * '.' turned to '_', is stem. */
static int map_kohya(const char *stem, const char *leaf, wan_group *g, int *block,
                     const char **name) {
  int b = 0;
  const char *rest = stem;
  int in_block = strncmp(stem, "blocks_", 7) == 0;
  if (in_block) {
    const char *p = stem + 7;
    int v = 0, nd = 0;
    while (*p >= '0' && *p <= '9' && nd < 5) v = v * 10 + (*p++ - '0'), nd++;
    if (nd == 0 || *p != '_' || (nd > 1 && stem[7] == '0')) return -1;
    b = v;
    rest = p + 1;
  }
  const size_t ll = strlen(leaf);
  for (int gi = 0; gi < 3; gi++) {
    if (in_block != (gi == WAN_GROUP_BLOCK)) continue;
    const wan_layout *l = rank_convert_name_layout((wan_group)gi);
    for (int i = 0; i < l->count; i++) {
      const char *nm = l->t[i].name;
      const size_t nl = strlen(nm);
      if (nl < ll || strcmp(nm + nl - ll, leaf) != 0 || nl - ll != strlen(rest)) continue;
      size_t k = 0;
      while (k < nl - ll && (nm[k] == '.' ? '_' : nm[k]) == rest[k]) k++;
      if (k != nl - ll) continue;
      *g = (wan_group)gi;
      *block = b;
      *name = nm;
      return 0;
    }
  }
  return -1;
}

/* The table tensor a LoRA key names, and which part of a term it is.
 * Returns 0, or -1 when the key is no term of any tensor of the table. */
static int classify(const char *key, wan_group *g, int *block, const char **name, part *pt) {
  size_t kl = strlen(key);
  int si = -1;
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
    size_t sl = strlen(suffixes[i].suffix);
    if (kl > sl && strcmp(key + kl - sl, suffixes[i].suffix) == 0) {
      si = (int)i;
      break;
    }
  }
  if (si < 0 || kl >= RANK_ST_MAX_NAME) return -1;
  char stem[RANK_ST_MAX_NAME + 16];
  memcpy(stem, key, kl - strlen(suffixes[si].suffix));
  stem[kl - strlen(suffixes[si].suffix)] = '\0';
  *pt = suffixes[si].p;
  /* The tensor a part changes: a weight, a bias (diff_b), or for a diff a
   * tensor with no suffix (modulation) when no weight has that stem. */
  const char *leaves[2] = {*pt == PART_DIFF_B ? ".bias" : ".weight", *pt == PART_DIFF ? "" : NULL};
  const char *s = stem;
  if (strncmp(s, KOHYA_PREFIX, strlen(KOHYA_PREFIX)) == 0) {
    s += strlen(KOHYA_PREFIX);
    for (int li = 0; li < 2 && leaves[li]; li++)
      if (map_kohya(s, leaves[li], g, block, name) == 0) return 0;
    return -1;
  }
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
    size_t pl = strlen(prefixes[i]);
    if (strncmp(s, prefixes[i], pl) == 0) {
      s += pl;
      break;
    }
  }
  for (int li = 0; li < 2 && leaves[li]; li++) {
    char full[RANK_ST_MAX_NAME + 32];
    snprintf(full, sizeof full, "%s%s", s, leaves[li]);
    if (rank_convert_map_key(RANK_CONVERT_OFFICIAL, full, g, block, name) == 0 ||
        rank_convert_map_key(RANK_CONVERT_DIFFUSERS, full, g, block, name) == 0)
      return 0;
  }
  return -1;
}

/* ---- one file against the model -------------------------------------- */

static void shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
  size_t o = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && o < n; i++)
    o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (o < n) snprintf(buf + o, n - o, "]");
}

/* Dimensions of a shape other than 1, in order. */
static int squeeze(int ndim, const int64_t *shape, int64_t *out) {
  int k = 0;
  for (int i = 0; i < ndim; i++)
    if (shape[i] != 1) out[k++] = shape[i];
  return k;
}

static int same_squeezed(int na, const int64_t *a, int nb, const int64_t *b) {
  int64_t sa[RANK_ST_MAX_NDIM], sb[RANK_ST_MAX_NDIM];
  int ka = squeeze(na, a, sa), kb = squeeze(nb, b, sb);
  return ka == kb && memcmp(sa, sb, (size_t)ka * sizeof *sa) == 0;
}

/* The name of the preset with width dim, or NULL. */
static const char *preset_of_dim(int64_t dim) {
  static const char *const presets[] = {"wan2.1-tiny", "wan2.1-1.3b", "wan2.1-14b"};
  for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
    wan_config c;
    if (wan_preset(presets[i], &c) == 0 && c.dim == dim) return presets[i];
  }
  return NULL;
}

/* The shape checks of one entry; on failure, the reason in why. */
static int check_entry(const rank_lora *L, const entry *e, char *why, size_t n, int *foreign) {
  const wan_tensor *t = &L->layout[e->g].t[e->tensor];
  char key[256], sh[128], want[128];
  lora_tensor_key(e->g, e->block, t->name, key, sizeof key);
  shape_str(t->ndim, t->shape, want, sizeof want);
  for (int p = 0; p < PART_COUNT; p++) {
    const rank_st_tensor *x = e->p[p];
    if (x && x->dtype != RANK_ST_F32 && x->dtype != RANK_ST_F16 && x->dtype != RANK_ST_BF16) {
      snprintf(why, n, "'%s': dtype %s is not supported (F32, F16, BF16)", x->name,
               rank_st_dtype_name(x->dtype));
      return -1;
    }
  }
  const rank_st_tensor *down = e->p[PART_DOWN], *up = e->p[PART_UP];
  if (!down != !up) {
    snprintf(why, n, "'%s' has no %s partner (lora_down/lora_A and lora_up/lora_B come in pairs)",
             (down ? down : up)->name, down ? "up" : "down");
    return -1;
  }
  if (e->p[PART_ALPHA] && !down) {
    snprintf(why, n, "'%s' is an alpha without a lora_down/lora_up pair", e->p[PART_ALPHA]->name);
    return -1;
  }
  if (e->p[PART_ALPHA] && e->p[PART_ALPHA]->numel != 1) {
    shape_str(e->p[PART_ALPHA]->ndim, e->p[PART_ALPHA]->shape, sh, sizeof sh);
    snprintf(why, n, "'%s': alpha has shape %s, expected one value", e->p[PART_ALPHA]->name, sh);
    return -1;
  }
  if (down) {
    if (down->ndim < 2 || up->ndim < 2) {
      snprintf(why, n, "'%s': lora_down and lora_up need at least 2 dimensions", down->name);
      return -1;
    }
    const int64_t r = down->shape[0];
    if (r < 1 || r > RANK_LORA_MAX_RANK || up->shape[1] != r) {
      snprintf(why, n, "rank mismatch: '%s' has rank %lld, '%s' has rank %lld", down->name,
               (long long)r, up->name, (long long)up->shape[1]);
      return -1;
    }
    int up_ok = 1;
    for (int d = 2; d < up->ndim; d++) up_ok &= up->shape[d] == 1;
    /* A is [r, in...]: its trailing dims equal the weight's, or flat. */
    int in_ok = t->ndim >= 2 &&
                ((down->ndim == 2 && (uint64_t)down->shape[1] * t->shape[0] == (uint64_t)t->numel) ||
                 same_squeezed(down->ndim - 1, down->shape + 1, t->ndim - 1, t->shape + 1));
    if (!up_ok || !in_ok || up->shape[0] != t->shape[0]) {
      char dsh[128];
      shape_str(down->ndim, down->shape, dsh, sizeof dsh);
      shape_str(up->ndim, up->shape, sh, sizeof sh);
      snprintf(why, n, "'%s' %s and '%s' %s do not fit %s %s", down->name, dsh, up->name, sh, key,
               want);
      *foreign = 1;
      return -1;
    }
  }
  for (int p = PART_DIFF; p <= PART_DIFF_B; p++) {
    const rank_st_tensor *x = e->p[p];
    if (x && !same_squeezed(x->ndim, x->shape, t->ndim, t->shape)) {
      shape_str(x->ndim, x->shape, sh, sizeof sh);
      snprintf(why, n, "'%s' %s does not fit %s %s", x->name, sh, key, want);
      *foreign = 1;
      return -1;
    }
  }
  return 0;
}

/* The width of the blocks a LoRA was made for: the input width of a pair
 * on an attention projection (dim x dim), or -1 when it has none. */
static int64_t lora_dim(const rank_lora *L, const lora_file *lf) {
  for (int i = 0; i < lf->ne; i++) {
    const entry *e = &lf->e[i];
    const rank_st_tensor *d = e->p[PART_DOWN];
    const char *nm = L->layout[e->g].t[e->tensor].name;
    if (d && d->ndim == 2 && e->g == WAN_GROUP_BLOCK &&
        (strncmp(nm, "self_attn.", 10) == 0 || strncmp(nm, "cross_attn.", 11) == 0))
      return d->shape[1];
  }
  return -1;
}

/* Maps every key of lf->f, builds its entries and checks them. One error
 * line on failure. */
static int check_file(rank_lora *L, lora_file *lf) {
  const rank_st_header *h = &lf->f->h;
  const char *path = lf->f->path;
  const wan_config *c = &L->config;
  int unmatched = 0, beyond = -1;
  char shown[UNMATCHED_SHOWN * 96 + 8] = "";
  lf->e = sp_xcalloc((size_t)h->count + 1, sizeof *lf->e);
  for (int i = 0; i < h->count; i++) {
    const rank_st_tensor *t = &h->t[i];
    wan_group g;
    int block;
    const char *name;
    part pt;
    if (classify(t->name, &g, &block, &name, &pt) != 0) {
      if (unmatched++ < UNMATCHED_SHOWN)
        snprintf(shown + strlen(shown), sizeof shown - strlen(shown), "%s'%.80s'",
                 unmatched > 1 ? ", " : "", t->name);
      continue;
    }
    if (g == WAN_GROUP_BLOCK && block >= c->layers) {
      if (block > beyond) beyond = block;
      continue;
    }
    const int ti = wan_layout_find(&L->layout[g], name);
    entry *e = NULL;
    for (int k = 0; k < lf->ne && !e; k++)
      if (lf->e[k].g == g && lf->e[k].block == block && lf->e[k].tensor == ti) e = &lf->e[k];
    if (!e) {
      e = &lf->e[lf->ne++];
      e->g = g;
      e->block = block;
      e->tensor = ti;
    }
    if (e->p[pt]) {
      sp_log_error("%s: '%s' and '%s' are the same term of one tensor", path, e->p[pt]->name,
                   t->name);
      return SP_ERR_INPUT;
    }
    e->p[pt] = t;
  }
  if (unmatched) {
    const int any = unmatched < h->count;
    sp_log_error("%s: %d of %d keys match no weight of this %s model (first: %s)%s", path,
                 unmatched, h->count, WAN_ARCH, shown,
                 any ? "" : ": a LoRA for another model, or not a LoRA");
    return SP_ERR_INPUT;
  }
  if (beyond >= 0) {
    sp_log_error("%s: names block %d, but this model has %lld blocks: a LoRA made for another "
                 "architecture", path, beyond, (long long)c->layers);
    return SP_ERR_INPUT;
  }
  if (lf->ne == 0) {
    sp_log_error("%s: holds no tensor: an empty LoRA", path);
    return SP_ERR_INPUT;
  }
  qsort(lf->e, (size_t)lf->ne, sizeof *lf->e, lora_entry_cmp);
  lf->rank_min = INT64_MAX;
  lf->rank_max = 0;
  for (int i = 0; i < lf->ne; i++) {
    entry *e = &lf->e[i];
    char why[1024];
    int foreign = 0;
    if (check_entry(L, e, why, sizeof why, &foreign) != 0) {
      const int64_t d = lora_dim(L, lf);
      if (foreign && d > 0 && d != c->dim) {
        const char *mine = preset_of_dim(c->dim), *theirs = preset_of_dim(d);
        sp_log_error("%s: a LoRA made for another architecture: its blocks are %lld wide%s%s%s, "
                     "this model's %lld%s%s%s (%s)", path, (long long)d, theirs ? " (" : "",
                     theirs ? theirs : "", theirs ? ")" : "", (long long)c->dim,
                     mine ? " (" : "", mine ? mine : "", mine ? ")" : "", why);
      } else {
        sp_log_error("%s: %s", path, why);
      }
      return SP_ERR_INPUT;
    }
    if (e->p[PART_DOWN]) {
      e->rank = e->p[PART_DOWN]->shape[0];
      lf->pairs++;
      if (e->rank < lf->rank_min) lf->rank_min = e->rank;
      if (e->rank > lf->rank_max) lf->rank_max = e->rank;
    }
    lf->diffs += (e->p[PART_DIFF] != NULL) + (e->p[PART_DIFF_B] != NULL);
  }
  return SP_OK;
}

int rank_lora_open(const rank_lora_spec *specs, int n, const rank_model_info *mi,
                   rank_lora **out) {
  if (n < 1 || n > RANK_LORA_MAX) {
    sp_log_error("--lora given %d times: at most %d LoRAs", n, RANK_LORA_MAX);
    return SP_ERR_INPUT;
  }
  rank_lora *L = sp_xcalloc(1, sizeof *L);
  L->config = mi->config;
  L->experts = mi->experts.count > 1 ? mi->experts.count : 1;
  for (int g = 0; g < 3; g++)
    wan_layout_make(&L->config, (wan_group)g, mi->id.dtype, &L->layout[g]);
  L->files = sp_xcalloc((size_t)n, sizeof *L->files);
  int rc = SP_OK;
  for (int i = 0; i < n && rc == SP_OK; i++) {
    lora_file *lf = &L->files[i];
    lf->spec = specs[i];
    L->n = i + 1;
    if (specs[i].expert != RANK_LORA_EXPERT_ALL && mi->experts.count < 2) {
      sp_log_error("--lora %s%s: this %s model has one expert; @high and @low choose one of the "
                   "two experts of a two-expert model (Wan 2.2 A14B)", specs[i].path,
                   expert_tag(specs[i].expert), mi->id.arch);
      rc = SP_ERR_INPUT;
      break;
    }
    rc = rank_st_open(specs[i].path, &lf->f);
    if (rc == SP_OK) rc = check_file(L, lf);
  }
  if (rc != SP_OK) {
    rank_lora_close(L);
    return rc;
  }
  *out = L;
  return SP_OK;
}

void rank_lora_close(rank_lora *L) {
  if (!L) return;
  for (int i = 0; i < L->n; i++) {
    free(L->files[i].e);
    rank_st_close(L->files[i].f);
  }
  free(L->files);
  free(L);
}

void rank_lora_describe(const rank_lora *L, char *buf, size_t n) {
  size_t o = 0;
  buf[0] = '\0';
  for (int i = 0; i < L->n && o < n; i++) {
    const lora_file *lf = &L->files[i];
    char r[64] = "";
    if (lf->pairs)
      snprintf(r, sizeof r, lf->rank_min == lf->rank_max ? ", rank %lld" : ", ranks %lld..%lld",
               (long long)lf->rank_min, (long long)lf->rank_max);
    o += (size_t)snprintf(buf + o, n - o, "%s%s: strength %g, %d pairs%s, %d diffs", i ? "; " : "",
                          lf->spec.path, lf->spec.strength, lf->pairs, r, lf->diffs);
  }
}
