/* The image of an image-to-video job, prepared as the published Wan 2.2
 * pipelines prepare it (I2V.md "Preparing the image"; the references are
 * tests/ref/image_ref.py):
 *
 *   I2V-A14B (image2video.py): the latent grid from max_area and the
 *     image's aspect ratio, with the published rounding in double; the
 *     [-1, 1] image resized to 8 lat_h x 8 lat_w by PyTorch's bicubic
 *     interpolation (upsample_bicubic2d: half-pixel centres, Keys' cubic
 *     with A = -0.75, clamped taps, no antialiasing), computed in double
 *     and stored as float32.
 *   TI2V-5B (textimage2video.py, utils.py best_output_size): the output
 *     size (multiples of 32 within max_area, the candidate closest to the
 *     image's ratio), Pillow's integer LANCZOS resize of the 8-bit image
 *     (Resample.c, exact: Pillow up to 12.x) to cover it, the centre
 *     cropped; then [-1, 1] (image_in.h).
 *
 * Pure arithmetic on host arrays; nothing here reads a file. */
#ifndef RANK_IMAGE_PREP_H
#define RANK_IMAGE_PREP_H

#include <stddef.h>
#include <stdint.h>

#include "image_in.h"

/* WanI2V.generate's latent grid of an h x w image within max_area, in
 * double: ar = h / w, lat_h = 2 floor(sqrt(max_area ar) / 16), lat_w = 2
 * floor(sqrt(max_area / ar) / 16) (the published round(... // 8 // 2 * 2);
 * the video is 8 lat_h x 8 lat_w). SP_OK, or SP_ERR_INPUT after one line
 * naming what when a side would have fewer than 2 latent positions (no
 * token). */
int rank_image_i2v_grid(const char *what, int64_t h, int64_t w, int64_t max_area,
                        int64_t *lat_h, int64_t *lat_w);

/* F.interpolate(img, size=(oh, ow), mode='bicubic') of a (channels, h, w)
 * float image into out (channels, oh, ow): rows, then columns, each output
 * the sum of its four clamped taps in double, rounded to float once. */
void rank_image_bicubic(const float *in, int64_t channels, int64_t h, int64_t w, float *out,
                        int64_t oh, int64_t ow);

/* best_output_size(w, h, 32, 32, max_area) into (*ow, *oh). SP_OK, or
 * SP_ERR_INPUT after one line naming what when the area leaves no 32 x 32
 * block. */
int rank_image_ti2v_size(const char *what, int64_t w, int64_t h, int64_t max_area, int64_t *ow,
                         int64_t *oh);

/* Image.resize((ow, oh), Image.LANCZOS) of an 8-bit RGB image, bit for bit
 * (Pillow's fixed-point passes: horizontal first when the width changes,
 * then vertical; the same size is a copy). out->rgb is malloc'd. SP_OK or
 * SP_ERR_RUNTIME (out of memory, logged). */
int rank_image_lanczos(const rank_image *in, int64_t ow, int64_t oh, rank_image *out);

/* WanTI2V.i2v's image: (ow, oh) of rank_image_ti2v_size, scale = max(ow / w,
 * oh / h), the LANCZOS resize to (round(w scale), round(h scale)) (halves
 * to even, as Python's round), the centre ow x oh cropped from
 * ((W' - ow) // 2, (H' - oh) // 2). SP_OK, SP_ERR_INPUT (the size rule,
 * logged) or SP_ERR_RUNTIME. */
int rank_image_ti2v_prepare(const char *what, const rank_image *in, int64_t max_area,
                            rank_image *out);
/* The resize and crop of rank_image_ti2v_prepare to a given ow x oh (its
 * size rule left out: encode --size, a stream's planned size). */
int rank_image_ti2v_cover(const char *what, const rank_image *in, int64_t ow, int64_t oh,
                          rank_image *out);

#endif
