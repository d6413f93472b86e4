/* The video reader of a build made without FFmpeg's headers (see
 * video_in.h): every video file is refused with the reason and the fix. */
#include <string.h>

#include "log.h"
#include "video_in.h"

int rank_video_read(const char *what, const char *path, int64_t max_frames, int64_t max_bytes,
                    rank_video *out) {
  (void)max_frames, (void)max_bytes;
  memset(out, 0, sizeof *out);
  sp_log_error("%s %s: this staticpipe was built without FFmpeg's headers, so it reads no video "
               "files: install libavcodec-dev libavformat-dev libswscale-dev libavutil-dev and "
               "rebuild, or give the frames as .h5 (dataset 'video' float32 [3, T, H, W])",
               what, path);
  return SP_ERR_INPUT;
}

void rank_video_free(rank_video *v) { (void)v; }
