/* JSON out, through json-c: strings from arbitrary bytes made valid UTF-8,
 * and a JSON document written to a file atomically. Every JSON the program
 * writes (traces, job lines, plans, reports) is built as json-c objects and
 * serialised by json-c, never printed by hand, so a quote, a backslash or a
 * control character in a name can never break it. */
#ifndef IO_JSON_OUT_H
#define IO_JSON_OUT_H

#include <json-c/json.h>
#include <stddef.h>

#include "utf8.h"

/* A json-c string of s (NULL: ""), each byte that breaks UTF-8 replaced by
 * U+FFFD, so the document stays valid UTF-8 whatever a path holds. */
json_object *io_json_string(const char *s);

/* Serialises doc (compact, slashes unescaped, one trailing newline) into
 * path atomically (ranks/io/atomic_file.h). what names the document in
 * messages ("the trace"). SP_OK, SP_ERR_INPUT (path unusable) or
 * SP_ERR_RUNTIME (the write failed); logged once, naming path. */
int io_json_write_file(const char *path, const char *what, json_object *doc);

#endif
