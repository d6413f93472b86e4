/* FFmpeg's libraries inside io/ffmpeg/ (never linked: opened with dlopen
 * at first use by the sonames of the headers' major versions, so a binary
 * built here starts on a machine without FFmpeg; only a video file asks for
 * it): the table of every function the writer (video_ffmpeg.c) and the
 * reader (video_ffmpeg_in.c) call, its loading, and the error line of a
 * failed call. Internal to io/ffmpeg/. */
#ifndef RANK_FFMPEG_LIB_H
#define RANK_FFMPEG_LIB_H

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avutil.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>

enum { LIB_AVUTIL, LIB_SWSCALE, LIB_AVCODEC, LIB_AVFORMAT, N_LIBS };

/* Every FFmpeg function called here, with the library that has it. */
#define AV_FUNCTIONS(X)                                                                  \
  X(LIB_AVUTIL, avutil_version)                                                          \
  X(LIB_AVUTIL, av_version_info)                                                         \
  X(LIB_AVUTIL, av_strerror)                                                             \
  X(LIB_AVUTIL, av_log_set_callback)                                                     \
  X(LIB_AVUTIL, av_log_format_line)                                                      \
  X(LIB_AVUTIL, av_frame_alloc)                                                          \
  X(LIB_AVUTIL, av_frame_free)                                                           \
  X(LIB_AVUTIL, av_frame_get_buffer)                                                     \
  X(LIB_AVUTIL, av_frame_make_writable)                                                  \
  X(LIB_AVUTIL, av_opt_set)                                                              \
  X(LIB_AVUTIL, av_dict_set)                                                             \
  X(LIB_AVUTIL, av_dict_free)                                                            \
  X(LIB_AVUTIL, av_d2q)                                                                  \
  X(LIB_AVUTIL, av_frame_unref)                                                          \
  X(LIB_SWSCALE, swscale_version)                                                        \
  X(LIB_SWSCALE, sws_getContext)                                                         \
  X(LIB_SWSCALE, sws_scale)                                                              \
  X(LIB_SWSCALE, sws_freeContext)                                                        \
  X(LIB_SWSCALE, sws_getCoefficients)                                                    \
  X(LIB_SWSCALE, sws_setColorspaceDetails)                                               \
  X(LIB_AVCODEC, avcodec_version)                                                        \
  X(LIB_AVCODEC, avcodec_find_encoder)                                                   \
  X(LIB_AVCODEC, avcodec_find_encoder_by_name)                                           \
  X(LIB_AVCODEC, avcodec_alloc_context3)                                                 \
  X(LIB_AVCODEC, avcodec_free_context)                                                   \
  X(LIB_AVCODEC, avcodec_open2)                                                          \
  X(LIB_AVCODEC, avcodec_send_frame)                                                     \
  X(LIB_AVCODEC, avcodec_receive_packet)                                                 \
  X(LIB_AVCODEC, avcodec_parameters_from_context)                                        \
  X(LIB_AVCODEC, av_packet_alloc)                                                        \
  X(LIB_AVCODEC, av_packet_free)                                                         \
  X(LIB_AVCODEC, av_packet_rescale_ts)                                                   \
  X(LIB_AVCODEC, av_packet_unref)                                                        \
  X(LIB_AVCODEC, avcodec_find_decoder)                                                   \
  X(LIB_AVCODEC, avcodec_parameters_to_context)                                          \
  X(LIB_AVCODEC, avcodec_send_packet)                                                    \
  X(LIB_AVCODEC, avcodec_receive_frame)                                                  \
  X(LIB_AVFORMAT, avformat_version)                                                      \
  X(LIB_AVFORMAT, av_guess_format)                                                       \
  X(LIB_AVFORMAT, avformat_query_codec)                                                  \
  X(LIB_AVFORMAT, avformat_alloc_output_context2)                                        \
  X(LIB_AVFORMAT, avformat_free_context)                                                 \
  X(LIB_AVFORMAT, avformat_new_stream)                                                   \
  X(LIB_AVFORMAT, avformat_write_header)                                                 \
  X(LIB_AVFORMAT, av_interleaved_write_frame)                                            \
  X(LIB_AVFORMAT, av_write_trailer)                                                      \
  X(LIB_AVFORMAT, avio_open)                                                             \
  X(LIB_AVFORMAT, avio_closep)                                                           \
  X(LIB_AVFORMAT, avformat_open_input)                                                   \
  X(LIB_AVFORMAT, avformat_find_stream_info)                                             \
  X(LIB_AVFORMAT, av_find_best_stream)                                                   \
  X(LIB_AVFORMAT, av_read_frame)                                                         \
  X(LIB_AVFORMAT, avformat_close_input)

/* The table: a pointer of each function's own type, named after it. */
#define AV_FIELD(lib, fn) __typeof__(fn) *fn;
typedef struct ffmpeg_av {
  AV_FUNCTIONS(AV_FIELD)
} ffmpeg_av;
#undef AV_FIELD
extern ffmpeg_av av;

/* Versions, or why FFmpeg is not usable (after ffmpeg_load). */
extern char g_ffmpeg_status[768];

/* Loads the libraries once: SP_OK, or SP_ERR_INPUT after one line naming
 * path (what is missing and how to install it). */
int ffmpeg_load(const char *path);

/* One line for a failed av* call: the path, the call, FFmpeg's text for
 * the code and the last message FFmpeg logged. */
void ffmpeg_fail(const char *path, const char *call, int code);

#endif
