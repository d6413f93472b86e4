/* JSON in, through json-c, from a stranger: the strict reader that every
 * JSON input goes through (a safetensors header, a *.safetensors.index.json,
 * a tokenizer.json), and the message helpers of the readers built on it.
 * json-c alone would accept what this refuses: invalid UTF-8, a NUL byte, a
 * lone UTF-16 surrogate escape, bytes after the value, and duplicate object
 * keys (json-c keeps the last of two equal keys silently). Pure: no I/O, no
 * logging; a refusal is one message in a caller's buffer, so fuzz targets
 * drive it directly. */
#ifndef IO_JSON_IN_H
#define IO_JSON_IN_H

#include <stddef.h>

#define IO_JSON_MAX_DEPTH 8 /* nesting; a safetensors header needs 3 */

/* Parses json[0..len): at most max_len bytes, UTF-8, no NUL, strict syntax,
 * depth <= IO_JSON_MAX_DEPTH, one object and only whitespace after it, no
 * duplicate key in any object (keys compared decoded: "a" and "\u0061" are
 * the same key; a key holding NUL or breaking UTF-8 once unescaped is
 * refused). Returns 0 and the object in *out (release with
 * json_object_put), or -1 with a message in err ("header: ..."). */
struct json_object;
int io_json_parse(const char *json, size_t len, size_t max_len, struct json_object **out,
                  char *err, size_t errlen);

/* printf into err (errlen bytes), for the readers' messages. */
void io_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A name from a file made safe to print on one line: at most 120 bytes,
 * anything outside printable ASCII as \xNN; into buf (cap bytes), which it
 * returns. */
const char *io_printable(const char *s, size_t n, char *buf, size_t cap);

#endif
