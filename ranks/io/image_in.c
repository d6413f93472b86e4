/* Input images (image_in.h): the format by its signature, PNG through
 * libpng, the conversion to [-1, 1]. libpng reports errors through a
 * callback that must not return; it longjmps back here. */
#include "image_in.h"

#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_read.h"
#include "log.h"

typedef struct png_err {
  char msg[256];
} png_err;

static void on_png_error(png_structp png, png_const_charp msg) {
  png_err *e = png_get_error_ptr(png);
  snprintf(e->msg, sizeof e->msg, "%s", msg);
  png_longjmp(png, 1);
}

static void on_png_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

/* The transformations to 8-bit RGB of a PNG of this depth and colour type
 * (after png_read_info); SP_OK or SP_ERR_INPUT for 16 bits per channel. */
static int png_to_rgb8(const char *what, const char *path, png_structp png, png_infop info) {
  const int depth = png_get_bit_depth(png, info), type = png_get_color_type(png, info);
  if (depth > 8) {
    sp_log_error("%s %s: %d bits per channel: staticpipe reads 8-bit images only (save it with "
                 "8 bits per channel)", what, path, depth);
    return SP_ERR_INPUT;
  }
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  /* an alpha channel, and a palette's or a key colour's transparency
   * (tRNS, which the palette's expansion turns into one), dropped, as
   * convert("RGB") drops them */
  if ((type & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS))
    png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  return SP_OK;
}

/* The rows of an opened PNG into out; called under setjmp. */
static int png_rows(const char *what, const char *path, png_structp png, png_infop info,
                    rank_image *out) {
  const png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  if (w < 1 || h < 1 || w > RANK_IMAGE_MAX_SIDE || h > RANK_IMAGE_MAX_SIDE) {
    sp_log_error("%s %s: %ux%u pixels: each side must be 1..%d", what, path, (unsigned)w,
                 (unsigned)h, RANK_IMAGE_MAX_SIDE);
    return SP_ERR_INPUT;
  }
  int rc = png_to_rgb8(what, path, png, info);
  if (rc != SP_OK) return rc;
  if (png_get_rowbytes(png, info) != (size_t)w * 3) {
    sp_log_error("%s %s: libpng gives %zu bytes per row, not RGB's %zu", what, path,
                 (size_t)png_get_rowbytes(png, info), (size_t)w * 3);
    return SP_ERR_INPUT;
  }
  out->w = w;
  out->h = h;
  out->rgb = malloc((size_t)w * h * 3);
  png_bytep *rows = malloc((size_t)h * sizeof *rows);
  if (!out->rgb || !rows) {
    free(rows);
    sp_log_error("%s %s: out of memory for %ux%u pixels", what, path, (unsigned)w, (unsigned)h);
    return SP_ERR_RUNTIME;
  }
  for (png_uint_32 y = 0; y < h; y++) rows[y] = out->rgb + (size_t)y * w * 3;
  png_read_image(png, rows);
  png_read_end(png, NULL);
  free(rows);
  return SP_OK;
}

static int read_png(const char *what, const char *path, FILE *fp, rank_image *out) {
  png_err err = {.msg = "libpng failed"};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &err, on_png_error,
                                           on_png_warning);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!png || !info) {
    png_destroy_read_struct(&png, NULL, NULL);
    sp_log_error("%s %s: libpng could not start (out of memory)", what, path);
    return SP_ERR_RUNTIME;
  }
  if (setjmp(png_jmpbuf(png))) {
    sp_log_error("%s %s: not a readable PNG: %s", what, path, err.msg);
    free(out->rgb);
    out->rgb = NULL;
    png_destroy_read_struct(&png, &info, NULL);
    return SP_ERR_INPUT;
  }
  png_init_io(png, fp);
  png_read_info(png, info);
  const int rc = png_rows(what, path, png, info, out);
  png_destroy_read_struct(&png, &info, NULL);
  return rc;
}

int rank_image_read(const char *what, const char *path, rank_image *out) {
  memset(out, 0, sizeof *out);
  FILE *fp = NULL;
  /* opened without blocking and refused unless a regular file (io/file_read.h) */
  if (rank_file_fopen_read(path, &fp) != SP_OK) return SP_ERR_INPUT; /* logged */
  uint8_t sig[8] = {0};
  const size_t n = fread(sig, 1, sizeof sig, fp);
  static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  int rc;
  if (n == 8 && memcmp(sig, png_sig, 8) == 0) {
    rewind(fp);
    rc = read_png(what, path, fp, out);
    fclose(fp);
  } else if (n >= 3 && sig[0] == 0xff && sig[1] == 0xd8 && sig[2] == 0xff) {
    fclose(fp);
    rc = rank_image_read_jpeg(what, path, out);
  } else {
    fclose(fp);
    sp_log_error("%s %s: neither a PNG nor a JPEG file (by its first bytes)", what, path);
    rc = SP_ERR_INPUT;
  }
  if (rc != SP_OK) rank_image_free(out);
  return rc;
}

void rank_image_free(rank_image *im) {
  free(im->rgb);
  memset(im, 0, sizeof *im);
}

void rank_image_to_unit(const rank_image *im, float *out) {
  const int64_t n = im->w * im->h;
  for (int64_t c = 0; c < 3; c++)
    for (int64_t i = 0; i < n; i++) {
      const float v = (float)im->rgb[i * 3 + c] / 255.0f;
      out[c * n + i] = (v - 0.5f) / 0.5f;
    }
}
