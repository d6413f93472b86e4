/* A long phase's progress line, beside the log (log.h): the load of a
 * model's weights, init's writing, the text encoder's layers. One phase
 * at a time per process: between sp_progress_begin and sp_progress_end,
 * sp_progress_add counts what was done, from any thread.
 *
 * With stderr a terminal: one line "[rank N] WHAT: DONE of TOTAL (P%),
 * RATE" ("X.X of Y.Y MB (P%), R MB/s" for bytes, "K of T layers (P%), R
 * layers/s" for a count; without a total "X.X MB, R MB/s"), drawn at the
 * start, redrawn in place at most ten times a second, ended with a
 * newline. With stderr a log (not a terminal): an info line with the same
 * text at each tenth of the total reached once the phase has run for
 * SP_PROGRESS_LOG_AFTER_S (a short phase leaves the log alone), nothing
 * without a total. Nothing at all when info lines are off (-q) or on a
 * rank that does not speak. */
#ifndef SP_PROGRESS_H
#define SP_PROGRESS_H

#include <stdint.h>

#define SP_PROGRESS_LOG_AFTER_S 2.0

/* what: the phase ("reading weights"); unit: NULL for bytes, else the
 * plural noun of what is counted ("layers"); total: what the phase will
 * count, 0 when not known ahead. */
void sp_progress_begin(const char *what, const char *unit, uint64_t total);
void sp_progress_add(uint64_t n);
void sp_progress_end(void);

#endif
