/* Input videos: the frames of a video file (.mp4, .mkv, .mov, .webm, any
 * container and codec the FFmpeg at hand decodes), as 8-bit RGB, through
 * FFmpeg's libraries opened with dlopen (ranks/io/ffmpeg/; a build without
 * FFmpeg's headers refuses video files: ranks/io/noffmpeg/).
 *
 * The first video stream is decoded in order; each frame is converted to
 * RGB24 by libswscale (bicubic, accurate rounding, full chroma
 * interpolation) with the frame's own colour matrix and range (BT.601
 * when the file names none), as FFmpeg's command line converts it. Every
 * frame must have the first one's size. */
#ifndef RANK_VIDEO_IN_H
#define RANK_VIDEO_IN_H

#include <stdint.h>

typedef struct rank_video {
  int64_t T, h, w;
  uint8_t *rgb; /* (T, h, w, 3) row-major */
} rank_video;

/* Decodes at most max_frames frames of path (0: all, up to max_bytes of
 * RGB), what naming it in messages ("--video x.mp4"). SP_OK, or
 * SP_ERR_INPUT after one line naming the file and the check (FFmpeg not
 * usable, no video stream, a damaged file, no frame, frames of changing
 * size, more than max_bytes), or SP_ERR_RUNTIME (out of memory). */
int rank_video_read(const char *what, const char *path, int64_t max_frames, int64_t max_bytes,
                    rank_video *out);
void rank_video_free(rank_video *v);

#endif
