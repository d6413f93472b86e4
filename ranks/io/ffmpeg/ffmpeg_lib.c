/* FFmpeg's libraries for the video writer (video_ffmpeg.c) and reader
 * (video_ffmpeg_in.c), see ffmpeg_lib.h: opened with dlopen at first use,
 * by the sonames of the headers' major versions, every function used
 * looked up once into one table. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ffmpeg_lib.h"
#include "log.h"
#include "video_backend.h"

/* ---- the libraries -------------------------------------------------------- */

/* Where FFmpeg is when it is not on the loader's search path. */
#define FFMPEG_LIBDIR_ENV "SP_FFMPEG_LIBDIR"

/* In dependency order: a library's own dependencies are loaded (and, from
 * SP_FFMPEG_LIBDIR, found by soname) before it. */
static const struct {
  const char *name; /* "avutil": libavutil.so.MAJOR, Debian package libavutilMAJOR */
  int major;
} g_libs[N_LIBS] = {
    [LIB_AVUTIL] = {"avutil", LIBAVUTIL_VERSION_MAJOR},
    [LIB_SWSCALE] = {"swscale", LIBSWSCALE_VERSION_MAJOR},
    [LIB_AVCODEC] = {"avcodec", LIBAVCODEC_VERSION_MAJOR},
    [LIB_AVFORMAT] = {"avformat", LIBAVFORMAT_VERSION_MAJOR},
};

ffmpeg_av av;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_loaded;          /* 1 when every library and function was found */
char g_ffmpeg_status[768];     /* video_ffmpeg_status: versions, or why not */
static char g_load_error[768]; /* the one line a failed load logs, after the path */

/* The last message FFmpeg logged at error level, to name the real cause
 * next to an av* return code. */
static pthread_mutex_t g_msg_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_last_msg[256];

/* FFmpeg's own log: warnings and errors become debug lines (shown with a
 * verbose log level); the last error is kept for the error line. */
static void on_av_log(void *avcl, int level, const char *fmt, va_list vl) {
  if (level > AV_LOG_WARNING) return;
  char line[512];
  int prefix = 1;
  av.av_log_format_line(avcl, level, fmt, vl, line, sizeof line, &prefix);
  size_t n = strlen(line);
  while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
  if (n == 0) return;
  sp_log_debug("ffmpeg: %s", line);
  if (level <= AV_LOG_ERROR) {
    pthread_mutex_lock(&g_msg_lock);
    snprintf(g_last_msg, sizeof g_last_msg, "%s", line);
    pthread_mutex_unlock(&g_msg_lock);
  }
}

/* What to install, from the majors the build expects. */
static void install_hint(char *out, size_t n) {
  snprintf(out, n, "install lib%s%d lib%s%d lib%s%d lib%s%d (Debian/Ubuntu packages), or set "
           FFMPEG_LIBDIR_ENV " to the folder that holds them; .h5 and PNG outputs need no "
           "FFmpeg", g_libs[LIB_AVFORMAT].name, g_libs[LIB_AVFORMAT].major,
           g_libs[LIB_AVCODEC].name, g_libs[LIB_AVCODEC].major, g_libs[LIB_SWSCALE].name,
           g_libs[LIB_SWSCALE].major, g_libs[LIB_AVUTIL].name, g_libs[LIB_AVUTIL].major);
}

static void load_libraries(void) {
  void *handle[N_LIBS] = {0};
  char hint[384], soname[64], file[4096];
  install_hint(hint, sizeof hint);
  const char *dir = getenv(FFMPEG_LIBDIR_ENV);
  if (dir && !*dir) dir = NULL;
  for (int i = 0; i < N_LIBS; i++) {
    snprintf(soname, sizeof soname, "lib%s.so.%d", g_libs[i].name, g_libs[i].major);
    if (dir)
      snprintf(file, sizeof file, "%s/%s", dir, soname);
    else
      snprintf(file, sizeof file, "%s", soname);
    handle[i] = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!handle[i]) {
      const char *why = dlerror();
      snprintf(g_load_error, sizeof g_load_error, "FFmpeg is not available: cannot load %s%s%s "
               "(%s): %s", soname, dir ? " from " FFMPEG_LIBDIR_ENV "=" : "", dir ? dir : "",
               why ? why : "not found", hint);
      snprintf(g_ffmpeg_status, sizeof g_ffmpeg_status, "%s", g_load_error);
      return;
    }
  }
  const char *missing = NULL;
  int missing_lib = 0;
#define AV_LOAD(lib, fn)                                               \
  if (!missing) {                                                      \
    *(void **)(&av.fn) = dlsym(handle[lib], #fn);                      \
    if (!av.fn) {                                                      \
      missing = #fn;                                                   \
      missing_lib = lib;                                               \
    }                                                                  \
  }
  AV_FUNCTIONS(AV_LOAD)
#undef AV_LOAD
  if (missing) {
    snprintf(g_load_error, sizeof g_load_error, "FFmpeg is not usable: lib%s.so.%d has no %s "
             "(older than the headers this was built with): %s", g_libs[missing_lib].name,
             g_libs[missing_lib].major, missing, hint);
    snprintf(g_ffmpeg_status, sizeof g_ffmpeg_status, "%s", g_load_error);
    return;
  }
  av.av_log_set_callback(on_av_log);
  unsigned v[N_LIBS] = {av.avutil_version(), av.swscale_version(), av.avcodec_version(),
                        av.avformat_version()};
  snprintf(g_ffmpeg_status, sizeof g_ffmpeg_status,
           "libavformat %u.%u.%u, libavcodec %u.%u.%u, libswscale %u.%u.%u, libavutil %u.%u.%u "
           "(FFmpeg %s)",
           AV_VERSION_MAJOR(v[LIB_AVFORMAT]), AV_VERSION_MINOR(v[LIB_AVFORMAT]),
           AV_VERSION_MICRO(v[LIB_AVFORMAT]), AV_VERSION_MAJOR(v[LIB_AVCODEC]),
           AV_VERSION_MINOR(v[LIB_AVCODEC]), AV_VERSION_MICRO(v[LIB_AVCODEC]),
           AV_VERSION_MAJOR(v[LIB_SWSCALE]), AV_VERSION_MINOR(v[LIB_SWSCALE]),
           AV_VERSION_MICRO(v[LIB_SWSCALE]), AV_VERSION_MAJOR(v[LIB_AVUTIL]),
           AV_VERSION_MINOR(v[LIB_AVUTIL]), AV_VERSION_MICRO(v[LIB_AVUTIL]),
           av.av_version_info());
  g_loaded = 1;
}

int ffmpeg_load(const char *path) {
  pthread_once(&g_once, load_libraries);
  if (g_loaded) return SP_OK;
  sp_log_error("%s: %s", path, g_load_error);
  return SP_ERR_INPUT;
}

const char *video_ffmpeg_status(void) {
  pthread_once(&g_once, load_libraries);
  return g_ffmpeg_status;
}

void ffmpeg_fail(const char *path, const char *call, int code) {
  char text[128] = "unknown error";
  av.av_strerror(code, text, sizeof text);
  pthread_mutex_lock(&g_msg_lock);
  sp_log_error("%s: %s failed: %s%s%s%s", path, call, text, g_last_msg[0] ? " (ffmpeg: " : "",
               g_last_msg, g_last_msg[0] ? ")" : "");
  g_last_msg[0] = '\0';
  pthread_mutex_unlock(&g_msg_lock);
}

