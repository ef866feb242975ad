/* launcher/self_launch.c: pipe_train starting its own ranks (launcher/self_launch.h). */
#include "launcher/self_launch.h"

#include <errno.h>
#include <hwloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/signals.h"
#include "launcher/launch_watch.h"

#ifndef PT_MPIEXEC
#define PT_MPIEXEC "mpirun"
#endif

#define MARK "PIPETRAIN_SELF_LAUNCHED"

int self_launch_is_child(void) { return getenv(MARK) != NULL; }

void self_launch_install_signals(void) {
  if (!self_launch_is_child()) return;
  signals_install_forwarded(LAUNCH_WATCH_FOR_SIGTERM, SIGTERM);
  signals_install_forwarded(LAUNCH_WATCH_FOR_SIGINT, SIGINT);
}

/* Cores of this node as Open MPI counts slots (cores, or hardware threads where the topology
 * shows no cores); 0 when unknown. */
static int node_cores(void) {
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) != 0) return 0;
  int n = 0;
  if (hwloc_topology_load(t) == 0) {
    n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
    if (n <= 0) n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  }
  hwloc_topology_destroy(t);
  return n > 0 ? n : 0;
}

/* The launcher: PIPETRAIN_MPIEXEC, else the build's; found on PATH when not a path. */
static const char *launcher_path(void) {
  const char *p = getenv("PIPETRAIN_MPIEXEC");
  return p && *p ? p : PT_MPIEXEC;
}

/* Appends s to line (shell-quoted when it needs it), bounded. */
static void add_word(char *line, size_t cap, const char *s) {
  size_t at = strlen(line);
  int plain = *s != '\0' && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                      "0123456789-_./=:,+@%") == strlen(s);
  snprintf(line + at, cap - at, plain ? "%s%s" : "%s'%s'", at ? " " : "", s);
}

void self_launch(int ranks, const char *what, int64_t timeout_s, int argc, char **argv) {
  if (self_launch_is_child())
    pt_fail_input("started by pipe_train's own launch, but MPI's environment did not reach this "
                  "process; start the job with mpirun -np %d instead", ranks);
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) pt_fail_input("cannot find this program's path to start %d ranks; start it with "
                              "mpirun -np %d, or add --sequential", ranks, ranks);
  self[len] = '\0';
  char np[16];
  snprintf(np, sizeof np, "%d", ranks);
  int cores = node_cores(), over = cores > 0 && ranks > cores, root = geteuid() == 0;
  char **args = pt_calloc((size_t)argc + 8, sizeof(char *));
  int n = 0;
  args[n++] = (char *)launcher_path();
  args[n++] = "-np";
  args[n++] = np;
  if (over) args[n++] = "--oversubscribe";
  if (root) args[n++] = "--allow-run-as-root";
  args[n++] = self;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--nproc")) { /* its value was checked by the caller */
      i++;
      continue;
    }
    args[n++] = argv[i];
  }
  char line[4096] = "";
  for (int i = 0; i < n; i++) add_word(line, sizeof line, args[i]);
  fprintf(stderr, "pipetrain: starting %d ranks on this node (%s%s) through Open MPI: %s\n",
          ranks, what, over ? ", more ranks than cores" : "", line);
  fflush(NULL);
  setenv(MARK, "1", 1);
  /* a backstop only: the ranks end a hung step or save themselves within timeout_s (0: never) */
  int code = launch_watch_run(args, timeout_s > 0 ? 3 * timeout_s + 60 : 0);
  if (code < 0)
    pt_fail_input("cannot start %s to run %d ranks (%s); start the job with mpirun -np %d, or "
                  "add --sequential (same results, one process)", args[0], ranks, strerror(errno),
                  ranks);
  free(args);
  exit(code);
}
