/* Input images: PNG and JPEG files read as the published Wan command line
 * reads them (PIL's Image.open(path).convert("RGB"); I2V.md "Preparing the
 * image"), into 8-bit RGB, and that RGB as the network's input in [-1, 1].
 *
 * 8 bits per channel only (PIL's reduction of other depths is not
 * reproduced): grey is replicated to the three channels, 1-, 2- and 4-bit
 * grey scaled to 8 bits, a palette expanded, an alpha channel (or a
 * palette's transparency) dropped, not composited; no gamma, colour
 * profile or EXIF orientation is applied (PIL applies none of them
 * either). PNG through libpng (linked), JPEG through libjpeg (libjpeg-turbo)
 * when the build found its headers (ranks/io/jpeg/; ranks/io/nojpeg/
 * refuses JPEG files otherwise), with its default decoding (accurate
 * integer IDCT, fancy upsampling: PIL's). The format is told by the file's
 * first bytes, not its name. */
#ifndef RANK_IMAGE_IN_H
#define RANK_IMAGE_IN_H

#include <stddef.h>
#include <stdint.h>

#define RANK_IMAGE_MAX_SIDE 16384 /* pixels per side an input image may have */

typedef struct rank_image {
  int64_t w, h;
  uint8_t *rgb; /* (h, w, 3) row-major */
} rank_image;

/* Reads path (what names it in messages: "--image x.png"). SP_OK, or
 * SP_ERR_INPUT after one line naming the file and the check (not a PNG or
 * JPEG, a damaged file, a depth or colour model it does not take, a side
 * over RANK_IMAGE_MAX_SIDE), or SP_ERR_RUNTIME (out of memory). */
int rank_image_read(const char *what, const char *path, rank_image *out);
void rank_image_free(rank_image *im);

/* TF.to_tensor(img).sub_(0.5).div_(0.5) in float32, each operation
 * rounded: out[c, y, x] = (float(level / 255) - 0.5) / 0.5, (3, h, w).
 * Level 0 is -1, 255 is 1. */
void rank_image_to_unit(const rank_image *im, float *out);

/* The JPEG decoder of this build (ranks/io/jpeg/ or ranks/io/nojpeg/):
 * the file's pixels as 8-bit RGB into out (malloc'd rgb). */
int rank_image_read_jpeg(const char *what, const char *path, rank_image *out);
/* "libjpeg-turbo 2.1.5 (jpeg 6.2)", or why JPEG files are refused. */
const char *rank_image_jpeg_status(void);

#endif
