/* The text-level checks of a safetensors header, before and beside
 * json-c: UTF-8 validity (no NUL), and duplicate object keys (json-c keeps
 * the last of two equal keys silently), plus the message helpers the
 * parser uses. Internal to the safetensors reader (safetensors.c). */
#ifndef RANK_ST_TEXT_H
#define RANK_ST_TEXT_H

#include <stddef.h>

void rank_st_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A name from the file made safe to print on one line: at most 120 bytes,
 * anything outside printable ASCII as \xNN. */
const char *rank_st_printable(const char *s, size_t n, char *buf, size_t cap);
/* Index of the first byte that breaks strict UTF-8 (io_utf8_check); n
 * when all of s is valid. */
size_t rank_st_utf8_check(const unsigned char *s, size_t n);
/* 0, or -1 with a message: a duplicate key in any object of the JSON
 * text s (already known to parse); *top_keys gets the root object's
 * number of keys. */
int rank_st_scan_keys(const char *s, size_t n, size_t *top_keys, char *err, size_t errlen);

#endif
