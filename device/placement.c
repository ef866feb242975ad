/* device/placement.c: CPU binding near each rank's GPU, or spread over NUMA nodes and cores
 * (the contract is in placement.h). Every rank plans the whole node from the same inputs and
 * takes its own entry, so ranks agree without talking to each other. */
#include "device/placement.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t errsz, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errsz, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && errsz) vsnprintf(err, errsz, fmt, ap);
  va_end(ap);
  return -1;
}

/* hwloc's bitmap operations return -1 only when they cannot grow the bitmap. */
#define BM(call)                                                                            \
  do {                                                                                      \
    if ((call) < 0) return fail(err, errsz, "hwloc: %s failed (out of memory)", #call);     \
  } while (0)

/* appends to a fixed buffer; output that does not fit is cut (the line is for people) */
static void cat(char *buf, size_t bufsz, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void cat(char *buf, size_t bufsz, const char *fmt, ...) {
  size_t used = strlen(buf);
  if (used + 1 >= bufsz) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + used, bufsz - used, fmt, ap);
  va_end(ap);
}

/* --- Units: the cores (or PUs where the topology has no cores) ranks get whole ------------- */

static int unit_depth(hwloc_topology_t topo) {
  return hwloc_get_type_or_below_depth(topo, HWLOC_OBJ_CORE);
}

static int count_units(hwloc_topology_t topo, hwloc_const_cpuset_t set) {
  int d = unit_depth(topo), total = hwloc_get_nbobjs_by_depth(topo, d), n = 0;
  for (int i = 0; i < total; i++)
    n += hwloc_bitmap_intersects(hwloc_get_obj_by_depth(topo, d, i)->cpuset, set);
  return n;
}

/* Units [lo, hi) of set, counted in logical order, into out (cut down to set's CPUs). */
static int take_units(hwloc_topology_t topo, hwloc_const_cpuset_t set, int lo, int hi,
                      hwloc_cpuset_t out, char *err, size_t errsz) {
  int d = unit_depth(topo), total = hwloc_get_nbobjs_by_depth(topo, d), q = 0;
  hwloc_bitmap_zero(out);
  for (int i = 0; i < total && q < hi; i++) {
    hwloc_obj_t u = hwloc_get_obj_by_depth(topo, d, i);
    if (!hwloc_bitmap_intersects(u->cpuset, set)) continue;
    if (q >= lo) BM(hwloc_bitmap_or(out, out, u->cpuset));
    q++;
  }
  BM(hwloc_bitmap_and(out, out, set));
  return 0;
}

/* --- Spreading ranks over a set: NUMA nodes first, then contiguous cores ------------------- */

/* set split by NUMA node, in logical order, each part the CPUs no earlier part took (nodes
 * with the same CPUs, e.g. HBM beside DDR, count once); CPUs in no node form a last part.
 * Parts without a unit are dropped. Returns the number of parts, or -1. */
static int numa_parts(hwloc_topology_t topo, hwloc_const_cpuset_t set, hwloc_bitmap_t *parts,
                      int max, char *err, size_t errsz) {
  int n_numa = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE), k = 0;
  hwloc_bitmap_t left = hwloc_bitmap_dup(set);
  if (!left) return fail(err, errsz, "hwloc: hwloc_bitmap_dup failed (out of memory)");
  int rc = 0;
  for (int i = 0; i <= n_numa && rc == 0 && k < max; i++) {
    hwloc_const_cpuset_t where =
        i < n_numa ? hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i)->cpuset : left;
    if (hwloc_bitmap_and(parts[k], where, left) < 0 ||
        hwloc_bitmap_andnot(left, left, parts[k]) < 0)
      rc = fail(err, errsz, "hwloc: bitmap operation failed (out of memory)");
    else if (count_units(topo, parts[k]) > 0)
      k++;
  }
  hwloc_bitmap_free(left);
  return rc < 0 ? -1 : k;
}

/* How many of m ranks each part gets, in proportion to its units (D'Hondt: the next rank goes
 * to the part with the most units per rank, ties to the earlier part). With m <= total units a
 * part never gets more ranks than units: a full part's quotient is below 1, a part with room
 * has one of at least 1. */
static void apportion(const int *units, int k, int m, int *ranks) {
  for (int j = 0; j < k; j++) ranks[j] = 0;
  for (int given = 0; given < m; given++) {
    int best = 0;
    for (int j = 1; j < k; j++)
      if ((long)units[j] * (ranks[best] + 1) > (long)units[best] * (ranks[j] + 1)) best = j;
    ranks[best]++;
  }
}

/* Splits set's units into m contiguous runs for ranks[0..m); more ranks than units share set. */
static int split(hwloc_topology_t topo, hwloc_const_cpuset_t set, const int *ranks, int m,
                 placement_plan *p, char *err, size_t errsz) {
  int c = count_units(topo, set);
  for (int i = 0; i < m; i++) {
    if (m > c) BM(hwloc_bitmap_copy(p->cpus[ranks[i]], set));
    else if (take_units(topo, set, i * c / m, (i + 1) * c / m, p->cpus[ranks[i]], err, errsz) < 0)
      return -1;
    p->sharers[ranks[i]] = m > c ? m : 1;
  }
  return 0;
}

/* The fewest cores a rank gets when m ranks take runs of whole parts (rank i: parts
 * [i*k/m, (i+1)*k/m)), or when each part j is split among per[j] ranks. */
static int fewest_grouped(const int *units, int k, int m) {
  int fewest = -1;
  for (int i = 0; i < m; i++) {
    int sum = 0;
    for (int j = i * k / m; j < (i + 1) * k / m; j++) sum += units[j];
    if (fewest < 0 || sum < fewest) fewest = sum;
  }
  return fewest;
}

static int fewest_split(const int *units, const int *per, int k) {
  int fewest = -1;
  for (int j = 0; j < k; j++)
    if (per[j] > 0 && (fewest < 0 || units[j] / per[j] < fewest)) fewest = units[j] / per[j];
  return fewest;
}

static int give_runs(const int *ranks, int m, hwloc_bitmap_t *parts, int k, placement_plan *p,
                     char *err, size_t errsz) {
  for (int i = 0; i < m; i++) {
    hwloc_bitmap_zero(p->cpus[ranks[i]]);
    for (int j = i * k / m; j < (i + 1) * k / m; j++)
      BM(hwloc_bitmap_or(p->cpus[ranks[i]], p->cpus[ranks[i]], parts[j]));
    p->sharers[ranks[i]] = 1;
  }
  return 0;
}

/* Gives ranks[0..m) the k NUMA parts. Ranks are apportioned to parts by their core counts,
 * consecutive ranks to the same part, and each part is split. With no more ranks than parts,
 * each rank can instead take a run of whole parts (one rank alone: all of them), which is
 * chosen unless it leaves some rank with fewer cores (parts of unequal size, e.g. a cgroup
 * that allows most of one node and a core of another): the slowest stage sets the pace. */
static int spread_parts(hwloc_topology_t topo, const int *ranks, int m, hwloc_bitmap_t *parts,
                        int k, placement_plan *p, char *err, size_t errsz) {
  int *units = calloc((size_t)k, sizeof *units), *per = calloc((size_t)k, sizeof *per), rc = 0;
  if (!units || !per) rc = fail(err, errsz, "placement: out of memory");
  for (int j = 0; j < k && rc == 0; j++) units[j] = count_units(topo, parts[j]);
  if (rc == 0) apportion(units, k, m, per);
  if (rc == 0 && m <= k && fewest_grouped(units, k, m) >= fewest_split(units, per, k)) {
    rc = give_runs(ranks, m, parts, k, p, err, errsz);
  } else {
    for (int j = 0, first = 0; j < k && rc == 0; first += per[j], j++)
      rc = split(topo, parts[j], ranks + first, per[j], p, err, errsz);
  }
  free(units);
  free(per);
  return rc;
}

static int spread(hwloc_topology_t topo, hwloc_const_cpuset_t set, const int *ranks, int m,
                  placement_plan *p, char *err, size_t errsz) {
  int c = count_units(topo, set);
  if (c == 0) return fail(err, errsz, "placement: no cores to place %d ranks on", m);
  if (m > c) return split(topo, set, ranks, m, p, err, errsz);
  int max = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE) + 1, k = 0, rc = 0;
  hwloc_bitmap_t *parts = calloc((size_t)max, sizeof *parts);
  if (!parts) return fail(err, errsz, "placement: out of memory");
  for (int j = 0; j < max && rc == 0; j++)
    if (!(parts[j] = hwloc_bitmap_alloc())) rc = fail(err, errsz, "hwloc: out of memory");
  if (rc == 0) rc = k = numa_parts(topo, set, parts, max, err, errsz);
  if (rc >= 0) rc = spread_parts(topo, ranks, m, parts, k, p, err, errsz);
  for (int j = 0; j < max; j++) hwloc_bitmap_free(parts[j]); /* NULL is fine */
  free(parts);
  return rc < 0 ? -1 : 0;
}

/* --- GPUs ------------------------------------------------------------------------------------ */

/* The CPUs of pool nearest the PCI device bus_id, into loc: 1 found, 0 not (the note says
 * why), -1 error. */
static int gpu_locality(hwloc_topology_t topo, hwloc_const_cpuset_t pool, const char *bus_id,
                        int rank, hwloc_cpuset_t loc, placement_plan *p, char *err, size_t errsz) {
  if (!bus_id) {
    snprintf(p->note, sizeof p->note, "local rank %d has no GPU: cores spread as without GPUs",
             rank);
    return 0;
  }
  hwloc_obj_t dev = hwloc_get_pcidev_by_busidstring(topo, bus_id);
  hwloc_obj_t near = dev ? hwloc_get_non_io_ancestor_obj(topo, dev) : NULL;
  if (!near || !near->cpuset) {
    snprintf(p->note, sizeof p->note, "GPU %s (local rank %d) is not in the hwloc topology: "
             "cores spread as without GPUs", bus_id, rank);
    return 0;
  }
  BM(hwloc_bitmap_and(loc, near->cpuset, pool));
  if (hwloc_bitmap_iszero(loc)) {
    snprintf(p->note, sizeof p->note, "the cores nearest GPU %s (local rank %d) are not "
             "available to this job: cores spread as without GPUs", bus_id, rank);
    return 0;
  }
  return 1;
}

/* 1 when some earlier group's locality overlaps loc[r] without being equal (the note says
 * which): one GPU at the machine level and another under a package cannot share fairly. */
static int overlaps(hwloc_bitmap_t *loc, const int *lead, int r, placement_plan *p) {
  for (int q = 0; q < r; q++) {
    if (lead[q] != q || !hwloc_bitmap_intersects(loc[q], loc[r])) continue;
    char a[96], b[96];
    hwloc_bitmap_list_snprintf(a, sizeof a, loc[q]);
    hwloc_bitmap_list_snprintf(b, sizeof b, loc[r]);
    snprintf(p->note, sizeof p->note, "the GPUs of local ranks %d and %d are nearest "
             "overlapping CPU sets (%s and %s): cores spread as without GPUs", q, r, a, b);
    return 1;
  }
  return 0;
}

/* Ranks whose GPUs are nearest the same CPUs form a group (led by its lowest rank) and spread
 * over those CPUs. 1 planned, 0 fall back (overlapping localities), -1 error. */
static int group_by_locality(hwloc_topology_t topo, hwloc_bitmap_t *loc, int *lead,
                             int *members, placement_plan *p, char *err, size_t errsz) {
  int n = p->n;
  for (int r = 0; r < n; r++) {
    lead[r] = r;
    for (int q = 0; q < r && lead[r] == r; q++)
      if (lead[q] == q && hwloc_bitmap_isequal(loc[q], loc[r])) lead[r] = q;
    if (lead[r] == r && overlaps(loc, lead, r, p)) return 0;
  }
  for (int g = 0; g < n; g++) {
    if (lead[g] != g) continue;
    int m = 0;
    for (int r = 0; r < n; r++)
      if (lead[r] == g) members[m++] = r;
    if (spread(topo, loc[g], members, m, p, err, errsz) < 0) return -1;
  }
  return 1;
}

static int plan_gpus(hwloc_topology_t topo, hwloc_const_cpuset_t pool, const char *const *ids,
                     placement_plan *p, char *err, size_t errsz) {
  int n = p->n, rc = 1;
  hwloc_bitmap_t *loc = calloc((size_t)n, sizeof *loc);
  int *lead = calloc((size_t)n, sizeof *lead), *members = calloc((size_t)n, sizeof *members);
  if (!loc || !lead || !members) rc = fail(err, errsz, "placement: out of memory");
  for (int r = 0; r < n && rc == 1; r++) {
    if (!(loc[r] = hwloc_bitmap_alloc())) rc = fail(err, errsz, "hwloc: out of memory");
    else rc = gpu_locality(topo, pool, ids[r], r, loc[r], p, err, errsz);
  }
  if (rc == 1) rc = group_by_locality(topo, loc, lead, members, p, err, errsz);
  for (int r = 0; loc && r < n; r++) hwloc_bitmap_free(loc[r]);
  free(loc);
  free(lead);
  free(members);
  return rc;
}

/* --- The node's plan ------------------------------------------------------------------------- */

void placement_plan_free(placement_plan *p) {
  if (!p) return;
  for (int r = 0; p->cpus && r < p->n; r++) hwloc_bitmap_free(p->cpus[r]);
  free(p->cpus);
  free(p->sharers);
  memset(p, 0, sizeof *p);
}

int placement_plan_node(hwloc_topology_t topo, hwloc_const_cpuset_t pool, int local_size,
                        const char *const *gpu_bus_ids, placement_plan *out,
                        char *err, size_t errsz) {
  memset(out, 0, sizeof *out);
  if (local_size < 1) return fail(err, errsz, "placement: local_size %d < 1", local_size);
  if (!pool) pool = hwloc_topology_get_allowed_cpuset(topo);
  if (!pool || hwloc_bitmap_iszero(pool)) return fail(err, errsz, "placement: no CPUs allowed");
  out->n = local_size;
  out->cpus = calloc((size_t)local_size, sizeof *out->cpus);
  out->sharers = calloc((size_t)local_size, sizeof *out->sharers);
  if (!out->cpus || !out->sharers) return fail(err, errsz, "placement: out of memory");
  for (int r = 0; r < local_size; r++)
    if (!(out->cpus[r] = hwloc_bitmap_alloc())) return fail(err, errsz, "hwloc: out of memory");
  if (gpu_bus_ids) {
    int rc = plan_gpus(topo, pool, gpu_bus_ids, out, err, errsz);
    if (rc < 0) return -1;
    out->near_gpu = rc == 1;
    if (out->near_gpu) return 0;
  }
  int *ranks = calloc((size_t)local_size, sizeof *ranks);
  if (!ranks) return fail(err, errsz, "placement: out of memory");
  for (int r = 0; r < local_size; r++) ranks[r] = r;
  int rc = spread(topo, pool, ranks, local_size, out, err, errsz);
  free(ranks);
  return rc;
}

/* --- Describing a set ------------------------------------------------------------------------ */

int placement_describe(hwloc_topology_t topo, hwloc_const_cpuset_t set, char *buf, size_t bufsz) {
  int d = unit_depth(topo), total = hwloc_get_nbobjs_by_depth(topo, d), n = 0, bad = 0;
  int n_numa = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  hwloc_const_cpuset_t pool = hwloc_topology_get_allowed_cpuset(topo);
  hwloc_bitmap_t idx = hwloc_bitmap_alloc(), nodes = hwloc_bitmap_alloc();
  snprintf(buf, bufsz, "?");
  for (int i = 0; i < total && idx && nodes; i++) {
    hwloc_obj_t u = hwloc_get_obj_by_depth(topo, d, i);
    if (!hwloc_bitmap_intersects(u->cpuset, set)) continue;
    n++;
    bad |= hwloc_bitmap_set(idx, u->logical_index);
  }
  for (int i = 0; i < n_numa && idx && nodes; i++) {
    hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
    if (hwloc_bitmap_intersects(node->cpuset, set)) bad |= hwloc_bitmap_set(nodes, node->os_index);
  }
  if (idx && nodes && bad == 0) {
    /* logical core numbers say where in the machine; OS CPU numbers are what taskset shows */
    const char *unit = hwloc_get_depth_type(topo, d) == HWLOC_OBJ_CORE ? "core" : "PU";
    char il[128], nl[64], cl[256];
    hwloc_bitmap_list_snprintf(il, sizeof il, idx);
    hwloc_bitmap_list_snprintf(nl, sizeof nl, nodes);
    hwloc_bitmap_list_snprintf(cl, sizeof cl, set);
    if (n > 1 && hwloc_bitmap_isincluded(pool, set)) snprintf(buf, bufsz, "all %d %ss", n, unit);
    else
      snprintf(buf, bufsz, "%s%s %s of %d", unit, n == 1 ? "" : "s", il, count_units(topo, pool));
    if (!hwloc_bitmap_iszero(nodes))
      cat(buf, bufsz, " (NUMA node%s %s)", hwloc_bitmap_weight(nodes) > 1 ? "s" : "", nl);
    cat(buf, bufsz, ", CPUs %s", cl);
  }
  hwloc_bitmap_free(idx);
  hwloc_bitmap_free(nodes);
  return idx && nodes && bad == 0 ? n : -1;
}

/* --- How the launcher bound us --------------------------------------------------------------- */

int placement_launcher_binding(char *why, size_t whysz) {
  /* What Open MPI 4's mpirun exports for --bind-to, --cpu-list, --cpu-set and --rankfile (and
   * what a user exports to the same effect), and Open MPI 5's (PRRTE) names. "none" asks
   * mpirun not to bind: that leaves the choice to us. */
  static const char *const asked[] = {
      "OMPI_MCA_hwloc_base_binding_policy", "OMPI_MCA_hwloc_base_cpu_list",
      "OMPI_MCA_hwloc_base_cpu_set",        "OMPI_MCA_orte_rankfile",
      "OMPI_MCA_rmaps_rank_file_path",      "PRTE_MCA_hwloc_default_binding_policy",
      "PRTE_MCA_hwloc_default_cpu_list"};
  /* --map-by X:PE=n binds each rank to n cores */
  static const char *const mapping[] = {"OMPI_MCA_rmaps_base_mapping_policy",
                                        "PRTE_MCA_rmaps_default_mapping_policy"};
  if (why && whysz) why[0] = '\0';
  for (size_t i = 0; i < sizeof asked / sizeof *asked; i++) {
    const char *v = getenv(asked[i]);
    if (!v || !*v || strcmp(v, "none") == 0) continue;
    if (why && whysz) snprintf(why, whysz, "%s=%s", asked[i], v);
    return PLACEMENT_LAUNCHER_EXPLICIT;
  }
  for (size_t i = 0; i < sizeof mapping / sizeof *mapping; i++) {
    const char *v = getenv(mapping[i]);
    if (!v || !(strstr(v, "PE=") || strstr(v, "pe="))) continue;
    if (why && whysz) snprintf(why, whysz, "%s=%s", mapping[i], v);
    return PLACEMENT_LAUNCHER_EXPLICIT;
  }
  if (getenv("OMPI_MCA_orte_hnp_uri") || getenv("PRTE_LAUNCHED"))
    return PLACEMENT_LAUNCHER_OMPI_DEFAULT;
  return PLACEMENT_LAUNCHER_OTHER;
}

/* --- Deciding ---------------------------------------------------------------------------- */

static int check_request(const placement_request *rq, char *err, size_t errsz) {
  if (rq->local_size < 1 || rq->local_rank < 0 || rq->local_rank >= rq->local_size)
    return fail(err, errsz, "placement: local rank %d of %d is out of range", rq->local_rank,
                rq->local_size);
  if (rq->bind != PT_BIND_NONE && rq->bind != PT_BIND_AUTO)
    return fail(err, errsz, "placement: unknown bind mode %d", rq->bind);
  return 0;
}

static const char *own_bus_id(const placement_request *rq) {
  return rq->gpu_bus_ids ? rq->gpu_bus_ids[rq->local_rank] : NULL;
}

/* A kept binding that misses the GPU's cores is worth a word: the GPU's traffic crosses the
 * socket link. */
static void note_far_gpu(hwloc_topology_t topo, const placement_request *rq,
                         hwloc_const_cpuset_t set, placement_result *out) {
  const char *bus = own_bus_id(rq);
  hwloc_obj_t dev = bus ? hwloc_get_pcidev_by_busidstring(topo, bus) : NULL;
  hwloc_obj_t near = dev ? hwloc_get_non_io_ancestor_obj(topo, dev) : NULL;
  if (!near || !near->cpuset) return;
  out->near_gpu = hwloc_bitmap_isincluded(set, near->cpuset);
  if (hwloc_bitmap_intersects(set, near->cpuset)) return;
  char cl[128];
  hwloc_bitmap_list_snprintf(cl, sizeof cl, near->cpuset);
  cat(out->text, sizeof out->text, "; not near its GPU %s (nearest CPUs %s)", bus, cl);
}

/* Leaves the binding as it is (how: why) and describes it. How many ranks share a kept set is
 * not visible from here: assuming the launcher spread the node's ranks evenly over sets like
 * this one, about local_size * n_cores / cores do (the whole node: all of them). */
static int keep(hwloc_topology_t topo, const placement_request *rq, hwloc_const_cpuset_t current,
                const char *how, hwloc_cpuset_t set, placement_result *out,
                char *err, size_t errsz) {
  hwloc_const_cpuset_t pool = hwloc_topology_get_allowed_cpuset(topo);
  int cores = count_units(topo, pool);
  BM(hwloc_bitmap_copy(set, current));
  out->bound = 0;
  out->n_cores = count_units(topo, set);
  int sharers = (int)(((long)rq->local_size * out->n_cores + cores - 1) / (cores > 0 ? cores : 1));
  out->threads = sharers > 0 && out->n_cores / sharers > 1 ? out->n_cores / sharers : 1;
  snprintf(out->text, sizeof out->text, "%s: ", how);
  if (hwloc_bitmap_isincluded(pool, set)) {
    cat(out->text, sizeof out->text, "not bound");
    if (rq->local_size > 1)
      cat(out->text, sizeof out->text, ", %d ranks share %d cores", rq->local_size, out->n_cores);
  } else {
    char d[384];
    if (placement_describe(topo, set, d, sizeof d) < 0)
      return fail(err, errsz, "hwloc: out of memory");
    cat(out->text, sizeof out->text, "%s", d);
  }
  note_far_gpu(topo, rq, set, out);
  return 0;
}

/* Our binding: this rank's entry of the node's plan, described. */
static int take_ours(hwloc_topology_t topo, const placement_request *rq,
                     const placement_plan *plan, hwloc_const_cpuset_t current, int launcher,
                     hwloc_cpuset_t set, placement_result *out, char *err, size_t errsz) {
  hwloc_const_cpuset_t pool = hwloc_topology_get_allowed_cpuset(topo);
  int sharers = plan->sharers[rq->local_rank];
  BM(hwloc_bitmap_copy(set, plan->cpus[rq->local_rank]));
  out->bound = 1;
  out->near_gpu = plan->near_gpu;
  out->n_cores = count_units(topo, set);
  out->threads = out->n_cores / sharers > 1 ? out->n_cores / sharers : 1;
  if (sharers > 1 && hwloc_bitmap_isincluded(pool, set)) {
    snprintf(out->text, sizeof out->text, "not bound: %d ranks share %d cores", sharers,
             out->n_cores);
  } else {
    if (placement_describe(topo, set, out->text, sizeof out->text) < 0)
      return fail(err, errsz, "hwloc: out of memory");
    if (sharers > 1) cat(out->text, sizeof out->text, ", shared by %d ranks", sharers);
  }
  if (plan->near_gpu && rq->gpu >= 0)
    cat(out->text, sizeof out->text, ", near GPU %d (%s)", rq->gpu, own_bus_id(rq));
  else if (plan->near_gpu)
    cat(out->text, sizeof out->text, ", near GPU %s", own_bus_id(rq));
  if (plan->note[0]) cat(out->text, sizeof out->text, "; %s", plan->note);
  if (launcher == PLACEMENT_LAUNCHER_OMPI_DEFAULT && !hwloc_bitmap_isincluded(pool, current) &&
      !hwloc_bitmap_isequal(current, set)) {
    char cl[128];
    hwloc_bitmap_list_snprintf(cl, sizeof cl, current);
    cat(out->text, sizeof out->text, "; replaces the binding it started with (CPUs %s; "
        "--bind none keeps it)", cl);
  }
  return 0;
}

int placement_decide(hwloc_topology_t topo, const placement_request *rq,
                     hwloc_const_cpuset_t current, int launcher, const char *why,
                     hwloc_cpuset_t set, placement_result *out, char *err, size_t errsz) {
  memset(out, 0, sizeof *out);
  if (check_request(rq, err, errsz) < 0) return -1;
  hwloc_const_cpuset_t pool = hwloc_topology_get_allowed_cpuset(topo);
  int narrower = !hwloc_bitmap_isincluded(pool, current), rc;
  char how[256];
  if (rq->bind == PT_BIND_NONE) {
    rc = keep(topo, rq, current, "--bind none", set, out, err, errsz);
  } else if (launcher == PLACEMENT_LAUNCHER_EXPLICIT) {
    snprintf(how, sizeof how, "kept mpirun's binding (%s)", why ? why : "");
    rc = keep(topo, rq, current, how, set, out, err, errsz);
  } else if (narrower && launcher != PLACEMENT_LAUNCHER_OMPI_DEFAULT) {
    rc = keep(topo, rq, current, "kept the binding it was started with", set, out, err, errsz);
  } else {
    placement_plan plan;
    rc = placement_plan_node(topo, NULL, rq->local_size, rq->gpu_bus_ids, &plan, err, errsz);
    if (rc == 0) rc = take_ours(topo, rq, &plan, current, launcher, set, out, err, errsz);
    placement_plan_free(&plan);
  }
  if (rc == 0) hwloc_bitmap_list_snprintf(out->cpus, sizeof out->cpus, set);
  return rc;
}

/* --- Binding ------------------------------------------------------------------------------- */

int placement_apply(const placement_request *rq, placement_result *out, char *err, size_t errsz) {
  memset(out, 0, sizeof *out);
  if (check_request(rq, err, errsz) < 0) return -1;
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) < 0)
    return fail(err, errsz, "hwloc_topology_init failed: %s", strerror(errno));
  hwloc_bitmap_t cur = NULL, set = NULL;
  int rc = 0;
  /* PCI devices are needed only to find GPUs, and discovering them costs time */
  if (rq->gpu_bus_ids &&
      hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) < 0)
    rc = fail(err, errsz, "hwloc_topology_set_io_types_filter failed: %s", strerror(errno));
  if (rc == 0 && hwloc_topology_load(topo) < 0)
    rc = fail(err, errsz, "hwloc_topology_load failed: %s", strerror(errno));
  if (rc == 0 && (!(cur = hwloc_bitmap_alloc()) || !(set = hwloc_bitmap_alloc())))
    rc = fail(err, errsz, "hwloc: out of memory");
  if (rc == 0 && hwloc_get_cpubind(topo, cur, HWLOC_CPUBIND_PROCESS) < 0)
    rc = fail(err, errsz, "hwloc_get_cpubind failed: %s", strerror(errno));
  char why[256];
  int launcher = placement_launcher_binding(why, sizeof why);
  if (rc == 0) rc = placement_decide(topo, rq, cur, launcher, why, set, out, err, errsz);
  /* PROCESS: every thread that exists now (MPI's, OpenBLAS's pool) moves too */
  if (rc == 0 && out->bound && hwloc_set_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) < 0)
    rc = fail(err, errsz, "hwloc_set_cpubind(CPUs %s) failed: %s", out->cpus, strerror(errno));
  hwloc_bitmap_free(cur);
  hwloc_bitmap_free(set);
  hwloc_topology_destroy(topo);
  return rc;
}

/* --- The GPU rule ---------------------------------------------------------------------------- */

int placement_check_gpus(int local_size, int n_gpus, int devices_given, char *err, size_t errsz) {
  if (n_gpus <= 0 || local_size <= n_gpus || devices_given) return 0;
  /* an example device list that shares the GPUs evenly, for a handful of ranks */
  char example[96] = "";
  if (local_size <= 8) {
    cat(example, sizeof example, " (and e.g. pipeline.devices: [");
    for (int r = 0; r < local_size; r++)
      cat(example, sizeof example, "%s%d", r ? ", " : "", r * n_gpus / local_size);
    cat(example, sizeof example, "])");
  }
  return fail(err, errsz, "%d ranks on this node but only %d GPU%s: each rank needs a GPU of "
              "its own under NCCL. Start at most %d rank%s per node, or let ranks share GPUs "
              "through host memory with comm.backend: mpi%s", local_size, n_gpus,
              n_gpus == 1 ? "" : "s", n_gpus, n_gpus == 1 ? "" : "s", example);
}
