/* core/signals.h: preemption. Once training starts (signals_defer_first), the first SIGTERM or
 * SIGINT only raises a flag: the training loop finishes the step it is in, writes a checkpoint
 * and exits 0. A second one, or the first before training starts (reading input, where nothing
 * is worth saving and a read may block), ends the process at once (exit status 128 + signal). */
#ifndef PT_SIGNALS_H
#define PT_SIGNALS_H

void signals_install(void);
/* After signals_install: sig stands for `as` (SIGTERM or SIGINT) forwarded by a parent that got
 * it (the ranks of a job pipe_train started itself: launcher/launch_watch.h). It acts as `as`
 * does, except that once a signal is pending it is ignored: the original may have reached this
 * rank too (SIGTERM to every pipe_train), and the two are one preemption; the same when the
 * copy comes first, whose original is then absorbed once. At most 4 such. */
void signals_install_forwarded(int sig, int as);
/* From now on the first signal only raises the flag (the run's start: engine/run.c). */
void signals_defer_first(void);
/* The process is leaving on purpose (engine/run.c run_exit): from now on SIGTERM, SIGINT and the
 * forwarded ones end it silently, as they would without pipetrain's handlers. mpirun ends a job
 * with SIGTERM to the ranks still running once one exits non-zero; a rank between its
 * MPI_Finalize and its exit would otherwise add "signal before training started" to the one
 * line the job's error is. */
void signals_restore_default(void);
/* The signal received (SIGTERM or SIGINT), or 0. */
int signals_pending(void);

#endif
