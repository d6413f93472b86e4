/* Atomic output files: every output is written to a temporary name beside
 * its final path and renamed into place at the end, so a failure or an
 * interrupt never leaves a half-written file and an existing file stays
 * untouched until the new one is complete. Temporary names are registered
 * so SIGINT, SIGTERM, SIGHUP, SIGQUIT (and sp_fatal) remove them before the
 * process ends; the next write to the same path removes those of a process
 * killed outright. */
#ifndef RANK_ATOMIC_FILE_H
#define RANK_ATOMIC_FILE_H

#include <stddef.h>

/* Makes "DIR/.NAME.tmp-PID-N" for final path into tmp (n bytes) and
 * registers it for removal on a signal or a fatal error. First removes the
 * temporary names of the same final path that processes of this host which
 * no longer run left behind (SIGKILL leaves them: no handler runs), one
 * info line each. Returns 0 or
 * SP_ERR_INPUT (path too long, directory missing, not writable: logged). */
int rank_atomic_begin(const char *final_path, char *tmp, size_t n);
/* The longest temporary name rank_atomic_begin can make for final_path
 * (the same format, the largest counter), without registering it: for
 * checking name-length limits before any work starts. Returns 0, or -1
 * (nothing logged) when it does not fit n bytes. */
int rank_atomic_tmp_name_longest(const char *final_path, char *tmp, size_t n);
/* Renames tmp onto final_path (fsync first) and unregisters it. */
int rank_atomic_commit(const char *tmp, const char *final_path);
/* Removes tmp (if it exists) and unregisters it. */
void rank_atomic_abort(const char *tmp);

#endif
