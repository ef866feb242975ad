/* launcher/self_launch.h: pipe_train started without an MPI launcher, for a job of several
 * ranks, starts them on this node itself through Open MPI's launcher: the one pipetrain was
 * built with (CMake's MPIEXEC_EXECUTABLE, compiled in as PT_MPIEXEC), or PIPETRAIN_MPIEXEC
 * from the environment. This process stays the launcher's parent (launcher/launch_watch.h):
 * a rank's error ends the job within seconds (Open MPI's own odls_base_sigkill_timeout, 1 s by
 * default), and SIGTERM/SIGINT to this process reach the ranks as a preemption (they finish the
 * step, save, and the job exits 0), as SIGTERM sent to the ranks themselves does. The exit code
 * is the launcher's. The launcher gets -np RANKS, --oversubscribe where the ranks outnumber this
 * node's cores, --allow-run-as-root as root, and this program with the same arguments (less
 * --nproc). One line on stderr says what was started and the mpirun command that does the same.
 * Called by the one process before MPI is initialised. */
#ifndef PT_SELF_LAUNCH_H
#define PT_SELF_LAUNCH_H

#include <stdint.h>

/* Does not return: runs the job and ends the process with its exit code, or with exit 2 and one
 * line saying why and how to start the job instead when the launcher cannot start. what: the
 * job's shape for the line (e.g. "2 stages x 1 replica"). timeout_s: the spec's
 * pipeline.timeout_s (after a signal, the ranks that have not stopped within 3 x timeout_s +
 * 60 s are stopped without a checkpoint; 0: never). argv: this program's own arguments. */
void self_launch(int ranks, const char *what, int64_t timeout_s, int argc, char **argv);

/* A process that self_launch started that still finds no MPI launcher around it (the launcher
 * did not pass its environment): 1, and the caller must stop rather than launch again. */
int self_launch_is_child(void);

/* In a rank that self_launch started, after signals_install: the signals its parent forwards a
 * SIGTERM/SIGINT as (launcher/launch_watch.h) act as those do; elsewhere nothing. */
void self_launch_install_signals(void);

#endif
