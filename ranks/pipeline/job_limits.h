/* The limits of a job's values (internal to ranks/pipeline/job_opts*.c):
 * checked by job_opts_check alone, and written into the help
 * (job_opts_table.c) and the error lines from here, as plain literals so
 * the help can spell them with STR. */
#ifndef JOB_LIMITS_H
#define JOB_LIMITS_H

#include <stdint.h>

#define JOB_FRAMES_MAX 4097
#define JOB_SIDE_MAX 65536
#define JOB_STEPS_MAX 10000
#define JOB_CFG_MAX 100
#define JOB_SHIFT_MIN 0.001
#define JOB_SHIFT_MAX 1000
#define JOB_TIMEOUT_MIN 1
#define JOB_TIMEOUT_MAX 1000000
#define JOB_CHUNK_ROWS_LOG2 31
#define JOB_CHUNK_ROWS_MAX (INT64_C(1) << JOB_CHUNK_ROWS_LOG2)
#define JOB_FPS_MAX 240
#define STR_(x) #x
#define STR(x) STR_(x)

#endif
