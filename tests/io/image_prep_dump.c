/* What the image preparation of image-to-video makes of an image file
 * (ranks/io/image_prep.h), for tests/io/image_prep_parity.py to compare
 * with the float64 references (tests/ref/image_ref.py):
 *
 *   image_prep_dump IMAGE OUT.h5 OP...
 *
 * writes float32 datasets: rgb (h, w, 3) the 8-bit image as read, unit
 * (3, h, w) in [-1, 1], and one per OP:
 *   grid:AREA       grid_AREA (2): the I2V latent grid (lat_h, lat_w)
 *   bicubic:OH:OW   bicubic_OHxOW (3, OH, OW): the [-1, 1] image resized
 *   lanczos:OW:OH   lanczos_OWxOH (OH, OW, 3): the 8-bit image resized
 *   ti2v:AREA       ti2v_AREA (oh, ow, 3): TI2V's resized and cropped image
 *   mask:N:H:W      mask_N (4, 1 + (N - 1) / 4, H, W): the mask channels of
 *                   I2V's y for N frames (ranks/pipeline/job_image.h)
 *   i2v:AREA:N      i2v_AREA_N (3, N, h, w): I2V's video of the image, the
 *                   encoder's input (job_i2v_video)
 *   cond:N:FILE     cond_N (4 + C, F, h, w): I2V's y of N frames from the
 *                   latents (C, F, h, w) of FILE's dataset 'latents'
 *                   (job_i2v_condition)
 * Exit 0, or the first failing step's status (2: a refused input). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_prep.h"
#include "job_image.h"
#include "log.h"
#include "tensor_io.h"

/* An 8-bit image (h, w, 3) as float32 into o under name. */
static int put_rgb(rank_outfile *o, const char *name, const rank_image *im) {
  const int64_t n = im->w * im->h * 3, dims[3] = {im->h, im->w, 3};
  float *f = sp_xmalloc((size_t)n * sizeof *f);
  for (int64_t i = 0; i < n; i++) f[i] = im->rgb[i];
  const int rc = rank_outfile_put(o, name, 3, dims, f);
  free(f);
  return rc;
}

static int op(rank_outfile *o, const rank_image *im, const float *unit, const char *spec) {
  char name[96];
  long long a = 0, b = 0, c = 0;
  int rc = SP_ERR_INPUT;
  if (sscanf(spec, "grid:%lld", &a) == 1) {
    int64_t g[2];
    rc = rank_image_i2v_grid("grid", im->h, im->w, a, &g[0], &g[1]);
    const float gf[2] = {(float)g[0], (float)g[1]};
    const int64_t d = 2;
    snprintf(name, sizeof name, "grid_%lld", a);
    if (rc == SP_OK) rc = rank_outfile_put(o, name, 1, &d, gf);
  } else if (sscanf(spec, "bicubic:%lld:%lld", &a, &b) == 2) {
    float *r = sp_xmalloc((size_t)(3 * a * b) * sizeof *r);
    rank_image_bicubic(unit, 3, im->h, im->w, r, a, b);
    const int64_t d[3] = {3, a, b};
    snprintf(name, sizeof name, "bicubic_%lldx%lld", a, b);
    rc = rank_outfile_put(o, name, 3, d, r);
    free(r);
  } else if (sscanf(spec, "lanczos:%lld:%lld", &a, &b) == 2) {
    rank_image r;
    rc = rank_image_lanczos(im, a, b, &r);
    snprintf(name, sizeof name, "lanczos_%lldx%lld", a, b);
    if (rc == SP_OK) rc = put_rgb(o, name, &r);
    rank_image_free(&r);
  } else if (sscanf(spec, "mask:%lld:%lld:%lld", &a, &b, &c) == 3) {
    const int64_t d[4] = {4, 1 + (a - 1) / 4, b, c};
    float *m = sp_xmalloc((size_t)(d[0] * d[1] * b * c) * sizeof *m);
    job_i2v_mask(a, b, c, m);
    snprintf(name, sizeof name, "mask_%lld", a);
    rc = rank_outfile_put(o, name, 4, d, m);
    free(m);
  } else if (sscanf(spec, "i2v:%lld:%lld", &a, &b) == 2) {
    float *v = NULL;
    int64_t d[4];
    rc = job_i2v_video("i2v", im, a, b, &v, d);
    snprintf(name, sizeof name, "i2v_%lld_%lld", a, b);
    if (rc == SP_OK) rc = rank_outfile_put(o, name, 4, d, v);
    free(v);
  } else if (sscanf(spec, "cond:%lld:", &a) == 1 && strchr(spec + 5, ':')) {
    rank_tensor t = {0};
    rc = rank_tensor_read(strchr(spec + 5, ':') + 1, "latents", 4, &t);
    if (rc == SP_OK && t.dims[1] != 1 + (a - 1) / 4) {
      sp_log_error("image_prep_dump: %lld latent frames are not those of %lld frames",
                   (long long)t.dims[1], a);
      rc = SP_ERR_INPUT;
    }
    if (rc == SP_OK) {
      const int64_t d[4] = {4 + t.dims[0], t.dims[1], t.dims[2], t.dims[3]};
      float *y = sp_xmalloc((size_t)(d[0] * d[1] * d[2] * d[3]) * sizeof *y);
      job_i2v_condition(a, t.dims[0], t.data, t.dims[2], t.dims[3], y);
      snprintf(name, sizeof name, "cond_%lld", a);
      rc = rank_outfile_put(o, name, 4, d, y);
      free(y);
    }
    rank_tensor_free(&t);
  } else if (sscanf(spec, "ti2v:%lld", &a) == 1) {
    rank_image r;
    rc = rank_image_ti2v_prepare("ti2v", im, a, &r);
    snprintf(name, sizeof name, "ti2v_%lld", a);
    if (rc == SP_OK) rc = put_rgb(o, name, &r);
    rank_image_free(&r);
  } else {
    sp_log_error("image_prep_dump: unknown op '%s'", spec);
  }
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: image_prep_dump IMAGE OUT.h5 OP...\n");
    return 2;
  }
  rank_image im;
  int rc = rank_image_read("image", argv[1], &im);
  if (rc != SP_OK) return rc;
  float *unit = sp_xmalloc((size_t)(3 * im.w * im.h) * sizeof *unit);
  rank_image_to_unit(&im, unit);
  rank_outfile *o = NULL;
  rc = rank_outfile_open(argv[2], &o);
  const int64_t ud[3] = {3, im.h, im.w};
  if (rc == SP_OK) rc = put_rgb(o, "rgb", &im);
  if (rc == SP_OK) rc = rank_outfile_put(o, "unit", 3, ud, unit);
  for (int i = 3; i < argc && rc == SP_OK; i++) rc = op(o, &im, unit, argv[i]);
  if (o) {
    if (rc == SP_OK)
      rc = rank_outfile_commit(o);
    else
      rank_outfile_abort(o);
  }
  free(unit);
  rank_image_free(&im);
  return rc;
}
