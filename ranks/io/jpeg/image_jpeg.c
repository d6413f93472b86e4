/* JPEG input through libjpeg (libjpeg-turbo), see image_in.h: decoded to
 * RGB with the library's defaults (accurate integer IDCT, fancy
 * upsampling), grey replicated by the library; CMYK and YCCK refused. The
 * library reports errors through error_exit, which must not return: it
 * longjmps back here. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "image_in.h"
#include "file_read.h"
#include "log.h"

typedef struct jpeg_err {
  struct jpeg_error_mgr mgr;
  jmp_buf jump;
  char msg[JMSG_LENGTH_MAX];
} jpeg_err;

static void on_jpeg_error(j_common_ptr cinfo) {
  jpeg_err *e = (jpeg_err *)cinfo->err;
  e->mgr.format_message(cinfo, e->msg);
  longjmp(e->jump, 1);
}

static void on_jpeg_message(j_common_ptr cinfo) { (void)cinfo; }

const char *rank_image_jpeg_status(void) {
  static char s[64];
  if (!s[0]) snprintf(s, sizeof s, "libjpeg %d", JPEG_LIB_VERSION);
  return s;
}

/* The scanlines of a started decompression into out; under setjmp. */
static int jpeg_rows(const char *what, const char *path, struct jpeg_decompress_struct *d,
                     rank_image *out) {
  if (d->jpeg_color_space == JCS_CMYK || d->jpeg_color_space == JCS_YCCK) {
    sp_log_error("%s %s: a CMYK JPEG: staticpipe reads RGB and greyscale JPEGs only", what, path);
    return SP_ERR_INPUT;
  }
  if (d->image_width < 1 || d->image_height < 1 || d->image_width > RANK_IMAGE_MAX_SIDE ||
      d->image_height > RANK_IMAGE_MAX_SIDE) {
    sp_log_error("%s %s: %ux%u pixels: each side must be 1..%d", what, path,
                 (unsigned)d->image_width, (unsigned)d->image_height, RANK_IMAGE_MAX_SIDE);
    return SP_ERR_INPUT;
  }
  d->out_color_space = JCS_RGB;
  jpeg_start_decompress(d);
  if (d->output_components != 3) {
    sp_log_error("%s %s: libjpeg gives %d components, not RGB's 3", what, path,
                 d->output_components);
    return SP_ERR_INPUT;
  }
  out->w = d->output_width;
  out->h = d->output_height;
  out->rgb = malloc((size_t)out->w * (size_t)out->h * 3);
  if (!out->rgb) {
    sp_log_error("%s %s: out of memory for %lldx%lld pixels", what, path, (long long)out->w,
                 (long long)out->h);
    return SP_ERR_RUNTIME;
  }
  while (d->output_scanline < d->output_height) {
    JSAMPROW row = out->rgb + (size_t)d->output_scanline * (size_t)out->w * 3;
    jpeg_read_scanlines(d, &row, 1);
  }
  jpeg_finish_decompress(d);
  return SP_OK;
}

int rank_image_read_jpeg(const char *what, const char *path, rank_image *out) {
  memset(out, 0, sizeof *out);
  FILE *fp = NULL;
  if (rank_file_fopen_read(path, &fp) != SP_OK) return SP_ERR_INPUT; /* logged */
  struct jpeg_decompress_struct d;
  jpeg_err err;
  memset(&err, 0, sizeof err);
  d.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = on_jpeg_error;
  err.mgr.output_message = on_jpeg_message;
  if (setjmp(err.jump)) {
    sp_log_error("%s %s: not a readable JPEG: %s", what, path, err.msg);
    jpeg_destroy_decompress(&d);
    fclose(fp);
    free(out->rgb);
    out->rgb = NULL;
    return SP_ERR_INPUT;
  }
  jpeg_create_decompress(&d);
  jpeg_stdio_src(&d, fp);
  jpeg_read_header(&d, TRUE);
  const int rc = jpeg_rows(what, path, &d, out);
  jpeg_destroy_decompress(&d);
  fclose(fp);
  return rc;
}
