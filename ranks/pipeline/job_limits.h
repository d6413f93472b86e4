/* The limits of a job's values (internal to the job library): checked by
 * job_params_set and job_params_check alone, and written into the help
 * (job_option.c) and the error lines from here, as plain literals so the
 * help can spell them with STR. The planner's own limits are checked to
 * agree (job_check.c). */
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
#define JOB_AREA_MIN 1024 /* --max-area: 32 x 32 pixels, one TI2V latent token */
#define JOB_AREA_LOG2 32  /* --max-area: at most 2^32 pixels */
#define JOB_SPEED_MAX 1000 /* planner/plan.h PLAN_SPEED_MAX */
#define JOB_TOKENS_LOG2 31 /* planner/plan.h PLAN_TOKENS_MAX */
#define STR_(x) #x
#define STR(x) STR_(x)

#endif
