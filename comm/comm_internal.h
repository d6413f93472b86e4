/* Between comm.c and watchdog.c: the main thread tells the watchdog when it
 * starts and stops waiting on a peer (a message or a collective). */
#ifndef COMM_INTERNAL_H
#define COMM_INTERNAL_H

void comm_wait_begin(void);
void comm_wait_end(void);
/* 1 when the watchdog thread runs (heartbeats): it then judges every wait. */
int comm_watchdog_guards(void);

/* comm_watchdog_culprit's answer when this rank hears none of its peers. */
#define COMM_WATCHDOG_NOBODY (-2)
/* The watchdog's blame (watchdog.c): of the size ranks, me excluded and
 * those with gone[p] set (said goodbye) ignored, the peer silent for more
 * than timeout_s the longest (silent_s[p], seconds since its last message;
 * ties: the lowest rank), or -1 when none is. COMM_WATCHDOG_NOBODY when
 * two or more peers remain and every one of them is silent: then the
 * silence is likely this rank's own (its messages stalled) and no single
 * peer is named. */
int comm_watchdog_culprit(int size, int me, const double *silent_s, const unsigned char *gone,
                          double timeout_s);

#endif
