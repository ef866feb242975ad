/* launcher/self_launch.h: pipe_train started without an MPI launcher, for a job of several
 * ranks, starts them on this node itself through Open MPI's launcher: the one pipetrain was
 * built with (CMake's MPIEXEC_EXECUTABLE, compiled in as PT_MPIEXEC), or PIPETRAIN_MPIEXEC
 * from the environment. This process becomes that launcher (exec), so signals (SIGINT,
 * SIGTERM: the ranks save and exit), exit codes and a dead rank behave exactly as under
 * mpirun, because it is mpirun. The launcher gets -np RANKS, --oversubscribe where the ranks
 * outnumber this node's cores, --allow-run-as-root as root, and this program with the same
 * arguments (less --nproc). One line on stderr says what was started and the mpirun command
 * that does the same. Called by the one process before MPI is initialised. */
#ifndef PT_SELF_LAUNCH_H
#define PT_SELF_LAUNCH_H

/* Does not return: execs the launcher, or ends the process with exit 2 and one line saying why
 * and how to start the job instead. what: the job's shape for the line (e.g. "2 stages x 1
 * replica"). argv: this program's own arguments. */
void self_launch(int ranks, const char *what, int argc, char **argv);

/* A process that self_launch started that still finds no MPI launcher around it (the launcher
 * did not pass its environment): 1, and the caller must stop rather than launch again. */
int self_launch_is_child(void);

#endif
