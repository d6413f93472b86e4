/* The one number syntax of every flag, --jobs key and list item (README
 * "Commands"): decimal only. An integer is an optional '-' and digits; a
 * real number adds an optional fraction (".5", "2.", "2.5") and an
 * optional exponent ("1e3", "2.5E-2"). Refused: surrounding or inner
 * whitespace, a '+', hex, octal or any other base ("0x10"), inf and nan,
 * an empty string. Leading zeros are decimal ("010" is ten).
 *
 * Both return PLAN_OK with *out set, or PLAN_EINVAL (*out untouched) for
 * text of another form or a value outside [lo, hi] (a real one must also be
 * finite); the caller names the flag and the accepted range. */
#ifndef PLAN_NUM_H
#define PLAN_NUM_H

#include <stdint.h>

int plan_num_int(const char *s, int64_t lo, int64_t hi, int64_t *out);
int plan_num_real(const char *s, double lo, double hi, double *out);
/* A non-negative integer of up to 64 bits (a seed): digits only. */
int plan_num_uint(const char *s, uint64_t *out);

#endif
