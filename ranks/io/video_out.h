/* Video files from decoded frames: MP4/MKV/WebM through FFmpeg's libraries
 * (loaded when first used, so a machine without them runs everything else),
 * an HDF5 file (dataset "video" float32 (3, T, H, W) in [-1, 1]), or a
 * directory of PNG frames (libpng). Frames arrive in order, a chunk at a
 * time, as the decoder makes them; every output is written under a
 * temporary name and renamed into place on commit (rank_atomic_*), so a
 * failure leaves nothing half-written.
 *
 * Pixels: a value v in [-1, 1] becomes the 8-bit level round((v + 1) * 127.5)
 * (VAE.md "Pixels"). */
#ifndef RANK_VIDEO_OUT_H
#define RANK_VIDEO_OUT_H

#include <stdint.h>

typedef enum {
  VIDEO_OUT_H5 = 0,     /* *.h5 */
  VIDEO_OUT_FFMPEG = 1, /* *.mp4, *.mkv, *.webm, *.mov: container by extension */
  VIDEO_OUT_FRAMES = 2, /* a directory of frame_00000.png ... */
} video_out_kind;

#define VIDEO_OUT_DEFAULT_FPS 16 /* Wan's published sampling rate */

/* The kind of an output: frames_dir = 1 for a PNG directory, else from the
 * path's extension. Returns 0, or -1 with one line in err (an unknown
 * extension, naming the known ones). */
int video_out_kind_of(const char *path, int frames_dir, video_out_kind *out, char *err,
                      size_t errlen);

/* Everything that can be checked before decoding starts: the kind, the
 * parent directory exists and is writable, a frames directory is absent or
 * empty, and for FFmpeg kinds that the libraries load and have a muxer and
 * an encoder for the container (H.264 for MP4/MKV/MOV when present, VP9 or
 * VP8 for WebM, else the container's default). Logs one line naming the
 * path (and what is missing) and returns SP_ERR_INPUT, or SP_OK. */
int video_out_check(const char *path, int frames_dir, int64_t width, int64_t height,
                    double fps);

typedef struct video_out video_out;

/* Opens an output for T frames of width x height at fps. */
int video_out_open(const char *path, int frames_dir, int64_t frames, int64_t width,
                   int64_t height, double fps, video_out **out);
/* Appends n frames, channel-first (3, n, height, width) float in [-1, 1]
 * (values outside are clamped). */
int video_out_put(video_out *v, const float *frames, int64_t n);
/* Checks all T frames arrived, finishes the file and renames it into
 * place; frees v either way. */
int video_out_commit(video_out *v);
/* Removes the temporary output; frees v. */
void video_out_abort(video_out *v);

/* What the FFmpeg libraries found at run time: "libavformat 60.16.100 ...",
 * or why they could not be loaded. For --help and error lines. */
const char *video_out_ffmpeg_status(void);

#endif
