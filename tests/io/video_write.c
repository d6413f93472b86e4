/* The C side of test_video_files.sh: writes frames through video_out.h.
 *
 *   io_video_write IN.h5 FPS OUT...       each OUT from IN's dataset "video"
 *                                         (3, T, H, W): a path ending in '/'
 *                                         is a PNG frames directory. Frames
 *                                         go in as the VAE decoder makes
 *                                         them: 1, then 4 at a time.
 *   io_video_write --check OUT W H FPS    video_out_check alone
 *   io_video_write --status               video_out_ffmpeg_status
 *
 * Exit status: 0, or the first failing call's status (SP_ERR_INPUT = 2,
 * SP_ERR_RUNTIME = 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "tensor_io.h"
#include "video_out.h"

static int write_one(const rank_tensor *in, double fps, const char *arg) {
  char path[4096];
  snprintf(path, sizeof path, "%s", arg);
  size_t len = strlen(path);
  int frames_dir = len > 1 && path[len - 1] == '/';
  if (frames_dir) path[len - 1] = '\0';
  const int64_t T = in->dims[1], H = in->dims[2], W = in->dims[3], plane = H * W;
  video_out *v = NULL;
  int rc = video_out_open(path, frames_dir, T, W, H, fps, &v);
  if (rc != SP_OK) return rc;
  float *chunk = malloc(sizeof(float) * 3 * 4 * (size_t)plane);
  for (int64_t t = 0; t < T && rc == SP_OK;) {
    int64_t n = t == 0 ? 1 : (T - t < 4 ? T - t : 4);
    for (int c = 0; c < 3; c++)
      memcpy(chunk + (size_t)(c * n * plane), in->data + (size_t)((c * T + t) * plane),
             sizeof(float) * (size_t)(n * plane));
    rc = video_out_put(v, chunk, n);
    t += n;
  }
  free(chunk);
  if (rc != SP_OK) {
    video_out_abort(v);
    return rc;
  }
  return video_out_commit(v);
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--status") == 0) {
    printf("%s\n", video_out_ffmpeg_status());
    return 0;
  }
  if (argc == 6 && strcmp(argv[1], "--check") == 0) {
    char path[4096];
    snprintf(path, sizeof path, "%s", argv[2]);
    size_t len = strlen(path);
    int frames_dir = len > 1 && path[len - 1] == '/';
    if (frames_dir) path[len - 1] = '\0';
    return video_out_check(path, frames_dir, atoll(argv[3]), atoll(argv[4]), atof(argv[5]));
  }
  if (argc < 4) {
    fprintf(stderr, "usage: io_video_write IN.h5 FPS OUT... | --check OUT W H FPS | --status\n");
    return SP_ERR_INPUT;
  }
  rank_tensor in;
  int rc = rank_tensor_read(argv[1], "video", 4, &in);
  if (rc != SP_OK) return rc;
  if (in.dims[0] != 3) {
    fprintf(stderr, "%s: video has %lld channels, expected 3\n", argv[1], (long long)in.dims[0]);
    return SP_ERR_INPUT;
  }
  double fps = atof(argv[2]);
  for (int i = 3; i < argc && rc == SP_OK; i++) rc = write_one(&in, fps, argv[i]);
  rank_tensor_free(&in);
  return rc;
}
