/* device/placement.h: which CPU cores each rank of a node runs on (hwloc), and the
 * ranks-per-GPU rule.
 *
 * Contract
 *   - placement_apply() binds the calling process and describes the result in one printable
 *     line. HWLOC_CPUBIND_PROCESS: threads that exist already (OpenBLAS starts its pool when
 *     the library loads, MPI its progress threads) move too, later ones inherit the binding.
 *     Call it before allocating the big buffers, so first-touch puts them on the rank's NUMA
 *     node. Every local rank calls it with the same local_size and gpu_bus_ids; each computes
 *     the same whole-node plan and takes its own entry, so no communication is needed and no
 *     two ranks overlap.
 *   - --bind auto (PT_BIND_AUTO):
 *       1. a binding the launcher was explicitly asked for is kept (Open MPI: --bind-to
 *          other than none, --cpu-list/--cpu-set, --rankfile, --map-by ...:PE=n, or the same
 *          MCA parameters in the environment; see placement_launcher_binding());
 *       2. a process started by Open MPI's mpirun without such a request gets our binding,
 *          replacing Open MPI's default (bind to core for np <= 2, which would put a rank and
 *          all its BLAS threads on one core);
 *       3. otherwise a binding narrower than the machine (taskset or numactl around a
 *          process not started by mpirun, srun, another MPI's launcher) is kept;
 *       4. our binding: with GPUs, each rank gets the cores nearest its GPU (the cpuset of the
 *          GPU's first non-I/O ancestor, usually its package or NUMA node); ranks near the
 *          same cores split them. Without GPUs, or when a GPU's locality is unknown, ranks
 *          are spread over NUMA nodes first (in proportion to their allowed cores; fewer
 *          ranks than nodes: each rank takes whole nodes), then over contiguous core ranges
 *          inside each node, consecutive local ranks on consecutive cores. More ranks than
 *          cores in a group: every rank of the group gets all of the group's cores (for the
 *          whole node that is reported as "not bound: N ranks share C cores").
 *   - --bind none (PT_BIND_NONE): the binding is left as it is and only described.
 *   - Only the CPUs hwloc reports as allowed (cgroups, Slurm's cpusets) are used.
 *   - Errors (hwloc failures, a bad request) return -1 with a message in err; nothing here
 *     exits. Results are deterministic for a given topology and request.
 *
 * The pure pieces (placement_plan_node, placement_decide) take a topology, so tests run them
 * on synthetic or XML topologies without binding anything.
 */
#ifndef PT_PLACEMENT_H
#define PT_PLACEMENT_H

#include <stddef.h>

#include <hwloc.h>

enum { PT_BIND_NONE = 0, PT_BIND_AUTO = 1 };

typedef struct {
  int local_rank, local_size; /* comm_local_rank(), comm_local_size() */
  int bind;                   /* PT_BIND_NONE or PT_BIND_AUTO */
  int gpu;                    /* this rank's device id, only for the printed line; -1: none */
  /* NULL: no GPUs. Otherwise local_size entries, entry r the PCI bus id of local rank r's GPU
   * ("0000:3b:00.0", as cudaDeviceGetPCIBusId gives it; case and an 8-digit domain are fine),
   * NULL for a rank without one. All ranks must pass the same list. */
  const char *const *gpu_bus_ids;
} placement_request;

typedef struct {
  int bound;     /* 1: placement_apply set the binding; 0: left as the process started */
  int n_cores;   /* cores (PUs where the topology has no cores) in the set it runs on */
  int threads;   /* compute threads to use: n_cores / ranks sharing those cores, >= 1 (for a
                  * kept binding an estimate: local_size * n_cores / node cores share it) */
  int near_gpu;  /* 1: the set is the cores nearest this rank's GPU */
  char cpus[256];  /* OS CPU numbers, as sched_getaffinity / taskset -c show them: "0-7,32-39" */
  char text[768];  /* one line for the start-up print, e.g.
                    * "cores 4-5 of 8 (NUMA node 1), CPUs 4-5, near GPU 3 (0000:3b:00.0)" */
} placement_result;

/* Computes, binds and describes this rank's placement. 0 or -1 (err says why). */
int placement_apply(const placement_request *rq, placement_result *out, char *err, size_t errsz);

/* The GPU rule: more ranks on a node than GPUs is an error unless pipeline.devices says how
 * to share them. n_gpus 0 (a CPU run) is never an error. 0 or -1 with the message. */
int placement_check_gpus(int local_size, int n_gpus, int devices_given, char *err, size_t errsz);

/* --- Testable pieces ------------------------------------------------------------------------ */

/* The whole node's plan: one CPU set per local rank. */
typedef struct {
  int n;                /* local ranks */
  hwloc_bitmap_t *cpus; /* [n]: the CPUs of each rank */
  int *sharers;         /* [n]: ranks given exactly the same CPUs (1: its own cores) */
  int near_gpu;         /* 1: the sets follow the GPUs' localities */
  char note[384];       /* why the GPUs were not followed, or "" */
} placement_plan;

/* Plans local_size ranks over pool (NULL: the topology's allowed CPUs). gpu_bus_ids as in
 * placement_request. A GPU that is missing from the topology (or a rank without a GPU, or GPU
 * localities that overlap without being equal) makes the whole node fall back to the plan
 * without GPUs, with the reason in note. Free with placement_plan_free (also after -1). */
int placement_plan_node(hwloc_topology_t topo, hwloc_const_cpuset_t pool, int local_size,
                        const char *const *gpu_bus_ids, placement_plan *out,
                        char *err, size_t errsz);
void placement_plan_free(placement_plan *p);

/* How the launcher bound us, from the environment it set. */
enum {
  PLACEMENT_LAUNCHER_OTHER = 0,    /* not Open MPI's mpirun (or not launched) */
  PLACEMENT_LAUNCHER_OMPI_DEFAULT, /* Open MPI's mpirun with its default binding policy */
  PLACEMENT_LAUNCHER_EXPLICIT      /* a binding was asked for; why names the variable */
};
int placement_launcher_binding(char *why, size_t whysz);

/* Decides this rank's set (written to set) and fills out, without binding: current is the
 * binding the process has now, launcher a PLACEMENT_LAUNCHER_* value and why its reason.
 * out->bound says whether placement_apply must bind to set. 0 or -1. */
int placement_decide(hwloc_topology_t topo, const placement_request *rq,
                     hwloc_const_cpuset_t current, int launcher, const char *why,
                     hwloc_cpuset_t set, placement_result *out, char *err, size_t errsz);

/* "cores 4-5 of 8 (NUMA node 1), CPUs 4-5" for set; "all 8 cores (NUMA nodes 0-1), CPUs 0-7"
 * when set holds every allowed CPU. Returns the number of cores in set. */
int placement_describe(hwloc_topology_t topo, hwloc_const_cpuset_t set, char *buf, size_t bufsz);

#endif
