/* Latent preview PNG (see preview.h). */
#include "preview.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "log.h"

/* ComfyUI comfy/latent_formats.py, class Wan21 (published values). */
const double rank_preview_rgb_factors[RANK_PREVIEW_CHANNELS][3] = {
    {-0.1299, -0.1692, 0.2932}, {0.0671, 0.0406, 0.0442},   {0.3568, 0.2548, 0.1747},
    {0.0372, 0.2344, 0.1420},   {0.0313, 0.0189, -0.0328},  {0.0296, -0.0956, -0.0665},
    {-0.3477, -0.4059, -0.2925}, {0.0166, 0.1902, 0.1975},  {-0.0412, 0.0267, -0.1364},
    {-0.1293, 0.0740, 0.1636},  {0.0680, 0.3019, 0.1128},   {0.0032, 0.0581, 0.0639},
    {-0.1251, 0.0927, 0.1699},  {0.0060, -0.0633, 0.0005},  {0.3477, 0.2275, 0.2950},
    {0.1984, 0.0913, 0.1861},
};
const double rank_preview_rgb_bias[3] = {-0.1835, -0.0868, -0.3360};

/* ---- checksums ---------------------------------------------------------- */

/* CRC-32 of PNG chunks (ISO 3309 / ITU-T V.42, reflected polynomial
 * 0xEDB88320), bitwise; the preview is small, speed does not matter. */
static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n) {
  crc = ~crc;
  for (size_t i = 0; i < n; i++) {
    crc ^= p[i];
    for (int b = 0; b < 8; b++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

/* Adler-32 of the zlib stream's uncompressed data (RFC 1950). */
static uint32_t adler32(const uint8_t *p, size_t n) {
  uint32_t a = 1, b = 0;
  for (size_t i = 0; i < n; i++) {
    a = (a + p[i]) % 65521u;
    b = (b + a) % 65521u;
  }
  return (b << 16) | a;
}

static void put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

/* One chunk: length, type, data, CRC over type and data. Returns 0 or -1. */
static int write_chunk(FILE *fp, const char type[4], const uint8_t *data, size_t n) {
  uint8_t head[8], tail[4];
  put_be32(head, (uint32_t)n);
  memcpy(head + 4, type, 4);
  uint32_t crc = crc32_update(0, head + 4, 4);
  crc = crc32_update(crc, data, n);
  put_be32(tail, crc);
  if (fwrite(head, 1, 8, fp) != 8) return -1;
  if (n > 0 && fwrite(data, 1, n, fp) != n) return -1;
  if (fwrite(tail, 1, 4, fp) != 4) return -1;
  return 0;
}

/* ---- image -------------------------------------------------------------- */

static uint8_t to_byte(double v) {
  double u = (v + 1.0) / 2.0; /* ComfyUI: the factors map to [-1, 1] */
  if (!(u > 0.0)) return 0;   /* also NaN */
  if (u >= 1.0) return 255;
  return (uint8_t)(u * 255.0); /* truncation, as torch .to(uint8) */
}

/* Fills raw (h rows of 1 + 3*f*w bytes, filter byte 0 first). */
static void render(const float *lat, int64_t f, int64_t h, int64_t w, uint8_t *raw) {
  const int64_t row = 1 + 3 * f * w;
  const int64_t plane = f * h * w; /* elements per channel */
  for (int64_t y = 0; y < h; y++) {
    uint8_t *r = raw + y * row;
    r[0] = 0;
    for (int64_t fi = 0; fi < f; fi++) {
      for (int64_t xx = 0; xx < w; xx++) {
        const int64_t pos = (fi * h + y) * w + xx; /* offset inside one channel */
        double rgb[3] = {rank_preview_rgb_bias[0], rank_preview_rgb_bias[1],
                         rank_preview_rgb_bias[2]};
        for (int c = 0; c < RANK_PREVIEW_CHANNELS; c++) {
          const double v = (double)lat[c * plane + pos];
          for (int k = 0; k < 3; k++) rgb[k] += v * rank_preview_rgb_factors[c][k];
        }
        uint8_t *px = r + 1 + 3 * (fi * w + xx);
        for (int k = 0; k < 3; k++) px[k] = to_byte(rgb[k]);
      }
    }
  }
}

/* zlib stream (RFC 1950) of stored deflate blocks (RFC 1951, BTYPE 00) over
 * raw. Returns a malloc'ed buffer and its size in *zn. */
static uint8_t *zlib_stored(const uint8_t *raw, size_t n, size_t *zn) {
  const size_t max_block = 65535;
  const size_t blocks = n == 0 ? 1 : (n + max_block - 1) / max_block;
  const size_t total = 2 + n + 5 * blocks + 4;
  uint8_t *z = sp_xmalloc(total);
  size_t o = 0;
  z[o++] = 0x78; /* CM 8 (deflate), CINFO 7 (32K window) */
  z[o++] = 0x01; /* FLEVEL 0, no dictionary; 0x7801 % 31 == 0 */
  size_t done = 0;
  for (size_t b = 0; b < blocks; b++) {
    const size_t len = n - done < max_block ? n - done : max_block;
    z[o++] = (uint8_t)(b + 1 == blocks ? 1 : 0); /* BFINAL on the last */
    z[o++] = (uint8_t)(len & 0xff);
    z[o++] = (uint8_t)(len >> 8);
    z[o++] = (uint8_t)(~len & 0xff);
    z[o++] = (uint8_t)((~len >> 8) & 0xff);
    memcpy(z + o, raw + done, len);
    o += len;
    done += len;
  }
  put_be32(z + o, adler32(raw, n));
  o += 4;
  *zn = o;
  return z;
}

int rank_preview_write_png(const char *path, const float *latents, int64_t c, int64_t f,
                           int64_t h, int64_t w) {
  if (c != RANK_PREVIEW_CHANNELS) {
    sp_log_error("%s: preview needs latents with %d channels, got %lld", path,
                 RANK_PREVIEW_CHANNELS, (long long)c);
    return SP_ERR_INPUT;
  }
  /* PNG limits width and height to 2^31-1; the row and image byte counts,
   * and the zlib stream, must stay below 2^31-1 too (one IDAT chunk). */
  const int64_t lim = 0x7fffffff;
  if (f < 1 || h < 1 || w < 1 || f > lim / w || h > lim) {
    sp_log_error("%s: preview of latents [16,%lld,%lld,%lld] has an empty or too large "
                 "image", path, (long long)f, (long long)h, (long long)w);
    return SP_ERR_INPUT;
  }
  const int64_t width = f * w;
  if (width > (lim - 1) / 3 || h > (lim / 2) / (1 + 3 * width)) {
    sp_log_error("%s: preview image %lldx%lld is too large for one PNG chunk", path,
                 (long long)width, (long long)h);
    return SP_ERR_INPUT;
  }
  const size_t raw_n = (size_t)h * (size_t)(1 + 3 * width);

  char tmp[4200];
  int rc = rank_atomic_begin(path, tmp, sizeof tmp);
  if (rc != SP_OK) return rc; /* logged there */

  uint8_t *raw = sp_xmalloc(raw_n);
  render(latents, f, h, w, raw);
  size_t zn = 0;
  uint8_t *z = zlib_stored(raw, raw_n, &zn);

  FILE *fp = fopen(tmp, "wb");
  if (!fp) {
    sp_log_error("%s: cannot create the preview file '%s': %s", path, tmp, strerror(errno));
    rc = SP_ERR_RUNTIME;
    goto err_abort;
  }
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  uint8_t ihdr[13];
  put_be32(ihdr, (uint32_t)width);
  put_be32(ihdr + 4, (uint32_t)h);
  ihdr[8] = 8;  /* bit depth */
  ihdr[9] = 2;  /* colour type: truecolour RGB */
  ihdr[10] = 0; /* compression: deflate */
  ihdr[11] = 0; /* filter method 0 */
  ihdr[12] = 0; /* no interlace */
  if (fwrite(sig, 1, sizeof sig, fp) != sizeof sig || write_chunk(fp, "IHDR", ihdr, 13) != 0 ||
      write_chunk(fp, "IDAT", z, zn) != 0 || write_chunk(fp, "IEND", NULL, 0) != 0) {
    sp_log_error("%s: writing the preview failed: %s", path, strerror(errno));
    fclose(fp);
    rc = SP_ERR_RUNTIME;
    goto err_abort;
  }
  if (fclose(fp) != 0) {
    sp_log_error("%s: closing the preview failed: %s", path, strerror(errno));
    rc = SP_ERR_RUNTIME;
    goto err_abort;
  }
  free(z);
  free(raw);
  return rank_atomic_commit(tmp, path); /* logs its own failure */

err_abort:
  rank_atomic_abort(tmp);
  free(z);
  free(raw);
  return rc;
}
