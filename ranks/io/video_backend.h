/* The writers behind video_out.h, internal to io/: video_out.c checks the
 * path, converts the frames to 8-bit RGB and hands them to the FFmpeg
 * writer (ffmpeg/video_ffmpeg.c, or the stand-in noffmpeg/video_ffmpeg.c of
 * a build without FFmpeg's headers) or the PNG writer (video_png.c). Each
 * function logs its own errors, one line naming the path. */
#ifndef RANK_VIDEO_BACKEND_H
#define RANK_VIDEO_BACKEND_H

#include <stdint.h>

/* A container FFmpeg writes, chosen by the output's extension. */
typedef struct video_container {
  const char *ext;         /* ".mp4" */
  const char *muxer;       /* FFmpeg's short muxer name: "mp4" */
  const char *encoders[3]; /* tried in order (NULL ends), then the muxer's default */
} video_container;

typedef struct video_ffmpeg video_ffmpeg;

/* The muxer and an encoder exist and the encoder opens at width x height
 * and fps (the caller has checked sizes and fps). SP_OK or SP_ERR_INPUT. */
int video_ffmpeg_check(const char *path, const video_container *c, int64_t width,
                       int64_t height, double fps);
/* Starts writing to tmp (path names the output in messages). SP_OK,
 * SP_ERR_INPUT (FFmpeg unusable) or SP_ERR_RUNTIME; *out only on success. */
int video_ffmpeg_open(const char *path, const char *tmp, const video_container *c,
                      int64_t width, int64_t height, double fps, video_ffmpeg **out);
/* Encodes one frame, packed RGB24 (height, width, 3). */
int video_ffmpeg_put(video_ffmpeg *e, const uint8_t *rgb);
/* Flushes the encoder, writes the trailer, closes tmp; frees e either way. */
int video_ffmpeg_finish(video_ffmpeg *e);
/* Closes tmp without finishing it (the caller removes it); frees e. */
void video_ffmpeg_close(video_ffmpeg *e);
const char *video_ffmpeg_status(void);

/* Writes one 8-bit RGB PNG of packed RGB24 (height, width, 3) to file
 * (path names the output in messages). SP_OK or SP_ERR_RUNTIME. */
int video_png_write(const char *path, const char *file, const uint8_t *rgb, int64_t width,
                    int64_t height);

#endif
