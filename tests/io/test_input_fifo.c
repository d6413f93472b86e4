/* The image and video readers (io/image_in.h, io/video_in.h) open a file
 * the way every reader does (io/file_read.h): a FIFO without a writer, or
 * a directory, is refused with SP_ERR_INPUT, never waited on. Each call
 * runs under alarm(): a reader that blocks kills the test (SIGALRM)
 * instead of hanging it. The commands check their paths before reading
 * (tests/vae/vae_encode.py); this holds the readers to the same rule by
 * themselves. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image_in.h"
#include "log.h"
#include "sp_test.h"
#include "video_in.h"

int main(void) {
  sp_test_begin("test_input_fifo");
  char dir[] = "/tmp/sp_input_fifo_XXXXXX";
  if (!mkdtemp(dir)) {
    printf("skip: cannot make a temporary directory\n");
    return 77;
  }
  char fifo[64];
  snprintf(fifo, sizeof fifo, "%s/in.png", dir);
  CHECK(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
  const char *paths[] = {fifo, dir};
  for (int i = 0; i < 2; i++) {
    rank_image im;
    rank_video v;
    alarm(20);
    CHECK(rank_image_read("--image", paths[i], &im) == SP_ERR_INPUT, "image %s", paths[i]);
    CHECK(rank_image_read_jpeg("--image", paths[i], &im) == SP_ERR_INPUT, "jpeg %s", paths[i]);
    CHECK(rank_video_read("--video", paths[i], 0, 1 << 20, &v) == SP_ERR_INPUT, "video %s",
          paths[i]);
    alarm(0);
  }
  unlink(fifo);
  rmdir(dir);
  printf("a FIFO and a directory refused by the image, JPEG and video readers\n");
  return sp_test_end();
}
