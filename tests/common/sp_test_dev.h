/* Device buffers for the GPU tests (sp_testlib_dev, CUDA builds only), as
 * ggml's backend tests keep them: every allocation starts NaN-filled (bytes
 * 0xFF: NaN as fp32 and bf16, so an element the code under test does not
 * write fails the comparison) and is followed by SP_DEV_GUARD guard bytes
 * that must survive it. A failed CUDA call ends the test (CHECK_CUDA). */
#ifndef SP_TEST_DEV_H
#define SP_TEST_DEV_H

#include <stddef.h>

#define SP_DEV_GUARD 256     /* bytes after every device buffer */
#define SP_DEV_GUARD_BYTE 0xA5
#define SP_DEV_MAX_BUFS 32   /* live buffers per case */

/* bytes of 0xFF followed by the guard; at most SP_DEV_MAX_BUFS live. */
void *sp_dev(size_t bytes);
/* 1 when every live buffer's guard is intact; frees them all. */
int sp_dev_release(void);
/* Host -> device; device -> host after a device synchronisation. */
void sp_up(void *d, const void *h, size_t bytes);
void sp_down(void *h, const void *d, size_t bytes);

#endif
