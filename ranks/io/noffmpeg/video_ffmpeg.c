/* The FFmpeg writer of a build made without FFmpeg's headers (see
 * video_backend.h): every FFmpeg kind is refused at check time with the
 * reason and the fix; .h5 and PNG outputs are unaffected. */
#include "log.h"
#include "video_backend.h"

static const char g_why[] =
    "this staticpipe was built without FFmpeg's headers, so it writes no .mp4/.mkv/.mov/.webm: "
    "install libavcodec-dev libavformat-dev libswscale-dev libavutil-dev and rebuild (.h5 and "
    "PNG outputs work as is)";

int video_ffmpeg_check(const char *path, const video_container *c, int64_t width,
                       int64_t height, double fps) {
  sp_log_error("%s: %s", path, g_why);
  return SP_ERR_INPUT;
}

int video_ffmpeg_open(const char *path, const char *tmp, const video_container *c,
                      int64_t width, int64_t height, double fps, video_ffmpeg **out) {
  return video_ffmpeg_check(path, c, width, height, fps);
}

/* Never reached: no writer is ever opened. */
int video_ffmpeg_put(video_ffmpeg *e, const uint8_t *rgb) { return SP_ERR_RUNTIME; }
int video_ffmpeg_finish(video_ffmpeg *e) { return SP_ERR_RUNTIME; }
void video_ffmpeg_close(video_ffmpeg *e) {}

const char *video_ffmpeg_status(void) { return g_why; }
