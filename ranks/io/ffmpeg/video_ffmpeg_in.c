/* Video files read through FFmpeg's libraries (see video_in.h): the first
 * video stream demuxed and decoded in order, each frame converted to RGB24
 * by libswscale with the frame's colour matrix and range, appended to one
 * growing buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ffmpeg_lib.h"
#include "file_read.h"
#include "log.h"
#include "video_in.h"

/* The decoder's state. */
typedef struct reader {
  const char *what, *path;
  AVFormatContext *fc;
  AVCodecContext *ctx;
  AVFrame *frame;
  AVPacket *pkt;
  struct SwsContext *sws;
  int stream;
  int64_t max_frames, max_bytes;
  rank_video *out;
  int64_t cap; /* frames out->rgb holds */
} reader;

static void reader_free(reader *r) {
  av.avcodec_free_context(&r->ctx);
  av.av_frame_free(&r->frame);
  av.av_packet_free(&r->pkt);
  av.sws_freeContext(r->sws);
  if (r->fc) av.avformat_close_input(&r->fc);
}

/* Opens the container and the first video stream's decoder. */
static int reader_open(reader *r) {
  int e = av.avformat_open_input(&r->fc, r->path, NULL, NULL);
  if (e < 0) {
    ffmpeg_fail(r->path, "avformat_open_input", e);
    return SP_ERR_INPUT;
  }
  if ((e = av.avformat_find_stream_info(r->fc, NULL)) < 0) {
    ffmpeg_fail(r->path, "avformat_find_stream_info", e);
    return SP_ERR_INPUT;
  }
  const AVCodec *codec = NULL;
  r->stream = av.av_find_best_stream(r->fc, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
  if (r->stream < 0) {
    sp_log_error("%s %s: no video stream", r->what, r->path);
    return SP_ERR_INPUT;
  }
  const AVCodecParameters *par = r->fc->streams[r->stream]->codecpar;
  if (!(codec = av.avcodec_find_decoder(par->codec_id))) {
    sp_log_error("%s %s: this FFmpeg has no decoder for the video stream's codec (id %d)",
                 r->what, r->path, (int)par->codec_id);
    return SP_ERR_INPUT;
  }
  if (!(r->ctx = av.avcodec_alloc_context3(codec)) || !(r->frame = av.av_frame_alloc()) ||
      !(r->pkt = av.av_packet_alloc())) {
    sp_log_error("%s %s: out of memory for the decoder", r->what, r->path);
    return SP_ERR_RUNTIME;
  }
  if ((e = av.avcodec_parameters_to_context(r->ctx, par)) < 0 ||
      (e = av.avcodec_open2(r->ctx, codec, NULL)) < 0) {
    ffmpeg_fail(r->path, "avcodec_open2", e);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* The RGB conversion of frames like f, made at the first frame. */
static int make_sws(reader *r, const AVFrame *f) {
  r->sws = av.sws_getContext(f->width, f->height, (enum AVPixelFormat)f->format, f->width,
                             f->height, AV_PIX_FMT_RGB24,
                             SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT, NULL, NULL,
                             NULL);
  if (!r->sws) {
    sp_log_error("%s %s: libswscale cannot convert its pixel format %d to RGB", r->what, r->path,
                 f->format);
    return SP_ERR_INPUT;
  }
  /* the frame's matrix (BT.601 when unspecified) and range; RGB is full
   * range. An RGB source ignores them. */
  const int cs = f->colorspace == AVCOL_SPC_UNSPECIFIED ? SWS_CS_DEFAULT : (int)f->colorspace;
  const int *coef = av.sws_getCoefficients(cs);
  av.sws_setColorspaceDetails(r->sws, coef, f->color_range == AVCOL_RANGE_JPEG, coef, 1, 0,
                              1 << 16, 1 << 16);
  return SP_OK;
}

/* Frame f appended as RGB24. */
static int append(reader *r, const AVFrame *f) {
  rank_video *v = r->out;
  if (v->T == 0) {
    if (f->width < 1 || f->height < 1) {
      sp_log_error("%s %s: a frame of %dx%d", r->what, r->path, f->width, f->height);
      return SP_ERR_INPUT;
    }
    v->w = f->width;
    v->h = f->height;
    int rc = make_sws(r, f);
    if (rc != SP_OK) return rc;
  } else if (f->width != v->w || f->height != v->h) {
    sp_log_error("%s %s: frame %lld is %dx%d, the first %lldx%lld", r->what, r->path,
                 (long long)v->T, f->width, f->height, (long long)v->w, (long long)v->h);
    return SP_ERR_INPUT;
  }
  const int64_t fb = v->w * v->h * 3;
  if ((v->T + 1) * fb > r->max_bytes) {
    sp_log_error("%s %s: more than %lld frames of %lldx%lld (%.1f GB of RGB): pass --frames N",
                 r->what, r->path, (long long)v->T, (long long)v->w, (long long)v->h,
                 (double)r->max_bytes / 1e9);
    return SP_ERR_INPUT;
  }
  if (v->T == r->cap) {
    r->cap = r->cap ? 2 * r->cap : 16;
    uint8_t *p = realloc(v->rgb, (size_t)(r->cap * fb));
    if (!p) {
      sp_log_error("%s %s: out of memory for %lld frames", r->what, r->path, (long long)r->cap);
      return SP_ERR_RUNTIME;
    }
    v->rgb = p;
  }
  uint8_t *dst[1] = {v->rgb + v->T * fb};
  const int stride[1] = {(int)(3 * v->w)};
  if (av.sws_scale(r->sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, dst,
                   stride) != f->height) {
    sp_log_error("%s %s: libswscale failed on frame %lld", r->what, r->path, (long long)v->T);
    return SP_ERR_INPUT;
  }
  v->T++;
  return SP_OK;
}

/* Every frame the decoder has ready; *done when enough were taken. */
static int receive(reader *r, int *done) {
  for (;;) {
    int e = av.avcodec_receive_frame(r->ctx, r->frame);
    if (e == AVERROR(EAGAIN) || e == AVERROR_EOF) return SP_OK;
    if (e < 0) {
      ffmpeg_fail(r->path, "avcodec_receive_frame", e);
      return SP_ERR_INPUT;
    }
    int rc = append(r, r->frame);
    av.av_frame_unref(r->frame);
    if (rc != SP_OK) return rc;
    if (r->max_frames > 0 && r->out->T >= r->max_frames) {
      *done = 1;
      return SP_OK;
    }
  }
}

/* Demuxes and decodes until the end (or enough frames), then flushes. */
static int decode_all(reader *r) {
  int done = 0, e, rc = SP_OK;
  while (!done && rc == SP_OK && (e = av.av_read_frame(r->fc, r->pkt)) >= 0) {
    if (r->pkt->stream_index == r->stream) {
      if ((e = av.avcodec_send_packet(r->ctx, r->pkt)) < 0) {
        ffmpeg_fail(r->path, "avcodec_send_packet", e);
        rc = SP_ERR_INPUT;
      } else {
        rc = receive(r, &done);
      }
    }
    av.av_packet_unref(r->pkt);
  }
  if (rc != SP_OK || done) return rc;
  if ((e = av.avcodec_send_packet(r->ctx, NULL)) < 0) { /* flush */
    ffmpeg_fail(r->path, "avcodec_send_packet(flush)", e);
    return SP_ERR_INPUT;
  }
  return receive(r, &done);
}

int rank_video_read(const char *what, const char *path, int64_t max_frames, int64_t max_bytes,
                    rank_video *out) {
  memset(out, 0, sizeof *out);
  char where[4200];
  snprintf(where, sizeof where, "%s %s", what, path);
  /* a FIFO or a device refused before FFmpeg opens it (io/file_read.h) */
  if (rank_file_check_regular(path) != SP_OK) return SP_ERR_INPUT; /* logged */
  if (ffmpeg_load(where) != SP_OK) return SP_ERR_INPUT;
  reader r = {.what = what, .path = path, .max_frames = max_frames, .max_bytes = max_bytes,
              .out = out};
  int rc = reader_open(&r);
  if (rc == SP_OK) rc = decode_all(&r);
  if (rc == SP_OK && out->T == 0) {
    sp_log_error("%s %s: no frame decoded", what, path);
    rc = SP_ERR_INPUT;
  }
  reader_free(&r);
  if (rc != SP_OK) rank_video_free(out);
  return rc;
}

void rank_video_free(rank_video *v) {
  free(v->rgb);
  memset(v, 0, sizeof *v);
}
