/* launcher/launch_watch.h: pipe_train as the parent of the Open MPI launcher it started for its
 * own ranks (launcher/self_launch.h), so that an error ends the job at once while a preemption
 * still saves.
 *
 * Why a parent and not exec: Open MPI 4.1's mpiexec waits out odls_base_sigkill_timeout after
 * any rank's non-zero exit, even when every rank has ended, and the same timeout is all the time
 * the ranks get to save when mpiexec itself receives SIGTERM/SIGINT (it forwards SIGTERM, then
 * SIGKILLs). One value cannot be short for the first and long for the second. So the launcher
 * keeps Open MPI's short default and runs in a process group of its own (a terminal's Ctrl-C
 * reaches this process only; the ranks have process groups of their own already), and this
 * process turns SIGTERM into SIGUSR1 and SIGINT into SIGUSR2, which mpiexec forwards to every
 * rank as they are, where they mean what SIGTERM and SIGINT mean (core/signals.h: the rank
 * finishes the step and saves), counted once beside a SIGTERM sent to the rank itself. A second
 * signal here becomes mpiexec's own stop (SIGTERM to it: the ranks end at once). */
#ifndef PT_LAUNCH_WATCH_H
#define PT_LAUNCH_WATCH_H

#include <signal.h>
#include <stdint.h>

/* What the ranks of a self-started job get, through mpiexec, for a SIGTERM or a SIGINT here. */
#define LAUNCH_WATCH_FOR_SIGTERM SIGUSR1
#define LAUNCH_WATCH_FOR_SIGINT SIGUSR2

/* Starts args (args[0] found on PATH; a NULL-terminated list) as a child in its own process
 * group, which gets SIGTERM should this process die, and waits for it. The first SIGTERM/SIGINT
 * here is forwarded to it as LAUNCH_WATCH_FOR_SIGTERM/_FOR_SIGINT, a second one as SIGTERM. A
 * child still running grace_s seconds after the first (0: no limit) gets SIGTERM, and SIGKILL
 * 10 s later. Returns the job's exit code: the child's (its status, or 128 + the signal that
 * ended it); after a signal here, 0 when the ranks saved and 128 + that signal when they ended
 * without a checkpoint (a second signal, a rank still starting up, the grace passed), while a
 * rank's own error (1, 2) stays. Returns -1 with errno set, nothing started, when args[0] cannot
 * be executed. Called once, by the one process, before MPI. */
int launch_watch_run(char **args, int64_t grace_s);

#endif
