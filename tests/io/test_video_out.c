/* The video writers (ranks/io/video_out.h) without external tools: the
 * pixel formula, the kinds, every check video_out_check makes, and that a
 * failure (abort, too few frames, too many frames) leaves nothing behind
 * for each kind. The files themselves are checked against ffprobe, ffmpeg,
 * h5py and a PNG reader by test_video_files.sh. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "sp_test.h"
#include "tensor_io.h"
#include "video_out.h"

static char g_dir[256]; /* the test's scratch directory */

/* Entries in dir besides . and .. (-1 when it cannot be listed). */
static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}

static void path_in(char *out, size_t n, const char *name) {
  snprintf(out, n, "%s/%s", g_dir, name);
}

/* 1 when the last logged error line contains s. */
static int last_error_has(const char *s) { return strstr(sp_log_last_error(), s) != NULL; }

/* ---- pixels --------------------------------------------------------------- */

static void test_levels(void) {
  const struct {
    float v;
    int level;
  } fixed[] = {
      {.v = -1.0f, .level = 0},   {.v = 1.0f, .level = 255},  {.v = 0.0f, .level = 128},
      {.v = -0.5f, .level = 64},  {.v = 0.5f, .level = 191},  {.v = 7.0f, .level = 255},
      {.v = -3.0f, .level = 0},   {.v = NAN, .level = 0},     {.v = INFINITY, .level = 255},
      {.v = -INFINITY, .level = 0},
  };
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    CHECK(video_out_level(fixed[i].v) == fixed[i].level, "level(%g) = %d, expected %d",
          fixed[i].v, video_out_level(fixed[i].v), fixed[i].level);
  /* Every level is the nearest one to (v + 1) * 127.5, ties up. */
  for (int i = 0; i < 100000; i++) {
    float v = (float)sp_rand_uniform(-1.2, 1.2);
    double x = ((v < -1 ? -1 : v > 1 ? 1 : v) + 1.0) * 127.5;
    int l = video_out_level(v);
    CHECK(fabs(x - l) < 0.5 || x - l == 0.5, "level(%.9g) = %d for %.9g", v, l, x);
    CHECK(video_out_clamp(v) == (v < -1 ? -1.0f : v > 1 ? 1.0f : v), "clamp(%.9g)", v);
  }
  /* Each level's exact midpoint below it rounds up to it. */
  for (int l = 1; l <= 255; l++) {
    float v = (float)((l - 0.5) / 127.5 - 1.0);
    double x = ((double)v + 1.0) * 127.5;
    int want = (int)floor(x + 0.5);
    CHECK(video_out_level(v) == want, "level(%.9g) = %d, expected %d", v, video_out_level(v),
          want);
  }
  CHECK(isnan(video_out_clamp(NAN)) == 0 && video_out_clamp(NAN) == -1.0f, "clamp(NaN) is -1");
}

/* ---- kinds and checks ----------------------------------------------------- */

static void test_kinds(void) {
  const struct {
    const char *path;
    int frames_dir;
    int ok;
    video_out_kind kind;
  } cases[] = {
      {.path = "a.h5", .ok = 1, .kind = VIDEO_OUT_H5},
      {.path = "d/A.H5", .ok = 1, .kind = VIDEO_OUT_H5},
      {.path = "a.mp4", .ok = 1, .kind = VIDEO_OUT_FFMPEG},
      {.path = "a.MKV", .ok = 1, .kind = VIDEO_OUT_FFMPEG},
      {.path = "a.mov", .ok = 1, .kind = VIDEO_OUT_FFMPEG},
      {.path = "a.webm", .ok = 1, .kind = VIDEO_OUT_FFMPEG},
      {.path = "frames.mp4", .frames_dir = 1, .ok = 1, .kind = VIDEO_OUT_FRAMES},
      {.path = "a.avi", .ok = 0},
      {.path = "a", .ok = 0},
      {.path = "dir.mp4/a", .ok = 0},
      {.path = "a.mp4.tmp", .ok = 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    video_out_kind k = (video_out_kind)-1;
    char err[256] = "";
    int rc = video_out_kind_of(cases[i].path, cases[i].frames_dir, &k, err, sizeof err);
    CHECK((rc == 0) == cases[i].ok, "%s: kind_of returned %d", cases[i].path, rc);
    if (cases[i].ok) CHECK(k == cases[i].kind, "%s: kind %d", cases[i].path, (int)k);
    if (!cases[i].ok)
      CHECK(strstr(err, cases[i].path) && strstr(err, ".webm") && strstr(err, ".h5"),
            "%s: the error names the path and the known extensions: %s", cases[i].path, err);
  }
}

static void test_checks(int have_ffmpeg) {
  char p[512], q[512];
  /* A missing parent directory, for every kind. */
  const char *missing[] = {"nodir/v.h5", "nodir/v.mp4", "nodir/frames"};
  for (int i = 0; i < 3; i++) {
    path_in(p, sizeof p, missing[i]);
    int rc = video_out_check(p, i == 2, 64, 48, 16);
    CHECK(rc == SP_ERR_INPUT && last_error_has("nodir"), "%s: rc %d, '%s'", p, rc,
          sp_log_last_error());
  }
  path_in(p, sizeof p, "v.avi");
  CHECK(video_out_check(p, 0, 64, 48, 16) == SP_ERR_INPUT && last_error_has(".avi"),
        "unknown extension: '%s'", sp_log_last_error());
  path_in(p, sizeof p, "v.h5");
  CHECK(video_out_check(p, 0, 64, 48, 16) == SP_OK, "a fresh .h5 passes");
  CHECK(video_out_check(p, 0, 0, 48, 16) == SP_ERR_INPUT, "width 0 is refused");
  CHECK(video_out_check(p, 0, 64, VIDEO_OUT_MAX_SIDE + 1, 16) == SP_ERR_INPUT,
        "a height over the limit is refused");
  CHECK(video_out_check(p, 0, 64, 48, 0) == SP_ERR_INPUT, "fps 0 is refused");
  CHECK(video_out_check(p, 0, 64, 48, NAN) == SP_ERR_INPUT, "fps NaN is refused");
  CHECK(video_out_check(p, 0, 65, 47, 16) == SP_OK, "odd sizes are fine in .h5");
  /* A file kind onto a directory. */
  path_in(p, sizeof p, "isdir.h5");
  CHECK(mkdir(p, 0777) == 0, "mkdir %s", p);
  CHECK(video_out_check(p, 0, 64, 48, 16) == SP_ERR_INPUT && last_error_has("directory"),
        "a directory named like a file: '%s'", sp_log_last_error());
  rmdir(p);
  /* Frames: absent or empty is fine; non-empty, or a file, is not. */
  path_in(p, sizeof p, "frames");
  CHECK(video_out_check(p, 1, 65, 47, 16) == SP_OK, "an absent frames directory passes");
  CHECK(mkdir(p, 0777) == 0, "mkdir %s", p);
  CHECK(video_out_check(p, 1, 65, 47, 16) == SP_OK, "an empty frames directory passes");
  path_in(q, sizeof q, "frames/old.png");
  FILE *f = fopen(q, "w");
  CHECK(f != NULL, "create %s", q);
  if (f) fclose(f);
  CHECK(video_out_check(p, 1, 64, 48, 16) == SP_ERR_INPUT && last_error_has("not empty"),
        "a non-empty frames directory: '%s'", sp_log_last_error());
  unlink(q);
  rmdir(p);
  path_in(p, sizeof p, "afile");
  f = fopen(p, "w");
  if (f) fclose(f);
  CHECK(video_out_check(p, 1, 64, 48, 16) == SP_ERR_INPUT && last_error_has("not a directory"),
        "frames onto a file: '%s'", sp_log_last_error());
  unlink(p);
  /* FFmpeg kinds: odd sizes are refused, whether or not FFmpeg loads. */
  path_in(p, sizeof p, "v.mp4");
  CHECK(video_out_check(p, 0, 65, 48, 16) == SP_ERR_INPUT && last_error_has("odd"),
        "odd width for yuv420p: '%s'", sp_log_last_error());
  if (have_ffmpeg) {
    CHECK(video_out_check(p, 0, 64, 48, 16) == SP_OK, "mp4 64x48 passes");
    CHECK(video_out_check(p, 0, 64, 48, 23.976) == SP_OK, "mp4 at 23.976 fps passes");
  } else {
    CHECK(video_out_check(p, 0, 64, 48, 16) == SP_ERR_INPUT && last_error_has("FFmpeg"),
          "without FFmpeg the check names it: '%s'", sp_log_last_error());
  }
  CHECK(count_entries(g_dir) == 0, "the checks created nothing (%d entries)",
        count_entries(g_dir));
}

/* ---- failures leave nothing ----------------------------------------------- */

enum { T = 5, H = 12, W = 16 };

/* Opens name for T frames, puts `put` frames of random values in chunks of
 * 1 and 2, then ends by `how`: 0 abort, 1 commit. Returns the last status. */
static int write_partial(const char *name, int frames_dir, int put, int how) {
  char p[512];
  path_in(p, sizeof p, name);
  video_out *v = NULL;
  int rc = video_out_open(p, frames_dir, T, W, H, 16, &v);
  CHECK(rc == SP_OK, "%s: open returned %d", name, rc);
  if (rc != SP_OK) return rc;
  float *buf = sp_test_malloc(sizeof(float) * 3 * 2 * H * W);
  for (int done = 0; done < put && rc == SP_OK;) {
    int n = done == 0 ? 1 : (put - done >= 2 ? 2 : 1);
    sp_rand_fill(buf, 3 * n * H * W, -1.3, 1.3);
    rc = video_out_put(v, buf, n);
    CHECK(rc == SP_OK, "%s: put %d frames after %d returned %d", name, n, done, rc);
    done += n;
  }
  free(buf);
  if (how == 0) {
    video_out_abort(v);
    return SP_OK;
  }
  return video_out_commit(v);
}

static void test_failures(int have_ffmpeg) {
  const struct {
    const char *name;
    int frames_dir, ffmpeg;
  } kinds[] = {
      {.name = "v.h5"},
      {.name = "frames", .frames_dir = 1},
      {.name = "v.mp4", .ffmpeg = 1},
      {.name = "v.mkv", .ffmpeg = 1},
  };
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    if (kinds[i].ffmpeg && !have_ffmpeg) {
      printf("skip %s: FFmpeg not loadable here: %s\n", kinds[i].name, video_out_ffmpeg_status());
      continue;
    }
    const char *n = kinds[i].name;
    int fd = kinds[i].frames_dir;
    write_partial(n, fd, 3, 0);
    CHECK(count_entries(g_dir) == 0, "%s: abort left %d entries", n, count_entries(g_dir));
    int rc = write_partial(n, fd, 3, 1);
    CHECK(rc == SP_ERR_RUNTIME && last_error_has("3 of 5 frames"),
          "%s: commit with too few frames: rc %d, '%s'", n, rc, sp_log_last_error());
    CHECK(count_entries(g_dir) == 0, "%s: a short commit left %d entries", n,
          count_entries(g_dir));
    /* One frame too many: the put fails, and so does the commit after it. */
    char p[512];
    path_in(p, sizeof p, n);
    video_out *v = NULL;
    if (video_out_open(p, fd, 1, W, H, 16, &v) == SP_OK) {
      float *buf = sp_test_malloc(sizeof(float) * 3 * 2 * H * W);
      sp_rand_fill(buf, 3 * 2 * H * W, -1, 1);
      CHECK(video_out_put(v, buf, 2) == SP_ERR_RUNTIME && last_error_has("more than the 1"),
            "%s: 2 frames into a 1-frame video: '%s'", n, sp_log_last_error());
      CHECK(video_out_commit(v) == SP_ERR_RUNTIME, "%s: commit after a failed put", n);
      free(buf);
    }
    CHECK(count_entries(g_dir) == 0, "%s: a failed put left %d entries", n,
          count_entries(g_dir));
    /* A complete write lands under the final name and nothing else. */
    rc = write_partial(n, fd, T, 1);
    CHECK(rc == SP_OK, "%s: a complete write returned %d", n, rc);
    CHECK(count_entries(g_dir) == 1 && access(p, F_OK) == 0, "%s: %d entries after commit", n,
          count_entries(g_dir));
    if (fd) CHECK(count_entries(p) == T, "%s: %d frames", n, count_entries(p));
    /* A second write is refused for frames (non-empty), replaces a file. */
    if (fd) {
      CHECK(video_out_check(p, 1, W, H, 16) == SP_ERR_INPUT, "frames: a second write refused");
      char f[600];
      for (int t = 0; t < T; t++) {
        snprintf(f, sizeof f, "%s/frame_%05d.png", p, t);
        CHECK(unlink(f) == 0, "frame %s exists", f);
      }
      rmdir(p);
    } else {
      CHECK(write_partial(n, fd, T, 1) == SP_OK, "%s: a rewrite replaces the file", n);
      unlink(p);
    }
    CHECK(count_entries(g_dir) == 0, "%s: %d entries left", n, count_entries(g_dir));
  }
}

/* The .h5 output holds the clamped input exactly, with its attributes, when
 * frames arrive in uneven chunks. */
static void test_h5_roundtrip(void) {
  char p[512];
  path_in(p, sizeof p, "round.h5");
  const int64_t n = 3 * T * H * W;
  float *in = sp_test_malloc(sizeof(float) * (size_t)n);
  sp_rand_fill(in, n, -1.5, 1.5);
  video_out *v = NULL;
  int rc = video_out_open(p, 0, T, W, H, 12.5, &v);
  CHECK(rc == SP_OK, "open %s", p);
  if (rc != SP_OK) return;
  const int chunks[] = {1, 3, 1};
  int t0 = 0;
  for (int c = 0; c < 3; c++) {
    int k = chunks[c];
    float *buf = sp_test_malloc(sizeof(float) * 3 * (size_t)k * H * W);
    for (int ch = 0; ch < 3; ch++)
      memcpy(buf + (size_t)ch * k * H * W, in + ((size_t)ch * T + t0) * H * W,
             sizeof(float) * (size_t)k * H * W);
    CHECK(video_out_put(v, buf, k) == SP_OK, "put chunk %d", c);
    free(buf);
    t0 += k;
  }
  CHECK(video_out_commit(v) == SP_OK, "commit %s", p);
  rank_tensor t;
  if (rank_tensor_read(p, "video", 4, &t) == SP_OK) {
    CHECK(t.dims[0] == 3 && t.dims[1] == T && t.dims[2] == H && t.dims[3] == W,
          "shape (%lld, %lld, %lld, %lld)", (long long)t.dims[0], (long long)t.dims[1],
          (long long)t.dims[2], (long long)t.dims[3]);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
      float want = in[i] < -1 ? -1.0f : in[i] > 1 ? 1.0f : in[i];
      bad += t.data[i] != want;
    }
    CHECK(bad == 0, "%lld values differ from the clamped input", (long long)bad);
    rank_tensor_free(&t);
  } else {
    CHECK(0, "read back %s", p);
  }
  unlink(p);
  free(in);
}

int main(void) {
  sp_test_begin("io/video_out");
  snprintf(g_dir, sizeof g_dir, "%s/sp-video-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(g_dir)) {
    perror("mkdtemp");
    return 1;
  }
  const char *status = video_out_ffmpeg_status();
  int have_ffmpeg = strncmp(status, "libavformat", 11) == 0;
  printf("ffmpeg: %s\n", status);
  test_levels();
  test_kinds();
  test_checks(have_ffmpeg);
  test_failures(have_ffmpeg);
  test_h5_roundtrip();
  rmdir(g_dir);
  return sp_test_end();
}
