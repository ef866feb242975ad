/* observe/watchdog.h: no rank waits forever.
 *
 * Before each blocking point (a wait on a neighbour, a collective) the engine arms the watchdog
 * with a description; if the process makes no progress for `seconds`, it prints one line
 * ("no progress for 60 s while waiting for ... from rank 3 on node2 ...", the peer's host from
 * comm_host_name) and exits 1 two seconds later
 * (so the other ranks timing out about then, one of which may wait on the stopped rank itself,
 * print theirs), and mpirun ends the other ranks. A rank orphaned by a lost launcher ends itself the same way. The message is
 * formatted when armed, so the signal handler only writes it (async-signal-safe).
 *
 * Once initialised, comm's blocking calls report the rank they wait on (comm_set_wait_hook): an
 * armed wait's message then names that rank (a reduction's neighbour that stopped), and a
 * blocking call outside any armed wait is watched under the call's own name. */
#ifndef PT_WATCHDOG_H
#define PT_WATCHDOG_H

#include <stdint.h>

/* seconds <= 0 disables the watchdog. */
void watchdog_init(int seconds, int rank);
/* (Re)starts the countdown for a wait on `what` (peer: the rank waited on, or -1). */
void watchdog_arm(const char *what, int peer, int64_t step);
/* The same for a wait on a rank that is itself waiting on others (rank 0's verdict after it
 * gathered from every rank): the countdown is longer by half (at least 2 s), so the rank that
 * can name the missing one ends the job first. */
void watchdog_arm_relay(const char *what, int peer, int64_t step);
void watchdog_disarm(void);

#endif
