/* JPEG input in a build without libjpeg's headers (see image_in.h): every
 * JPEG file is refused, naming what to install. */
#include "image_in.h"
#include "log.h"

#define NOJPEG_WHY                                                                            \
  "this staticpipe was built without libjpeg (no jpeglib.h): install libjpeg-dev "           \
  "(libjpeg-turbo; launch/deps.sh does this) and rebuild, or give a PNG"

const char *rank_image_jpeg_status(void) { return NOJPEG_WHY; }

int rank_image_read_jpeg(const char *what, const char *path, rank_image *out) {
  (void)out;
  sp_log_error("%s %s: a JPEG file: %s", what, path, NOJPEG_WHY);
  return SP_ERR_INPUT;
}
