/* One PNG frame through libpng (see video_backend.h): 8-bit RGB, no
 * interlace, libpng's default filters and zlib level. libpng reports errors
 * through a callback that must not return; it longjmps back here. */
#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "video_backend.h"

typedef struct png_err {
  char msg[256];
} png_err;

static void on_png_error(png_structp png, png_const_charp msg) {
  png_err *e = png_get_error_ptr(png);
  snprintf(e->msg, sizeof e->msg, "%s", msg);
  png_longjmp(png, 1);
}

static void on_png_warning(png_structp png, png_const_charp msg) {}

int video_png_write(const char *path, const char *file, const uint8_t *rgb, int64_t width,
                    int64_t height) {
  png_err err = {.msg = "libpng failed"};
  FILE *fp = fopen(file, "wb");
  if (!fp) {
    sp_log_error("%s: cannot create frame '%s': %s", path, file, strerror(errno));
    return SP_ERR_RUNTIME;
  }
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &err, on_png_error,
                                            on_png_warning);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!png || !info) {
    sp_log_error("%s: libpng could not start a frame (out of memory)", path);
    png_destroy_write_struct(&png, NULL);
    fclose(fp);
    return SP_ERR_RUNTIME;
  }
  if (setjmp(png_jmpbuf(png))) {
    sp_log_error("%s: writing frame '%s' failed: %s", path, file, err.msg);
    png_destroy_write_struct(&png, &info);
    fclose(fp);
    return SP_ERR_RUNTIME;
  }
  png_init_io(png, fp);
  png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8, PNG_COLOR_TYPE_RGB,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int64_t y = 0; y < height; y++) png_write_row(png, rgb + y * width * 3);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  /* The directory is renamed into place at commit: the frames reach the
   * disk first. */
  int bad = fflush(fp) != 0 || fsync(fileno(fp)) != 0;
  bad |= fclose(fp) != 0;
  if (bad) {
    sp_log_error("%s: writing frame '%s' failed: %s", path, file, strerror(errno));
    return SP_ERR_RUNTIME;
  }
  return SP_OK;
}
