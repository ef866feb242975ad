/* observe/watchdog.h: no rank waits forever.
 *
 * Before each blocking point (a wait on a neighbour, a collective) the engine arms the watchdog
 * with a description; if the process makes no progress for `seconds`, it prints one line
 * ("no progress for 60 s while waiting for ... from rank 3 ...") and exits 1, and mpirun ends
 * the other ranks. A rank orphaned by a lost launcher ends itself the same way. The message is
 * formatted when armed, so the signal handler only writes it (async-signal-safe). */
#ifndef PT_WATCHDOG_H
#define PT_WATCHDOG_H

#include <stdint.h>

/* seconds <= 0 disables the watchdog. */
void watchdog_init(int seconds, int rank);
/* (Re)starts the countdown for a wait on `what` (peer: the rank waited on, or -1). */
void watchdog_arm(const char *what, int peer, int64_t step);
void watchdog_disarm(void);

#endif
