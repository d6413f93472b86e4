/* JSON out (see json_out.h). */
#include "json_out.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "log.h"
#include "utf8.h"

json_object *io_json_string(const char *s) {
  if (!s) s = "";
  const unsigned char *u = (const unsigned char *)s;
  const size_t n = strlen(s);
  if (io_utf8_check(u, n) == n) return json_object_new_string_len(s, (int)n);
  /* Each bad byte becomes U+FFFD (3 bytes). */
  char *out = sp_xmalloc(3 * n + 1);
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    size_t len = io_utf8_seq(u + i, n - i);
    if (len == 0) {
      memcpy(out + o, "\xef\xbf\xbd", 3);
      o += 3, i += 1;
    } else {
      memcpy(out + o, s + i, len);
      o += len, i += len;
    }
  }
  json_object *j = json_object_new_string_len(out, (int)o);
  free(out);
  return j;
}

int io_json_write_file(const char *path, const char *what, json_object *doc) {
  char tmp[4200];
  int rc = rank_atomic_begin(path, tmp, sizeof tmp);
  if (rc != SP_OK) return rc; /* logged there */
  const char *text = json_object_to_json_string_ext(
      doc, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
  FILE *f = text ? fopen(tmp, "w") : NULL;
  if (!f) {
    sp_log_error("%s: cannot write %s: %s", path, what,
                 text ? strerror(errno) : "out of memory serialising it");
    rank_atomic_abort(tmp);
    return SP_ERR_RUNTIME;
  }
  const size_t n = strlen(text);
  int bad = fwrite(text, 1, n, f) != n || fputc('\n', f) == EOF;
  bad |= fclose(f) != 0;
  if (bad) {
    sp_log_error("%s: writing %s failed: %s", path, what, strerror(errno));
    rank_atomic_abort(tmp);
    return SP_ERR_RUNTIME;
  }
  return rank_atomic_commit(tmp, path); /* logs its own failure */
}
