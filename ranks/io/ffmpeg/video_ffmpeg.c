/* Video files written through FFmpeg's libraries (see video_backend.h and
 * video_out.h), compiled against FFmpeg's headers but never linked to
 * FFmpeg: its functions come from the table of ffmpeg_lib.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ffmpeg_lib.h"
#include "log.h"
#include "video_backend.h"

/* ---- muxer and encoder ---------------------------------------------------- */

/* The muxer of c and the first encoder that it accepts: c's encoders in
 * order, then the muxer's default. SP_OK or SP_ERR_INPUT (logged). */
static int pick(const char *path, const video_container *c, const AVOutputFormat **fmt_out,
                const AVCodec **codec_out) {
  const AVOutputFormat *fmt = av.av_guess_format(c->muxer, NULL, NULL);
  if (!fmt) {
    sp_log_error("%s: this FFmpeg has no '%s' muxer (%s)", path, c->muxer, g_ffmpeg_status);
    return SP_ERR_INPUT;
  }
  const AVCodec *codec = NULL;
  for (int i = 0; !codec && i < 3 && c->encoders[i]; i++) {
    const AVCodec *k = av.avcodec_find_encoder_by_name(c->encoders[i]);
    if (k && av.avformat_query_codec(fmt, k->id, FF_COMPLIANCE_NORMAL) == 1) codec = k;
  }
  if (!codec && fmt->video_codec != AV_CODEC_ID_NONE) codec = av.avcodec_find_encoder(fmt->video_codec);
  if (!codec) {
    char tried[128] = "";
    for (int i = 0; i < 3 && c->encoders[i]; i++)
      snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s, ", c->encoders[i]);
    sp_log_error("%s: this FFmpeg has no video encoder for %s (tried %sthen the muxer's "
                 "default): install an FFmpeg built with them (Debian: libavcodec-extra)",
                 path, c->muxer, tried);
    return SP_ERR_INPUT;
  }
  *fmt_out = fmt;
  *codec_out = codec;
  return SP_OK;
}

static int set_opt(const char *path, AVCodecContext *ctx, const char *key, const char *value) {
  int rc = av.av_opt_set(ctx->priv_data, key, value, 0);
  if (rc < 0) {
    char call[96];
    snprintf(call, sizeof call, "av_opt_set(%s=%s)", key, value);
    ffmpeg_fail(path, call, rc);
    return SP_ERR_RUNTIME;
  }
  return SP_OK;
}

/* An encoder context for codec at width x height and fps, yuv420p with
 * BT.601 limited-range tags (what sws_scale's default RGB conversion
 * makes), opened. The quality per encoder (video_out.h):
 *   libx264     crf 18, preset medium: near the visually lossless end of
 *               x264's scale, at a moderate speed;
 *   libvpx-vp9  crf 24 with no bitrate cap (constant quality), cpu-used 4
 *               and row threading, so long videos do not take minutes;
 *   libvpx      (VP8) crf 10 under a cap of 0.5 bit per pixel;
 *   others      a fixed quantiser of 3. */
static int open_encoder(const char *path, const AVCodec *codec, const AVOutputFormat *fmt,
                        int64_t width, int64_t height, double fps, AVCodecContext **out) {
  AVCodecContext *ctx = av.avcodec_alloc_context3(codec);
  if (!ctx) {
    sp_log_error("%s: avcodec_alloc_context3 failed (out of memory)", path);
    return SP_ERR_RUNTIME;
  }
  AVRational rate = av.av_d2q(fps, 100000);
  ctx->width = (int)width;
  ctx->height = (int)height;
  ctx->pix_fmt = AV_PIX_FMT_YUV420P;
  ctx->framerate = rate;
  ctx->time_base = (AVRational){rate.den, rate.num};
  ctx->sample_aspect_ratio = (AVRational){1, 1};
  ctx->color_range = AVCOL_RANGE_MPEG;
  ctx->colorspace = AVCOL_SPC_SMPTE170M;
  ctx->color_primaries = AVCOL_PRI_SMPTE170M;
  ctx->color_trc = AVCOL_TRC_SMPTE170M;
  ctx->thread_count = 0; /* as many as the encoder likes */
  if (fmt->flags & AVFMT_GLOBALHEADER) ctx->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  int rc = SP_OK;
  if (strcmp(codec->name, "libx264") == 0) {
    if ((rc = set_opt(path, ctx, "crf", "18")) == SP_OK) rc = set_opt(path, ctx, "preset", "medium");
  } else if (strcmp(codec->name, "libvpx-vp9") == 0) {
    ctx->bit_rate = 0;
    if ((rc = set_opt(path, ctx, "crf", "24")) == SP_OK &&
        (rc = set_opt(path, ctx, "cpu-used", "4")) == SP_OK)
      rc = set_opt(path, ctx, "row-mt", "1");
  } else if (strcmp(codec->name, "libvpx") == 0) {
    ctx->bit_rate = (int64_t)((double)width * (double)height * fps * 0.5);
    rc = set_opt(path, ctx, "crf", "10");
  } else {
    ctx->flags |= AV_CODEC_FLAG_QSCALE;
    ctx->global_quality = FF_QP2LAMBDA * 3;
  }
  if (rc == SP_OK) {
    int e = av.avcodec_open2(ctx, codec, NULL);
    if (e < 0) {
      char call[96];
      snprintf(call, sizeof call, "avcodec_open2(%s, %lldx%lld)", codec->name,
               (long long)width, (long long)height);
      ffmpeg_fail(path, call, e);
      rc = SP_ERR_INPUT;
    }
  }
  if (rc != SP_OK) {
    av.avcodec_free_context(&ctx);
    return rc;
  }
  *out = ctx;
  return SP_OK;
}

int video_ffmpeg_check(const char *path, const video_container *c, int64_t width,
                       int64_t height, double fps) {
  const AVOutputFormat *fmt;
  const AVCodec *codec;
  AVCodecContext *ctx;
  if (ffmpeg_load(path) != SP_OK || pick(path, c, &fmt, &codec) != SP_OK ||
      open_encoder(path, codec, fmt, width, height, fps, &ctx) != SP_OK)
    return SP_ERR_INPUT;
  av.avcodec_free_context(&ctx);
  return SP_OK;
}

/* ---- the writer ----------------------------------------------------------- */

struct video_ffmpeg {
  char path[4096];
  int width, height;
  int64_t next_pts; /* frame index: the time base is 1 / fps */
  AVFormatContext *oc;
  AVCodecContext *ctx;
  AVStream *st;
  AVFrame *frame; /* yuv420p */
  AVPacket *pkt;
  struct SwsContext *sws;
};

static void writer_free(video_ffmpeg *e) {
  if (e->oc) {
    if (e->oc->pb && !(e->oc->oformat->flags & AVFMT_NOFILE)) av.avio_closep(&e->oc->pb);
    av.avformat_free_context(e->oc);
  }
  av.avcodec_free_context(&e->ctx);
  av.av_frame_free(&e->frame);
  av.av_packet_free(&e->pkt);
  av.sws_freeContext(e->sws);
  free(e);
}

int video_ffmpeg_open(const char *path, const char *tmp, const video_container *c,
                      int64_t width, int64_t height, double fps, video_ffmpeg **out) {
  const AVOutputFormat *fmt;
  const AVCodec *codec;
  if (ffmpeg_load(path) != SP_OK || pick(path, c, &fmt, &codec) != SP_OK) return SP_ERR_INPUT;
  video_ffmpeg *e = sp_xcalloc(1, sizeof *e);
  snprintf(e->path, sizeof e->path, "%s", path);
  e->width = (int)width;
  e->height = (int)height;
  int rc = open_encoder(path, codec, fmt, width, height, fps, &e->ctx);
  if (rc != SP_OK) goto fail;
  rc = SP_ERR_RUNTIME;
  int r = av.avformat_alloc_output_context2(&e->oc, fmt, NULL, tmp);
  if (r < 0) {
    ffmpeg_fail(path, "avformat_alloc_output_context2", r);
    goto fail;
  }
  if (!(e->st = av.avformat_new_stream(e->oc, NULL))) {
    sp_log_error("%s: avformat_new_stream failed (out of memory)", path);
    goto fail;
  }
  e->st->time_base = e->ctx->time_base;
  e->st->avg_frame_rate = e->ctx->framerate;
  if ((r = av.avcodec_parameters_from_context(e->st->codecpar, e->ctx)) < 0) {
    ffmpeg_fail(path, "avcodec_parameters_from_context", r);
    goto fail;
  }
  if (!(fmt->flags & AVFMT_NOFILE) && (r = av.avio_open(&e->oc->pb, tmp, AVIO_FLAG_WRITE)) < 0) {
    ffmpeg_fail(path, "avio_open", r);
    goto fail;
  }
  /* MP4 and MOV: the index up front, so players can start before the end. */
  AVDictionary *opts = NULL;
  if ((strcmp(c->muxer, "mp4") == 0 || strcmp(c->muxer, "mov") == 0) &&
      (r = av.av_dict_set(&opts, "movflags", "+faststart", 0)) < 0) {
    ffmpeg_fail(path, "av_dict_set(movflags)", r);
    goto fail;
  }
  r = av.avformat_write_header(e->oc, &opts);
  av.av_dict_free(&opts);
  if (r < 0) {
    ffmpeg_fail(path, "avformat_write_header", r);
    goto fail;
  }
  if (!(e->frame = av.av_frame_alloc()) || !(e->pkt = av.av_packet_alloc())) {
    sp_log_error("%s: av_frame_alloc or av_packet_alloc failed (out of memory)", path);
    goto fail;
  }
  e->frame->format = AV_PIX_FMT_YUV420P;
  e->frame->width = e->width;
  e->frame->height = e->height;
  if ((r = av.av_frame_get_buffer(e->frame, 0)) < 0) {
    ffmpeg_fail(path, "av_frame_get_buffer", r);
    goto fail;
  }
  e->sws = av.sws_getContext(e->width, e->height, AV_PIX_FMT_RGB24, e->width, e->height,
                             AV_PIX_FMT_YUV420P, SWS_BICUBIC | SWS_ACCURATE_RND, NULL, NULL,
                             NULL);
  if (!e->sws) {
    sp_log_error("%s: sws_getContext (rgb24 to yuv420p, %dx%d) failed", path, e->width,
                 e->height);
    goto fail;
  }
  *out = e;
  return SP_OK;
fail:
  writer_free(e);
  return rc;
}

/* Writes every packet the encoder has ready. */
static int drain(video_ffmpeg *e) {
  for (;;) {
    int r = av.avcodec_receive_packet(e->ctx, e->pkt);
    if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return SP_OK;
    if (r < 0) {
      ffmpeg_fail(e->path, "avcodec_receive_packet", r);
      return SP_ERR_RUNTIME;
    }
    av.av_packet_rescale_ts(e->pkt, e->ctx->time_base, e->st->time_base);
    e->pkt->stream_index = e->st->index;
    if ((r = av.av_interleaved_write_frame(e->oc, e->pkt)) < 0) {
      ffmpeg_fail(e->path, "av_interleaved_write_frame", r);
      return SP_ERR_RUNTIME;
    }
  }
}

int video_ffmpeg_put(video_ffmpeg *e, const uint8_t *rgb) {
  int r = av.av_frame_make_writable(e->frame);
  if (r < 0) {
    ffmpeg_fail(e->path, "av_frame_make_writable", r);
    return SP_ERR_RUNTIME;
  }
  const uint8_t *src[1] = {rgb};
  const int stride[1] = {3 * e->width};
  r = av.sws_scale(e->sws, src, stride, 0, e->height, e->frame->data, e->frame->linesize);
  if (r != e->height) {
    sp_log_error("%s: sws_scale (rgb24 to yuv420p) returned %d rows of %d", e->path, r,
                 e->height);
    return SP_ERR_RUNTIME;
  }
  e->frame->pts = e->next_pts++;
  if ((r = av.avcodec_send_frame(e->ctx, e->frame)) < 0) {
    ffmpeg_fail(e->path, "avcodec_send_frame", r);
    return SP_ERR_RUNTIME;
  }
  return drain(e);
}

int video_ffmpeg_finish(video_ffmpeg *e) {
  int rc = SP_ERR_RUNTIME;
  int r = av.avcodec_send_frame(e->ctx, NULL); /* flush */
  if (r < 0) {
    ffmpeg_fail(e->path, "avcodec_send_frame(flush)", r);
  } else if (drain(e) == SP_OK) {
    if ((r = av.av_write_trailer(e->oc)) < 0) {
      ffmpeg_fail(e->path, "av_write_trailer", r);
    } else if (!(e->oc->oformat->flags & AVFMT_NOFILE) && (r = av.avio_closep(&e->oc->pb)) < 0) {
      ffmpeg_fail(e->path, "avio_closep", r);
    } else {
      rc = SP_OK;
    }
  }
  writer_free(e);
  return rc;
}

void video_ffmpeg_close(video_ffmpeg *e) {
  if (e) writer_free(e);
}
