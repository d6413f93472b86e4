/* Between comm.c and watchdog.c: the main thread tells the watchdog when it
 * starts and stops waiting on a peer (a message or a collective). */
#ifndef COMM_INTERNAL_H
#define COMM_INTERNAL_H

void comm_wait_begin(void);
void comm_wait_end(void);
/* 1 when the watchdog thread runs (heartbeats): it then judges every wait. */
int comm_watchdog_guards(void);

#endif
