/* The real binding under mpirun: every rank calls placement_apply() and reports what the kernel
 * says afterwards (sched_getaffinity), for the main thread and for a thread that was started
 * before the binding (as OpenBLAS's pool is). Rank 0 prints the lines in rank order.
 *
 *   mpirun -np N placement_probe [auto|none] [--check]
 *
 * --check (exit 1 on failure), for a job on one node with --bind auto:
 *   - each rank's affinity, and the early thread's, equal the CPUs placement_apply reported;
 *   - started by Open MPI's mpirun with no binding asked of it: every rank was bound, with no
 *     more ranks than cores the ranks' CPU sets are pairwise disjoint, with more every rank
 *     has every CPU. */
#define _GNU_SOURCE /* sched_getaffinity, pthread_getaffinity_np, CPU_* */
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/placement.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static int g_done;

static void *park(void *arg) {
  (void)arg;
  pthread_mutex_lock(&g_lock);
  while (!g_done) pthread_cond_wait(&g_cond, &g_lock);
  pthread_mutex_unlock(&g_lock);
  return NULL;
}

static void list(const cpu_set_t *s, char *buf, size_t n) {
  buf[0] = '\0';
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, s) || (c > 0 && CPU_ISSET(c - 1, s))) continue;
    int e = c;
    while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, s)) e++;
    size_t used = strlen(buf);
    if (e == c) snprintf(buf + used, n - used, "%s%d", used ? "," : "", c);
    else snprintf(buf + used, n - used, "%s%d-%d", used ? "," : "", c, e);
  }
}

typedef struct {
  cpu_set_t main_cpus, early_thread_cpus, reported;
  int local_size, launcher, bound;
  char line[2048];
} report;

static int fill(report *r, int rank, int local_rank, int local_size, int bind) {
  memset(r, 0, sizeof *r);
  pthread_t early;
  if (pthread_create(&early, NULL, park, NULL) != 0) return -1;
  placement_request rq = {.local_rank = local_rank, .local_size = local_size, .bind = bind,
                          .gpu = -1};
  placement_result out;
  char err[512] = "", why[256];
  int rc = placement_apply(&rq, &out, err, sizeof err);
  if (sched_getaffinity(0, sizeof r->main_cpus, &r->main_cpus) != 0 ||
      pthread_getaffinity_np(early, sizeof r->early_thread_cpus, &r->early_thread_cpus) != 0)
    rc = -1, snprintf(err, sizeof err, "sched_getaffinity failed");
  pthread_mutex_lock(&g_lock);
  g_done = 1;
  pthread_cond_broadcast(&g_cond);
  pthread_mutex_unlock(&g_lock);
  pthread_join(early, NULL);
  char a[256], b[256];
  list(&r->main_cpus, a, sizeof a);
  list(&r->early_thread_cpus, b, sizeof b);
  r->local_size = local_size;
  r->launcher = placement_launcher_binding(why, sizeof why);
  r->bound = rc == 0 && out.bound;
  CPU_ZERO(&r->reported);
  for (char *p = out.cpus; rc == 0 && *p;) { /* "0-3,8" -> set */
    char *end;
    long lo = strtol(p, &end, 10), hi = lo;
    if (*end == '-') hi = strtol(end + 1, &end, 10);
    for (long c = lo; c <= hi && c < CPU_SETSIZE; c++) CPU_SET((int)c, &r->reported);
    p = *end == ',' ? end + 1 : end;
  }
  if (rc == 0)
    snprintf(r->line, sizeof r->line, "rank %d (local %d of %d): %s | threads %d | "
             "sched_getaffinity: %s | thread started before: %s", rank, local_rank, local_size,
             out.text, out.threads, a, b);
  else
    snprintf(r->line, sizeof r->line, "rank %d: placement_apply failed: %s", rank, err);
  return rc;
}

/* Rank 0's verdict over all reports (see the header comment). */
static int check(const report *all, int n) {
  int bad = 0;
  for (int i = 0; i < n; i++) {
    const report *r = &all[i];
    if (!CPU_EQUAL(&r->main_cpus, &r->reported) || !CPU_EQUAL(&r->early_thread_cpus, &r->reported))
      bad = 1, printf("FAIL rank %d: affinity differs from what placement_apply reported\n", i);
    if (r->launcher != PLACEMENT_LAUNCHER_OMPI_DEFAULT) continue; /* kept on purpose */
    if (!r->bound) bad = 1, printf("FAIL rank %d: --bind auto did not bind\n", i);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    for (int j = 0; j < i && r->local_size <= cores; j++) {
      cpu_set_t both;
      CPU_AND(&both, &r->main_cpus, &all[j].main_cpus);
      if (CPU_COUNT(&both) > 0) bad = 1, printf("FAIL ranks %d and %d share CPUs\n", j, i);
    }
    if (r->local_size > cores && CPU_COUNT(&r->main_cpus) != cores)
      bad = 1, printf("FAIL rank %d: %d ranks on %ld cores should share all of them\n", i,
                      r->local_size, cores);
  }
  return bad;
}

int main(int argc, char **argv) {
  int bind = PT_BIND_AUTO, want_check = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "none")) bind = PT_BIND_NONE;
    else if (!strcmp(argv[i], "--check")) want_check = 1;
    else if (strcmp(argv[i], "auto") != 0) {
      fprintf(stderr, "usage: %s [auto|none] [--check]\n", argv[0]);
      return 2;
    }
  }
  MPI_Init(&argc, &argv);
  int rank, size, local_rank, local_size;
  MPI_Comm local;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  MPI_Comm_free(&local);
  report mine, *all = calloc((size_t)size, sizeof *all);
  int rc = fill(&mine, rank, local_rank, local_size, bind);
  MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, 0, MPI_COMM_WORLD);
  int failed = rc != 0, bad = 0;
  MPI_Allreduce(&failed, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int i = 0; i < size; i++) printf("%s\n", all[i].line);
    if (want_check && bind == PT_BIND_AUTO) bad |= check(all, size);
    if (want_check) printf("%s\n", bad ? "placement_probe: FAILED" : "placement_probe: ok");
  }
  MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
  free(all);
  MPI_Finalize();
  return bad ? 1 : 0;
}
