/* core/signals.h: preemption. Once training starts (signals_defer_first), the first SIGTERM or
 * SIGINT only raises a flag: the training loop finishes the step it is in, writes a checkpoint
 * and exits 0. A second one, or the first before training starts (reading input, where nothing
 * is worth saving and a read may block), ends the process at once (exit status 128 + signal). */
#ifndef PT_SIGNALS_H
#define PT_SIGNALS_H

void signals_install(void);
/* From now on the first signal only raises the flag (the run's start: engine/run.c). */
void signals_defer_first(void);
/* The signal received (SIGTERM or SIGINT), or 0. */
int signals_pending(void);

#endif
