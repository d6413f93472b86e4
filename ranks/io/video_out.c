/* Video files from decoded frames (see video_out.h): the kind and the
 * checks, the pixel formula, and the frame loop that feeds the writers. */
#include "video_out.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "log.h"
#include "tensor_io.h"
#include "video_backend.h"

/* ---- kinds ---------------------------------------------------------------- */

#define H5_EXT ".h5"

static const video_container g_containers[] = {
    {.ext = ".mp4", .muxer = "mp4", .encoders = {"libx264", NULL}},
    {.ext = ".mkv", .muxer = "matroska", .encoders = {"libx264", NULL}},
    {.ext = ".mov", .muxer = "mov", .encoders = {"libx264", NULL}},
    {.ext = ".webm", .muxer = "webm", .encoders = {"libvpx-vp9", "libvpx", NULL}},
};
#define N_CONTAINERS (sizeof g_containers / sizeof g_containers[0])

/* The extension of path's last component ("" when none). */
static const char *path_ext(const char *path) {
  const char *slash = strrchr(path, '/');
  const char *dot = strrchr(slash ? slash + 1 : path, '.');
  return dot ? dot : "";
}

static const video_container *container_of(const char *path) {
  const char *ext = path_ext(path);
  for (size_t i = 0; i < N_CONTAINERS; i++)
    if (strcasecmp(ext, g_containers[i].ext) == 0) return &g_containers[i];
  return NULL;
}

int video_out_kind_of(const char *path, int frames_dir, video_out_kind *out, char *err,
                      size_t errlen) {
  if (frames_dir) {
    *out = VIDEO_OUT_FRAMES;
    return 0;
  }
  if (strcasecmp(path_ext(path), H5_EXT) == 0) {
    *out = VIDEO_OUT_H5;
    return 0;
  }
  if (container_of(path)) {
    *out = VIDEO_OUT_FFMPEG;
    return 0;
  }
  char known[128];
  int w = snprintf(known, sizeof known, "%s", H5_EXT);
  for (size_t i = 0; i < N_CONTAINERS && w > 0 && (size_t)w < sizeof known; i++)
    w += snprintf(known + w, sizeof known - (size_t)w, " %s", g_containers[i].ext);
  snprintf(err, errlen, "%s: unknown video extension '%s': known are %s, or a directory of PNG "
           "frames", path, path_ext(path), known);
  return -1;
}

/* ---- pixels --------------------------------------------------------------- */

float video_out_clamp(float v) { return v > 1.0f ? 1.0f : v >= -1.0f ? v : -1.0f; }

uint8_t video_out_level(float v) {
  /* (c + 1) * 127.5 is exact in double for any float c, so the rounding is
   * the only step that decides the level. */
  return (uint8_t)floor(((double)video_out_clamp(v) + 1.0) * 127.5 + 0.5);
}

/* Frame i of a (3, n, height, width) chunk as packed RGB24 (height, width, 3). */
static void frame_to_rgb(const float *frames, int64_t n, int64_t i, int64_t height,
                         int64_t width, uint8_t *rgb) {
  const int64_t plane = height * width;
  for (int c = 0; c < 3; c++) {
    const float *src = frames + ((int64_t)c * n + i) * plane;
    for (int64_t p = 0; p < plane; p++) rgb[p * 3 + c] = video_out_level(src[p]);
  }
}

/* ---- checks --------------------------------------------------------------- */

/* 1 when dir holds anything besides . and .., 0 when empty, -1 on error. */
static int dir_has_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int found = 0;
  struct dirent *e;
  while (!found && (e = readdir(d)) != NULL)
    found = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return found;
}

/* The target itself: a file kind must not name a directory; a frames
 * directory must be absent or an empty directory. */
static int check_target(const char *path, video_out_kind kind) {
  struct stat st;
  if (stat(path, &st) != 0) return SP_OK; /* absent: the parent is checked apart */
  if (kind != VIDEO_OUT_FRAMES) {
    if (S_ISDIR(st.st_mode)) {
      sp_log_error("%s: is a directory; a video file cannot replace it", path);
      return SP_ERR_INPUT;
    }
    return SP_OK;
  }
  if (!S_ISDIR(st.st_mode)) {
    sp_log_error("%s: exists and is not a directory; PNG frames need an absent or empty "
                 "directory", path);
    return SP_ERR_INPUT;
  }
  int full = dir_has_entries(path);
  if (full != 0) {
    sp_log_error("%s: %s; PNG frames need an absent or empty directory", path,
                 full < 0 ? "cannot be listed" : "exists and is not empty");
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

int video_out_check(const char *path, int frames_dir, int64_t width, int64_t height,
                    double fps) {
  video_out_kind kind;
  char err[512];
  if (video_out_kind_of(path, frames_dir, &kind, err, sizeof err) != 0) {
    sp_log_error("%s", err);
    return SP_ERR_INPUT;
  }
  if (width < 1 || height < 1 || width > VIDEO_OUT_MAX_SIDE || height > VIDEO_OUT_MAX_SIDE) {
    sp_log_error("%s: video size %lldx%lld (width x height) is outside 1 to %d", path,
                 (long long)width, (long long)height, VIDEO_OUT_MAX_SIDE);
    return SP_ERR_INPUT;
  }
  if (!(fps > 0.0) || fps > VIDEO_OUT_MAX_FPS) {
    sp_log_error("%s: fps %g is outside (0, %d]", path, fps, VIDEO_OUT_MAX_FPS);
    return SP_ERR_INPUT;
  }
  if (kind == VIDEO_OUT_FFMPEG && (width % 2 != 0 || height % 2 != 0)) {
    sp_log_error("%s: video size %lldx%lld (width x height) is odd; yuv420p halves the colour "
                 "resolution and needs even sizes (write .h5 or PNG frames instead)",
                 path, (long long)width, (long long)height);
    return SP_ERR_INPUT;
  }
  /* The atomic helper checks the parent directory (exists, writable). */
  char tmp[4096];
  int rc = rank_atomic_begin(path, tmp, sizeof tmp);
  if (rc != SP_OK) return SP_ERR_INPUT;
  rank_atomic_abort(tmp);
  if ((rc = check_target(path, kind)) != SP_OK) return rc;
  if (kind == VIDEO_OUT_FFMPEG)
    return video_ffmpeg_check(path, container_of(path), width, height, fps);
  return SP_OK;
}

/* ---- the output ----------------------------------------------------------- */

struct video_out {
  video_out_kind kind;
  char path[4096];
  char tmp[4096]; /* FFmpeg file or frames directory; H5 keeps its own */
  int64_t frames, width, height, done;
  double fps;
  int failed;        /* a put failed: only abort is left */
  rank_outfile *h5;  /* VIDEO_OUT_H5 */
  video_ffmpeg *ff;  /* VIDEO_OUT_FFMPEG */
  uint8_t *rgb;      /* (height, width, 3): one frame for FFmpeg and PNG */
};

/* Removes the temporary frames directory and everything in it (all of it
 * written here). */
static void remove_frames_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    char file[4096 + 256];
    while ((e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      snprintf(file, sizeof file, "%s/%s", dir, e->d_name);
      unlink(file);
    }
    closedir(d);
  }
  rmdir(dir);
  rank_atomic_abort(dir);
}

static int open_h5(video_out *v) {
  int rc = rank_outfile_open(v->path, &v->h5);
  if (rc != SP_OK) return rc;
  const int64_t dims[4] = {3, v->frames, v->height, v->width};
  if ((rc = rank_outfile_create(v->h5, "video", 4, dims)) != SP_OK ||
      (rc = rank_outfile_attr_f64(v->h5, "fps", v->fps)) != SP_OK ||
      (rc = rank_outfile_attr_i64(v->h5, "frames", v->frames)) != SP_OK) {
    rank_outfile_abort(v->h5);
    v->h5 = NULL;
  }
  return rc;
}

int video_out_open(const char *path, int frames_dir, int64_t frames, int64_t width,
                   int64_t height, double fps, video_out **out) {
  int rc = video_out_check(path, frames_dir, width, height, fps);
  if (rc != SP_OK) return rc;
  if (frames < 1 || frames > (INT64_C(1) << 31)) {
    sp_log_error("%s: %lld frames asked for; 1 to 2^31 allowed", path, (long long)frames);
    return SP_ERR_INPUT;
  }
  video_out *v = sp_xcalloc(1, sizeof *v);
  video_out_kind_of(path, frames_dir, &v->kind, NULL, 0);
  snprintf(v->path, sizeof v->path, "%s", path);
  v->frames = frames;
  v->width = width;
  v->height = height;
  v->fps = fps;
  if (v->kind == VIDEO_OUT_H5) {
    rc = open_h5(v);
  } else {
    v->rgb = sp_xmalloc((size_t)(width * height * 3));
    rc = rank_atomic_begin(path, v->tmp, sizeof v->tmp);
    if (rc == SP_OK && v->kind == VIDEO_OUT_FFMPEG) {
      rc = video_ffmpeg_open(path, v->tmp, container_of(path), width, height, fps, &v->ff);
      if (rc != SP_OK) rank_atomic_abort(v->tmp);
    } else if (rc == SP_OK && mkdir(v->tmp, 0777) != 0) {
      sp_log_error("%s: cannot create the temporary directory '%s': %s", path, v->tmp,
                   strerror(errno));
      rank_atomic_abort(v->tmp);
      rc = SP_ERR_RUNTIME;
    }
  }
  if (rc != SP_OK) {
    free(v->rgb);
    free(v);
    return rc;
  }
  *out = v;
  return SP_OK;
}

static int put_h5(video_out *v, const float *frames, int64_t n) {
  const int64_t numel = 3 * n * v->height * v->width;
  float *clamped = sp_xmalloc((size_t)numel * sizeof *clamped);
  for (int64_t i = 0; i < numel; i++) clamped[i] = video_out_clamp(frames[i]);
  const int64_t start[4] = {0, v->done, 0, 0}, count[4] = {3, n, v->height, v->width};
  int rc = rank_outfile_put_box(v->h5, "video", start, count, clamped);
  free(clamped);
  return rc;
}

int video_out_put(video_out *v, const float *frames, int64_t n) {
  if (v->failed) return SP_ERR_RUNTIME;
  if (n < 0 || n > v->frames - v->done) {
    sp_log_error("%s: %lld frames put after %lld, more than the %lld the video was opened for",
                 v->path, (long long)n, (long long)v->done, (long long)v->frames);
    v->failed = 1;
    return SP_ERR_RUNTIME;
  }
  int rc = SP_OK;
  if (v->kind == VIDEO_OUT_H5) {
    rc = n > 0 ? put_h5(v, frames, n) : SP_OK;
  } else {
    for (int64_t i = 0; i < n && rc == SP_OK; i++) {
      frame_to_rgb(frames, n, i, v->height, v->width, v->rgb);
      if (v->kind == VIDEO_OUT_FFMPEG) {
        rc = video_ffmpeg_put(v->ff, v->rgb);
      } else {
        char file[4096 + 32];
        snprintf(file, sizeof file, "%s/frame_%05lld.png", v->tmp, (long long)(v->done + i));
        rc = video_png_write(v->path, file, v->rgb, v->width, v->height);
      }
    }
  }
  if (rc != SP_OK) {
    v->failed = 1;
    return rc;
  }
  v->done += n;
  return SP_OK;
}

int video_out_commit(video_out *v) {
  if (v->failed || v->done != v->frames) {
    if (!v->failed)
      sp_log_error("%s: %lld of %lld frames arrived; nothing written", v->path,
                   (long long)v->done, (long long)v->frames);
    video_out_abort(v);
    return SP_ERR_RUNTIME;
  }
  int rc;
  if (v->kind == VIDEO_OUT_H5) {
    rc = rank_outfile_commit(v->h5);
  } else if (v->kind == VIDEO_OUT_FFMPEG) {
    rc = video_ffmpeg_finish(v->ff);
    if (rc == SP_OK)
      rc = rank_atomic_commit(v->tmp, v->path);
    else
      rank_atomic_abort(v->tmp);
  } else {
    rc = rank_atomic_commit(v->tmp, v->path);
    if (rc != SP_OK) remove_frames_dir(v->tmp);
  }
  free(v->rgb);
  free(v);
  return rc;
}

void video_out_abort(video_out *v) {
  if (!v) return;
  if (v->kind == VIDEO_OUT_H5) {
    rank_outfile_abort(v->h5);
  } else if (v->kind == VIDEO_OUT_FFMPEG) {
    video_ffmpeg_close(v->ff);
    rank_atomic_abort(v->tmp);
  } else {
    remove_frames_dir(v->tmp);
  }
  free(v->rgb);
  free(v);
}

const char *video_out_ffmpeg_status(void) { return video_ffmpeg_status(); }
