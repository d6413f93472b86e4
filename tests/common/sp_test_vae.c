/* The Wan VAE tests' shared parts (sp_test_vae.h). */
#include "sp_test_vae.h"

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5_util.h"
#include "kern_dtype.h"
#include "layout.h"
#include "log.h"
#include "sp_test.h"
#include "tensor_io.h"
#include "wan_vae_gpu_layout.h"

void sp_test_vae_fill_weights(const wan_vae_table *t, float *packed, int round_convs) {
  for (int i = 0; i < t->count; i++) {
    const wan_vae_tensor *e = &t->t[i];
    const char *tail = strrchr(e->name, '.');
    float *p = packed + e->offset;
    if (strcmp(tail, ".gamma") == 0) {
      sp_rand_fill(p, e->numel, 0.5, 1.5);
    } else if (strcmp(tail, ".bias") == 0) {
      sp_rand_fill(p, e->numel, -0.2, 0.2);
    } else {
      double a = 1.0 / sqrt((double)(e->numel / e->shape[0]));
      if (strcmp(e->name, "decoder.head.2.weight") == 0) a *= 2.0;
      sp_rand_fill(p, e->numel, -a, a);
      /* the CUDA decoder's and encoder's conv weights are bf16 (or TF32
       * products); the 1x1x1 convs outside them (conv2, conv1) stay fp32 */
      if (round_convs == SP_TEST_VAE_FP32 || strcmp(e->name, "conv2.weight") == 0 ||
          strcmp(e->name, "conv1.weight") == 0)
        continue;
      for (int64_t k = 0; k < e->numel; k++)
        p[k] = round_convs == SP_TEST_VAE_BF16
                   ? kern_bf16_to_f32(kern_f32_to_bf16(p[k]))
                   : kern_f32_round_tf32(p[k], round_convs == SP_TEST_VAE_TF32_TRUNCATE);
    }
  }
}

float *sp_test_vae_new_weights(const wan_vae_table *t, int round_convs) {
  float *packed = sp_test_malloc((size_t)t->packed_floats * sizeof *packed);
  memset(packed, 0, (size_t)t->packed_floats * sizeof *packed);
  sp_test_vae_fill_weights(t, packed, round_convs);
  return packed;
}

void sp_test_vae_config_narrow(wan_vae_config *c, int encoder, int64_t dim, int n_mult,
                               int64_t num_res, const int temporal[3]) {
  static const int64_t mult4[4] = {1, 2, 4, 4}, mult3[3] = {1, 2, 2};
  wan_vae_config_published(c);
  c->encoder = encoder;
  c->dim = dim;
  c->n_mult = n_mult;
  for (int i = 0; i < n_mult; i++) c->dim_mult[i] = n_mult == 4 ? mult4[i] : mult3[i];
  c->num_res_blocks = num_res;
  for (int i = 0; i < 3; i++) c->temporal_up[i] = i + 1 < n_mult ? temporal[i] : 0;
}

/* Attribute a of config, n values read as int64 from f; -1 when it is
 * absent (and not optional), malformed or out of its range. */
static int read_attr(hid_t f, const net_attr *a, int n, void *config) {
  int64_t v[16];
  if (n < 0 || n > 16) return -1;
  if (n == 0) return 0;
  if (H5Aexists(f, a->name) <= 0) {
    if (!a->optional) return -1;
    for (int k = 0; k < n; k++) v[k] = a->dflt;
  } else if (rank_h5_attr_read_num(f, a->name, H5T_NATIVE_INT64, v, n) != 0) {
    return -1;
  }
  char *field = (char *)config + a->offset;
  for (int k = 0; k < n; k++) {
    if (a->ranged && (v[k] < a->lo || v[k] > a->hi)) return -1;
    if (a->field == NET_FIELD_INT)
      ((int *)field)[k] = (int)v[k];
    else
      ((int64_t *)field)[k] = v[k];
  }
  return 0;
}

int sp_test_vae_read_config(const char *path, const net_schema *s, void *config) {
  memset(config, 0, s->config_size);
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    fprintf(stderr, "%s: cannot open as HDF5\n", path);
    return -1;
  }
  int rc = 0;
  for (int i = 0; i < s->nattrs && rc == 0; i++) {
    const net_attr *a = &s->attrs[i];
    int n = a->count;
    if (a->count_attr) {
      const int c = net_attr_find(s, a->count_attr);
      n = c < 0 ? -1 : (int)net_attr_get(&s->attrs[c], config, 0) + a->count_add;
    }
    rc = read_attr(f, a, n, config);
  }
  H5Fclose(f);
  if (rc != 0) fprintf(stderr, "%s: missing or malformed config attributes\n", path);
  return rc;
}

int sp_test_vae_read_weights(const char *path, const wan_vae_table *t, float *packed) {
  for (int i = 0; i < t->count; i++) {
    const wan_vae_tensor *e = &t->t[i];
    char name[128];
    snprintf(name, sizeof name, "weights/%s", e->name);
    rank_tensor x;
    if (rank_tensor_read(path, name, e->ndim, &x) != SP_OK) return -1;
    int same = 1;
    for (int k = 0; k < e->ndim; k++) same &= x.dims[k] == e->shape[k];
    if (!same) {
      fprintf(stderr, "%s: %s has another shape than the table's\n", path, name);
      rank_tensor_free(&x);
      return -1;
    }
    memcpy(packed + e->offset, x.data, (size_t)e->numel * sizeof *packed);
    rank_tensor_free(&x);
  }
  wan_vae_table_bind(t, packed);
  return 0;
}

sp_test_vae_sink sp_test_vae_sink_new(int64_t ch, int64_t T, int64_t ohw) {
  return (sp_test_vae_sink){.video = sp_test_alloc(ch * T * ohw), .ch = ch, .T = T, .ohw = ohw};
}

int sp_test_vae_sink_put(void *user, const float *frames, int64_t t0, int64_t n) {
  sp_test_vae_sink *s = user;
  if (s->calls < SP_TEST_VAE_MAX_CALLS) {
    s->t0[s->calls] = t0;
    s->n[s->calls] = n;
  }
  s->calls++;
  if (t0 < 0 || n < 1 || t0 + n > s->T) return 0; /* recorded; the check reports it */
  for (int64_t ch = 0; ch < s->ch; ch++)
    memcpy(s->video + (ch * s->T + t0) * s->ohw, frames + ch * n * s->ohw,
           (size_t)(n * s->ohw) * sizeof *s->video);
  return 0;
}

int sp_test_vae_sink_same_calls(const sp_test_vae_sink *a, const sp_test_vae_sink *ref) {
  int same = a->calls == ref->calls && a->calls <= SP_TEST_VAE_MAX_CALLS;
  for (int i = 0; same && i < a->calls; i++) same = a->t0[i] == ref->t0[i] && a->n[i] == ref->n[i];
  return same;
}

void sp_test_vae_check_shapes(const wan_vae_table *t, const sp_test_vae_want *want, int n,
                              const char *what) {
  for (int i = 0; i < n; i++) {
    const int k = wan_vae_table_find(t, want[i].name);
    CHECK(k >= 0, "%s: no %s", what, want[i].name);
    if (k < 0) continue;
    int same = t->t[k].ndim == want[i].ndim;
    for (int d = 0; same && d < want[i].ndim; d++) same = t->t[k].shape[d] == want[i].shape[d];
    CHECK(same, "%s: %s has another shape", what, want[i].name);
  }
}

void sp_test_vae_check_packing(const wan_vae_table *t, const char *what) {
  int64_t end = 0;
  for (int i = 0; i < t->count; i++) {
    CHECK(t->t[i].offset % WAN_VAE_ALIGN_FLOATS == 0 && t->t[i].offset >= end,
          "%s: %s misplaced", what, t->t[i].name);
    end = t->t[i].offset + t->t[i].numel;
    for (int j = 0; j < i; j++)
      CHECK(strcmp(t->t[i].name, t->t[j].name) != 0, "%s: %s twice", what, t->t[i].name);
  }
  CHECK(end <= t->packed_floats, "%s: packed buffer too small", what);
}

int64_t sp_test_vae_check_clamped(const float *v, int64_t n, const char *what) {
  int64_t inside = 0, ends = 0;
  for (int64_t i = 0; i < n; i++) {
    inside += v[i] > -1.0f && v[i] < 1.0f;
    ends += v[i] == -1.0f || v[i] == 1.0f;
  }
  CHECK(inside + ends == n && inside > n / 4 && ends > 0,
        "%s: %lld of %lld inside (-1, 1), %lld clamped", what, (long long)inside, (long long)n,
        (long long)ends);
  return ends;
}

int sp_test_vae_cli_parse(int argc, char **argv, int parts, const char *usage,
                          sp_test_vae_cli *c) {
  *c = (sp_test_vae_cli){.reps = 3};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--small") == 0) {
      c->small = 1;
    } else if (strcmp(a, "--bench") == 0 && i + 3 < argc) {
      c->bench = 1;
      c->h = atoll(argv[i + 1]), c->w = atoll(argv[i + 2]), c->n = atoll(argv[i + 3]);
      i += 3;
    } else if (strcmp(a, "--reps") == 0 && i + 1 < argc) {
      c->reps = atoi(argv[++i]);
    } else if (strcmp(a, "--precision") == 0 && i + 1 < argc) {
      c->precision = argv[++i];
    } else if (parts && strcmp(a, "--part") == 0 && i + 1 < argc) {
      c->part = argv[++i];
    } else {
      const int help = strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0;
      fputs(usage, help ? stdout : stderr);
      return help ? 0 : 2;
    }
  }
  return -1;
}

void sp_test_vae_ops_json(const double *ms, char *buf, size_t size) {
  size_t at = 0;
  buf[0] = '\0';
  for (int i = 0; i < WAN_VAE_GPU_OPS && at + 40 < size; i++)
    at += (size_t)snprintf(buf + at, size - at, "%s\"%s\":%.2f", i ? "," : "",
                           wan_vae_gpu_op_name((wan_vae_gpu_op)i), ms[i]);
}

void sp_test_vae_check_layout(const plan_vae_layout *l, int e, const char *what) {
  uint64_t end = 0;
  for (int i = 0; i < l->count; i++) {
    const plan_vae_buffer *b = &l->b[i];
    CHECK(b->offset % PLAN_LAYOUT_ALIGN == 0 && b->offset >= end,
          "%s: buffer %d (%s %d) at %llu, previous end %llu", what, i,
          plan_vae_buf_name(b->kind), b->index, (unsigned long long)b->offset,
          (unsigned long long)end);
    end = b->offset + b->bytes;
  }
  CHECK(end == l->total, "%s: last end %llu, total %llu", what, (unsigned long long)end,
        (unsigned long long)l->total);
  for (int k = 0; k < PLAN_VAE_CACHE; k++)
    CHECK(plan_vae_layout_find(l, (plan_vae_buf)k, 0) != NULL, "%s: no %s", what,
          plan_vae_buf_name((plan_vae_buf)k));
  for (int i = 0; i < l->n_cache; i++) {
    const plan_vae_buffer *b = plan_vae_layout_find(l, PLAN_VAE_CACHE, i);
    CHECK(b && b->bytes == (uint64_t)l->cache_t[i] * (uint64_t)l->cache_hw[i] *
                               (uint64_t)l->cache_c[i] * (uint64_t)e,
          "%s: cache %d missing or of another size", what, i);
  }
}

void sp_test_vae_check_weight_form(const wan_vae_table *t, wan_vae_gpu_precision p, uint64_t pad,
                                   const char *what) {
  static uint64_t off[WAN_VAE_MAX_TENSORS];
  const uint64_t bytes = wan_vae_gpu_form_offsets(t, p, WAN_VAE_GPU_FORM, off);
  const uint64_t lo = (uint64_t)t->params * (uint64_t)wan_vae_gpu_elem_bytes(p);
  const uint64_t hi = (uint64_t)t->params * 4 + (uint64_t)t->count * PLAN_LAYOUT_ALIGN + pad;
  CHECK(bytes >= lo && bytes <= hi, "%s: weights %llu bytes outside [%llu, %llu]", what,
        (unsigned long long)bytes, (unsigned long long)lo, (unsigned long long)hi);
  for (int i = 0; i + 1 < t->count; i++)
    CHECK(off[i] % PLAN_LAYOUT_ALIGN == 0 &&
              off[i] + wan_vae_gpu_form_bytes(&t->t[i], p, WAN_VAE_GPU_FORM) <= off[i + 1],
          "%s: weight %s misplaced", what, t->t[i].name);
}

void sp_test_vae_check_monotone(const wan_vae_config *c, wan_vae_gpu_precision p, int64_t least,
                                sp_test_vae_bytes_fn bytes) {
  int64_t prev_h = 0;
  for (int64_t h = least; h < least + 40; h += 3) {
    int64_t prev_w = 0;
    for (int64_t w = least; w < least + 40; w += 3) {
      const int64_t b = bytes(c, h, w, p);
      CHECK(b > 0 && b >= prev_w, "bytes(%lld, %lld) = %lld below bytes(%lld, %lld) = %lld",
            (long long)h, (long long)w, (long long)b, (long long)h, (long long)(w - 3),
            (long long)prev_w);
      if (w == least) {
        CHECK(b >= prev_h, "bytes(%lld, %lld) = %lld below bytes(%lld, %lld) = %lld",
              (long long)h, (long long)w, (long long)b, (long long)(h - 3), (long long)w,
              (long long)prev_h);
        prev_h = b;
      }
      prev_w = b;
    }
  }
}
