/* Video files from decoded frames: MP4/MKV/MOV/WebM through FFmpeg's
 * libraries (loaded when first used, so a machine without them runs
 * everything else), an HDF5 file (dataset "video" float32 (3, T, H, W) in
 * [-1, 1]), or a directory of PNG frames (libpng). Frames arrive in order, a
 * chunk at a time, as the decoder makes them; every output is written under
 * a temporary name and renamed into place on commit (rank_atomic_*), so a
 * failure leaves nothing half-written.
 *
 * Pixels (VAE.md "Pixels"): a value v becomes the 8-bit level
 *   round((clamp(v, -1, 1) + 1) * 127.5)
 * (round half up; NaN counts as -1): video_out_level. The HDF5 output holds
 * clamp(v, -1, 1) itself: video_out_clamp.
 *
 * The kinds:
 * - HDF5 (*.h5): dataset "video" float32 (3, T, H, W), attributes "fps"
 *   (float64) and "frames" (int64); written frame chunk by frame chunk.
 * - FFmpeg (*.mp4, *.mkv, *.mov, *.webm): yuv420p through sws_scale (BT.601,
 *   limited range, tagged so), frame i at time i / fps (time base 1 / fps).
 *   MP4/MKV/MOV: H.264 by libx264 at crf 18, preset medium (visually
 *   lossless for most content), else the container's default encoder at a
 *   fixed quantiser; WebM: VP9 by libvpx-vp9 at crf 24 (constant quality),
 *   else VP8 by libvpx. 4:2:0 halves the chroma in both directions, so width
 *   and height must be even: an odd size is refused at check time (decoded
 *   Wan videos are 8x the latent size, always even), never padded.
 *   The libraries are the sonames of the headers built against
 *   ("libavformat.so.59" for FFmpeg 5.1 headers), from the loader's search
 *   path, or from the folder in the environment variable SP_FFMPEG_LIBDIR
 *   when it is set (FFmpeg installed in a non-standard place). A build
 *   without FFmpeg's headers has no FFmpeg kinds and says so.
 * - PNG frames (frames_dir = 1): a directory of frame_00000.png ...,
 *   8-bit RGB; written into a hidden temporary directory beside the target
 *   and renamed at commit. The target must be absent or an empty
 *   directory. A signal during the write can leave that hidden directory
 *   behind (the signal handler removes files, not directories); an error or
 *   an abort removes it. */
#ifndef RANK_VIDEO_OUT_H
#define RANK_VIDEO_OUT_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
  VIDEO_OUT_H5 = 0,     /* *.h5 */
  VIDEO_OUT_FFMPEG = 1, /* *.mp4, *.mkv, *.webm, *.mov: container by extension */
  VIDEO_OUT_FRAMES = 2, /* a directory of frame_00000.png ... */
} video_out_kind;

#define VIDEO_OUT_DEFAULT_FPS 16 /* Wan's published sampling rate */
#define VIDEO_OUT_MAX_FPS 1000   /* fps accepted: (0, VIDEO_OUT_MAX_FPS] */
#define VIDEO_OUT_MAX_SIDE 16384 /* width and height accepted: 1 to this */

/* The 8-bit level of v (the formula above). */
uint8_t video_out_level(float v);
/* v clamped to [-1, 1]; NaN becomes -1. */
float video_out_clamp(float v);

/* The kind of an output: frames_dir = 1 for a PNG directory, else from the
 * path's extension (lower or upper case). Returns 0, or -1 with one line in
 * err (an unknown extension, naming the known ones). Logs nothing. */
int video_out_kind_of(const char *path, int frames_dir, video_out_kind *out, char *err,
                      size_t errlen);

/* Everything that can be checked before decoding starts: the kind, the
 * size (1 to VIDEO_OUT_MAX_SIDE; even for FFmpeg kinds) and fps, the parent
 * directory exists and is writable, the target is not a directory (files)
 * or is absent or an empty directory (frames), and for FFmpeg kinds that
 * the libraries load, have a muxer for the container and an encoder for it
 * that opens at this size. Logs one line naming the path (and what is
 * missing) and returns SP_ERR_INPUT, or SP_OK. Creates nothing. */
int video_out_check(const char *path, int frames_dir, int64_t width, int64_t height,
                    double fps);

typedef struct video_out video_out;

/* Opens an output for frames (>= 1) frames of width x height at fps: runs
 * video_out_check, then creates the temporary output. Returns SP_OK,
 * SP_ERR_INPUT (the check failed) or SP_ERR_RUNTIME (creating failed),
 * each after one logged line; *out is written only on success. */
int video_out_open(const char *path, int frames_dir, int64_t frames, int64_t width,
                   int64_t height, double fps, video_out **out);
/* Appends n frames, channel-first (3, n, height, width) float, C-order
 * (values outside [-1, 1] are clamped). More frames than opened for is an
 * error. Returns SP_OK or SP_ERR_RUNTIME (logged); after an error the only
 * call left is video_out_abort. */
int video_out_put(video_out *v, const float *frames, int64_t n);
/* Checks all frames arrived, finishes the file (FFmpeg: flushes the
 * encoder, writes the trailer) and renames it into place; on any failure
 * removes the temporary output and leaves the target untouched. Frees v
 * either way. Returns SP_OK or SP_ERR_RUNTIME (logged). */
int video_out_commit(video_out *v);
/* Removes the temporary output; frees v (NULL is fine). */
void video_out_abort(video_out *v);

/* What the FFmpeg libraries found at run time ("libavformat 59.27.100,
 * libavcodec ..., FFmpeg 5.1.9"), or why they could not be loaded, or that
 * the build has no FFmpeg. Loads them on first call. For --help and error
 * lines. */
const char *video_out_ffmpeg_status(void);

#endif
