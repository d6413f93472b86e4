/* The value parsers of every command's flags and every --jobs key, in the
 * one number syntax of planner/num.h (decimal only; no blanks, no '+', no
 * hex, no inf or nan). Each logs one line naming the flag, the text and
 * what is accepted ("--steps: ' 5' is not an integer in 1..10000") and
 * returns SP_ERR_INPUT, or SP_OK with *out set. */
#ifndef JOB_PARSE_H
#define JOB_PARSE_H

#include <stddef.h>
#include <stdint.h>

int job_parse_int64(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
int job_parse_uint64(const char *flag, const char *s, uint64_t *out);
int job_parse_double(const char *flag, const char *s, double lo, double hi, double *out);
/* "HxW" (480x832; X too) or the Wan repository's W*H (832*480 is 480x832),
 * each side in 1..65536, into h and w. */
int job_parse_size_hw(const char *flag, const char *s, int64_t *h, int64_t *w);
/* Splits s at sep into at most max items, copied into buf (cap bytes) and
 * pointed to by items: "1,,2", ",1" and "1," are refused (an empty item),
 * as is a list longer than max or than buf. *n items. */
int job_parse_list(const char *flag, const char *s, char sep, char *buf, size_t cap,
                   char **items, int max, int *n);

#endif
