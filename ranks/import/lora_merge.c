/* The merge of LoRA terms into a group as the model file reader reads it
 * (lora.h: rank_lora_merge_group; MODEL.md "LoRA"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "lora_impl.h"

int lora_read_f32(const lora_file *lf, const rank_st_tensor *t, float **out) {
  const size_t n = (size_t)t->numel, esz = rank_st_dtype_size(t->dtype);
  unsigned char *raw = sp_xmalloc(n * esz + 1);
  int rc = rank_st_read(lf->f, t, 0, raw, n * esz);
  if (rc != SP_OK) {
    free(raw);
    return rc;
  }
  float *f = sp_xmalloc(n * sizeof *f + 1);
  size_t bad = n;
  for (size_t i = 0; i < n; i++) {
    uint16_t h;
    if (t->dtype == RANK_ST_F32) {
      memcpy(&f[i], raw + 4 * i, 4);
    } else {
      memcpy(&h, raw + 2 * i, 2);
      f[i] = t->dtype == RANK_ST_F16 ? kern_f16_to_f32(h) : kern_bf16_to_f32(h);
    }
    if (bad == n && !isfinite(f[i])) bad = i;
  }
  free(raw);
  if (bad < n) {
    sp_log_error("%s: '%s': value %zu is %s: a damaged LoRA", lf->f->path, t->name, bad,
                 isnan(f[bad]) ? "NaN" : "infinite");
    free(f);
    return SP_ERR_INPUT;
  }
  *out = f;
  return SP_OK;
}

/* One term of a tensor's merge, its values read. */
typedef struct term {
  const lora_file *lf;
  const entry *e;
  float *a, *b, *d, *db; /* A (r, cols), B (rows, r), diff, diff_b */
  double c;              /* strength * (alpha / r) */
} term;

static void terms_free(term *t, int n) {
  for (int i = 0; i < n; i++) {
    free(t[i].a);
    free(t[i].b);
    free(t[i].d);
    free(t[i].db);
  }
}

int lora_entry_scale(const lora_file *lf, const entry *e, double *out) {
  double alpha = (double)e->rank;
  if (e->p[PART_ALPHA]) {
    float *al = NULL;
    int rc = lora_read_f32(lf, e->p[PART_ALPHA], &al);
    if (rc != SP_OK) return rc;
    alpha = al[0];
    free(al);
  }
  *out = lf->spec.strength * (alpha / (double)e->rank);
  return SP_OK;
}

static int term_read(term *t) {
  const entry *e = t->e;
  int rc = SP_OK;
  if (e->p[PART_DOWN]) {
    rc = lora_entry_scale(t->lf, e, &t->c);
    if (rc == SP_OK) rc = lora_read_f32(t->lf, e->p[PART_DOWN], &t->a);
    if (rc == SP_OK) rc = lora_read_f32(t->lf, e->p[PART_UP], &t->b);
  }
  if (rc == SP_OK && e->p[PART_DIFF]) rc = lora_read_f32(t->lf, e->p[PART_DIFF], &t->d);
  if (rc == SP_OK && e->p[PART_DIFF_B]) rc = lora_read_f32(t->lf, e->p[PART_DIFF_B], &t->db);
  return rc;
}

/* Rows merged together: each row of A is then read once per tile of rows
 * instead of once per row (A of a 14B projection is r x 5120 floats). The
 * order of the arithmetic of an element does not depend on the tiling. */
enum { MERGE_ROWS = 16 };

/* Merges the terms into one tensor w (numel = rows x cols) of dtype dt, by
 * tiles of rows; every element by one thread, in the order of lora.h.
 * Returns the flat index of the first non-finite result, or -1. */
static int64_t merge_tensor(const term *tm, int nt, int64_t rows, int64_t cols, kern_dtype dt,
                            void *w) {
  int64_t bad = -1;
  const int64_t tiles = (rows + MERGE_ROWS - 1) / MERGE_ROWS;
#pragma omp parallel
  {
    double *acc = sp_xmalloc((size_t)MERGE_ROWS * (size_t)cols * sizeof *acc);
    double *tmp = sp_xmalloc((size_t)MERGE_ROWS * (size_t)cols * sizeof *tmp);
#pragma omp for schedule(static)
    for (int64_t tile = 0; tile < tiles; tile++) {
      const int64_t o0 = tile * MERGE_ROWS;
      const int64_t nr = rows - o0 < MERGE_ROWS ? rows - o0 : MERGE_ROWS;
      const int64_t base = o0 * cols, n = nr * cols;
      for (int64_t i = 0; i < n; i++)
        acc[i] = dt == KERN_DTYPE_F32 ? (double)((const float *)w)[base + i]
                                      : (double)kern_bf16_to_f32(((const uint16_t *)w)[base + i]);
      for (int k = 0; k < nt; k++) {
        const term *t = &tm[k];
        const double s = t->lf->spec.strength;
        if (t->a) {
          const int64_t r = t->e->rank;
          for (int64_t i = 0; i < n; i++) tmp[i] = 0.0;
          for (int64_t q = 0; q < r; q++) {
            const float *aq = t->a + q * cols;
            for (int64_t rr = 0; rr < nr; rr++) {
              const double bq = (double)t->b[(o0 + rr) * r + q];
              double *tr = tmp + rr * cols;
              for (int64_t i = 0; i < cols; i++) {
                double p = bq * (double)aq[i]; /* exact: a product of two floats */
                tr[i] = tr[i] + p;
              }
            }
          }
          for (int64_t i = 0; i < n; i++) {
            double ct = t->c * tmp[i];
            acc[i] = acc[i] + ct;
          }
        }
        for (int m = 0; m < 2; m++) {
          const float *d = m == 0 ? t->d : t->db;
          if (!d) continue;
          for (int64_t i = 0; i < n; i++) {
            double sd = s * (double)d[base + i];
            acc[i] = acc[i] + sd;
          }
        }
      }
      int64_t first_bad = -1;
      for (int64_t i = 0; i < n; i++) {
        const float f = (float)acc[i];
        if (!isfinite(f) && first_bad < 0) first_bad = base + i;
        if (dt == KERN_DTYPE_F32)
          ((float *)w)[base + i] = f;
        else
          ((uint16_t *)w)[base + i] = kern_f32_to_bf16(f);
      }
      if (first_bad >= 0) {
#pragma omp critical(sp_lora_bad)
        if (bad < 0 || first_bad < bad) bad = first_bad;
      }
    }
    free(tmp);
    free(acc);
  }
  return bad;
}

int rank_lora_merge_group(void *ctx, int expert, wan_group g, int block, const wan_layout *l,
                          kern_dtype dt, void *data) {
  const rank_lora *L = ctx;
  term *tm = sp_xcalloc((size_t)L->n + 1, sizeof *tm);
  int rc = SP_OK;
  for (int ti = 0; ti < l->count && rc == SP_OK; ti++) {
    int nt = 0;
    for (int f = 0; f < L->n; f++) {
      const lora_file *lf = &L->files[f];
      if (!lora_applies_to(lf, expert)) continue;
      const entry *e = lora_entry_find(lf, g, block, ti);
      if (!e) continue;
      tm[nt] = (term){.lf = lf, .e = e};
      rc = term_read(&tm[nt]);
      nt++;
      if (rc != SP_OK) break;
    }
    if (rc == SP_OK && nt > 0) {
      const wan_tensor *t = &l->t[ti];
      const int64_t rows = t->ndim >= 2 ? t->shape[0] : 1;
      const int64_t bad =
          merge_tensor(tm, nt, rows, t->numel / rows, dt, (char *)data + t->offset);
      if (bad >= 0) {
        char key[256];
        lora_tensor_key(g, block, t->name, key, sizeof key);
        sp_log_error("%s: merging the LoRA gives a non-finite value at element %lld (strength "
                     "too large for %s?)", key, (long long)bad, kern_dtype_name(dt));
        rc = SP_ERR_INPUT;
      }
    }
    terms_free(tm, nt);
  }
  free(tm);
  return rc;
}
