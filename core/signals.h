/* core/signals.h: preemption. The first SIGTERM or SIGINT only raises a flag: the training
 * loop finishes the step it is in, writes a checkpoint and exits 0. A second one ends the
 * process at once (exit status 128 + signal). */
#ifndef PT_SIGNALS_H
#define PT_SIGNALS_H

void signals_install(void);
/* The signal received (SIGTERM or SIGINT), or 0. */
int signals_pending(void);

#endif
