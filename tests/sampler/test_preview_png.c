/* Preview PNG tests.
 *
 * Without arguments: C-side checks (bad shapes and paths are rejected and
 * leave no file; a good write replaces an existing file and starts with the
 * PNG signature and the right IHDR).
 * With "--write OUT.png OUT.f32 F H W SEED": writes random latents
 * [16,F,H,W] (scaled so some colours clip) as the raw little-endian float32
 * file OUT.f32 and their preview OUT.png, for test_preview.sh to decode and
 * check independently with Python's zlib. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "noise.h"
#include "preview.h"

#include "sp_test.h"

static float *random_latents(uint64_t seed, int64_t f, int64_t h, int64_t w, size_t *n) {
  *n = (size_t)(16 * f * h * w);
  float *lat = malloc(*n * sizeof *lat);
  noise_fill(seed, lat, *n);
  for (size_t i = 0; i < *n; i++) lat[i] *= 2.0f; /* wide enough to clip */
  return lat;
}

static int write_mode(char **argv) {
  const int64_t f = atoll(argv[4]), h = atoll(argv[5]), w = atoll(argv[6]);
  const uint64_t seed = strtoull(argv[7], NULL, 10);
  size_t n;
  float *lat = random_latents(seed, f, h, w, &n);
  FILE *fp = fopen(argv[3], "wb");
  if (!fp || fwrite(lat, sizeof *lat, n, fp) != n || fclose(fp) != 0) {
    fprintf(stderr, "cannot write %s\n", argv[3]);
    return 1;
  }
  int rc = rank_preview_write_png(argv[2], lat, 16, f, h, w);
  free(lat);
  return rc;
}

static int exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

static size_t count_dir(const char *dir) { /* files in dir, temporaries included */
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
  FILE *p = popen(cmd, "r");
  size_t k = 0;
  if (p) {
    if (fscanf(p, "%zu", &k) != 1) k = 0;
    pclose(p);
  }
  return k;
}

int main(int argc, char **argv) {
  if (argc == 8 && strcmp(argv[1], "--write") == 0) return write_mode(argv);

  const uint64_t seed = sp_test_begin("test_preview");
  sp_log_set_level(0);
  char dir[] = "/tmp/sp_preview_XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  char path[512];
  snprintf(path, sizeof path, "%s/p.png", dir);
  size_t n;
  float *lat = random_latents(seed, 3, 4, 5, &n);

  CHECK(rank_preview_write_png(path, lat, 15, 3, 4, 5) == SP_ERR_INPUT, "15 channels accepted");
  CHECK(rank_preview_write_png(path, lat, 16, 0, 4, 5) == SP_ERR_INPUT, "0 frames accepted");
  CHECK(rank_preview_write_png(path, lat, 16, 3, 4, 1ll << 40) == SP_ERR_INPUT,
        "huge width accepted");
  CHECK(!exists(path) && count_dir(dir) == 0, "a rejected preview left a file");
  char bad[600];
  snprintf(bad, sizeof bad, "%s/no/such/dir/p.png", dir);
  CHECK(rank_preview_write_png(bad, lat, 16, 3, 4, 5) == SP_ERR_INPUT, "missing dir accepted");

  /* A good write over an existing file replaces it, leaves no temporary. */
  FILE *fp = fopen(path, "wb");
  if (fp) {
    fputs("old", fp);
    fclose(fp);
  }
  CHECK(rank_preview_write_png(path, lat, 16, 3, 4, 5) == SP_OK, "good write failed");
  CHECK(count_dir(dir) == 1, "temporary left beside the preview");
  uint8_t head[33] = {0};
  fp = fopen(path, "rb");
  size_t got = fp ? fread(head, 1, sizeof head, fp) : 0;
  if (fp) fclose(fp);
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  CHECK(got == 33 && memcmp(head, sig, 8) == 0, "no PNG signature");
  CHECK(memcmp(head + 12, "IHDR", 4) == 0 && head[11] == 13, "no IHDR first");
  uint32_t wid = (uint32_t)head[16] << 24 | head[17] << 16 | head[18] << 8 | head[19];
  uint32_t hei = (uint32_t)head[20] << 24 | head[21] << 16 | head[22] << 8 | head[23];
  CHECK(wid == 3 * 5 * 8 && hei == 4 * 8, "image %ux%u, want 120x32 (3 frames of 5x4 side by "
        "side, each 8x)", wid, hei);
  /* The scale halves while the image exceeds 2^26 pixels: 4 frames of
   * 1024x1024 in a 2x2 grid are 16384^2 pixels at 8x, 8192^2 = 2^26 at 4x. */
  CHECK(rank_preview_scale(4, 1024, 1024) == 4, "scale %lld, want 4",
        (long long)rank_preview_scale(4, 1024, 1024));
  CHECK(rank_preview_scale(1, 8192, 8192) == 1 && rank_preview_scale(1, 8193, 8192) == 0,
        "scale of a 2^26-position frame not 1, or of a larger one not 0");
  CHECK(rank_preview_frame(0, 4, 21) == 0 && rank_preview_frame(1, 4, 21) == 7 &&
            rank_preview_frame(2, 4, 21) == 13 && rank_preview_frame(3, 4, 21) == 20,
        "the frames of 4 tiles over 21 are not 0, 7, 13, 20");
  CHECK(head[24] == 8 && head[25] == 2, "not 8-bit RGB");

  unlink(path);
  rmdir(dir);
  free(lat);
  return sp_test_end();
}
